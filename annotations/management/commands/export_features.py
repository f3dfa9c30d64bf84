from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import fail, study_arg
from annotations.selectors.features import features_export_lines
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Write the study's stored image embeddings and captions as JSONL, the format import_features reads "
        "(to stdout, or --output FILE)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--labeller", help="Only this labeller: NAME or NAME@VERSION")
        parser.add_argument("--kind", choices=["embedding", "captions"], help="Only one kind")
        parser.add_argument("--output", type=Path, help="Write here instead of stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        try:
            lines = features_export_lines(study, labeller=options["labeller"], kind=options["kind"])
            if options["output"]:
                with options["output"].open("w", encoding="utf-8") as handle:
                    count = sum(1 for line in lines if handle.write(line) is not None)
                self.stderr.write(f"{count} lines written to {options['output']}")
            else:
                for line in lines:
                    self.stdout.write(line, ending="")
        except WorkbenchError as exc:
            raise fail(exc) from exc
