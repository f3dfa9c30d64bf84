from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import fail, file_arg, source_arg, study_arg
from annotations.interchange.attribute_import import annotator_attributes_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Give a study's annotators attributes such as region (a rater pool) from a CSV file: a column "
        "'annotator' (an imported annotator's name or an enrolled account's username) and one column per "
        "attribute; a blank cell leaves that attribute as it is. All or nothing (docs/import-export.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("file", type=file_arg, help="A .csv file")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        path = source_arg(options["file"], study=study)
        if isinstance(path, Path) and not path.is_file():
            raise CommandError(f"no file {path}")
        try:
            report = annotator_attributes_import(study=study, address=path)
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(
            f"{report.updated} annotator{'s' if report.updated != 1 else ''} updated, {report.unchanged} "
            f"unchanged ({report.rows} row{'s' if report.rows != 1 else ''}) in study {study.pk}."
        )
