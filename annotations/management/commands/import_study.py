from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, user_arg
from annotations.interchange.study_import import study_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = "Create a new study from an export (JSONL, or a zip with the image files)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=file_arg)
        parser.add_argument("--owner")
        parser.add_argument("--name", help="Name of the new study (default: the exported name)")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_arg(options["owner"])
        try:
            study = study_import(
                owner=owner, address=source_arg(options["path"], study=None), name=options["name"]
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(
            dump(
                {
                    "id": study.pk,
                    "name": study.name,
                    "items": study.items.count(),
                    "annotations": study.annotations.count(),
                }
            )
        )
