from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import study_arg
from annotations.interchange.exports import (
    FILE_FORMATS,
    FORMATS,
    export_lines,
    export_refusal,
    export_to_bucket,
    export_to_file,
)
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = "Export a study (items with provenance, annotators, annotations); streams in constant memory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--format", choices=FORMATS, default="jsonl")
        parser.add_argument(
            "--out",
            type=Path,
            help="Output file (default: standard output; zip, labelstudio and parquet need --out)",
        )
        parser.add_argument(
            "--to",
            metavar="S3_PREFIX",
            help="Write the file under a bucket prefix (s3://bucket/prefix/) this study may write",
        )
        parser.add_argument(
            "--raw",
            action="store_true",
            help="CSV: text as stored (default: formula-like cells get a leading apostrophe)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        fmt, out = options["format"], options["out"]
        refusal = export_refusal(study, fmt)
        if refusal is not None:
            raise CommandError(refusal)
        if options["to"]:
            if out is not None:
                raise CommandError("give --out or --to, not both")
            try:
                written = export_to_bucket(study, fmt, options["to"], raw=options["raw"])
            except WorkbenchError as exc:
                raise CommandError(exc.message) from exc
            self.stderr.write(f"wrote {written}")
            return
        if out is not None:
            if out.parent and not out.parent.exists():
                raise CommandError(f"{out.parent}: no such folder")
            export_to_file(study, fmt, out, raw=options["raw"])
            self.stderr.write(f"wrote {out}")
            return
        if fmt in FILE_FORMATS:
            raise CommandError(f"a {fmt} export is a zip: it needs --out FILE")
        for line in export_lines(study, fmt, raw=options["raw"]):
            self.stdout.write(line, ending="")
