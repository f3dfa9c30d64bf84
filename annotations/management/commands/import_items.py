from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, study_arg
from annotations.interchange.item_import import items_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Import items from a folder of images, a zip, or a CSV/JSONL manifest (all or nothing), local or in "
        "a bucket (s3://bucket/prefix/, or s3://bucket/prefix/manifest.csv). Prints the "
        "report as JSON; its warnings (items with identical files, blank or single-colour images: all kept) "
        "also go to stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument(
            "path",
            type=file_arg,
            help="A folder, .zip or .csv/.jsonl manifest, or a bucket address s3://bucket/prefix/",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        try:
            report = items_import(study=study, address=source_arg(options["path"], study=study))
        except WorkbenchError as exc:
            raise fail(exc) from exc
        for warning in report.warnings():
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(dump(report.as_dict() | {"study": study.pk}))
