from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, source_arg_or_none, study_arg
from annotations.interchange.visage_import import stereotype_table_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Replace a study's stereotype table with a SeeGULL-style CSV (identity, attribute, NA_stereo, "
        "mean offensiveness_score, ...); all or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("path", type=file_arg)
        parser.add_argument(
            "--visual-attributes", type=file_arg, help="Visual Attributes_.xlsx: sets each row's visual flag"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        try:
            rows = stereotype_table_import(
                study=study,
                address=source_arg(options["path"], study=study),
                visual_attributes_address=source_arg_or_none(options["visual_attributes"], study=study),
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(dump({"study": study.pk, "rows": rows}))
