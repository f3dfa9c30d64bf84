from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, file_arg, source_arg, study_arg
from annotations.interchange.control_import import controls_import
from annotations.models import ControlKind
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Mark a study's control items from a CSV or JSONL file: gold items (known answers) or attention "
        "checks. Columns: external_id, kind (optional), note (optional), one per question (docs/crowd.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("file", type=file_arg, help="A .csv or .jsonl file")
        parser.add_argument(
            "--kind",
            choices=ControlKind.values,
            default=ControlKind.GOLD,
            help="Kind for rows without a kind column (default gold)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        path = source_arg(options["file"], study=study)
        if isinstance(path, Path) and not path.is_file():
            raise CommandError(f"no file {path}")
        if PurePosixPath(path.name).suffix.lower() not in (".csv", ".jsonl", ".ndjson"):
            raise CommandError("the file must be .csv or .jsonl")
        try:
            report = controls_import(study=study, address=path, default_kind=options["kind"])
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(dump({"study": study.pk, **report.as_dict()}))
