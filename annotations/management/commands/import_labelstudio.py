from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, source_arg_or_none, study_arg, user_arg
from annotations.interchange.labelstudio.importer import labelstudio_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Import a Label Studio JSON export (project, snapshot or JSON_MIN; .json, or a .zip with its config "
        "and media) into a study, or create a study from its labeling config (all or nothing)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("export", type=file_arg, help="EXPORT.json (or a .zip holding it)")
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--study", help="Study id or exact name to import into")
        group.add_argument("--create", metavar="NAME", help="Create a study of this name")
        parser.add_argument("--config", type=file_arg, help="The project's labeling config (XML)")
        parser.add_argument(
            "--media-root",
            type=file_arg,
            help="Folder holding the images: upload/... for /data/upload/..., and ?d= paths of local files",
        )
        parser.add_argument("--owner", help="Username of the new study's owner (with --create)")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"]) if options["study"] else None
        owner = user_arg(options["owner"]) if study is None else None
        if study is not None and options["owner"]:
            raise CommandError("--owner goes with --create")
        try:
            report = labelstudio_import(
                address=source_arg(options["export"], study=study),
                study=study,
                owner=owner,
                name=options["create"],
                config_address=source_arg_or_none(options["config"], study=study),
                media_root=source_arg_or_none(options["media_root"], study=study),
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(dump(report.as_dict()))
