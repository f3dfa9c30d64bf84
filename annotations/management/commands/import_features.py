from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, study_arg
from annotations.interchange.feature_import import features_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Import image embeddings and captions made elsewhere from a JSONL file (all or nothing): one line "
        'per item and labeller, {"item", "labeller", "version", "embedding": [floats]} or '
        '{..., "captions": [strings]} (docs/import-export.md).'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("file", type=file_arg)

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        try:
            report = features_import(study=study, address=source_arg(options["file"], study=study))
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(dump(report.as_dict() | {"study": study.pk}))
