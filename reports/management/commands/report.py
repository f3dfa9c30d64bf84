from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import fail, study_arg
from common.errors import WorkbenchError
from metrics.multiple_testing import CORRECTIONS
from reports.formats import FORMATS, renderer
from reports.gather import report_build
from reports.jobs import SUPPLEMENTED_FORMATS
from reports.supplement import supplement_name, supplement_zip

TEXT_TYPES = ("text/", "application/json")


class Command(BaseCommand):
    help = (
        "A study's audit report (docs/reports.md): design, people, agreement, machine vs human, findings, "
        "methods, results, limitations, reproducibility and the HEDS 3.0 datasheet; with --compare, several "
        "studies side by side. Without --out, prints the main file (text formats only)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument(
            "--compare",
            action="append",
            default=[],
            metavar="OTHER",
            help="Another study to set beside it (repeat)",
        )
        parser.add_argument(
            "--format", choices=list(FORMATS), default="md", help="md | tex | html | pdf | heds"
        )
        parser.add_argument(
            "--source",
            default=None,
            help="consensus | judgements | LABELLER[@VERSION] | ppi:LABELLER "
            "(default: the protocol's default)",
        )
        parser.add_argument("--correction", choices=CORRECTIONS, default="holm", help="holm (default) or bh")
        parser.add_argument(
            "--out",
            type=Path,
            help="Write the report here, its figures beside it (figures/...) and its supplement (every "
            "findings table as CSV) as <stem>-supplement.zip; default: stdout",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        others = [study_arg(value) for value in options["compare"]]
        try:
            render = renderer(options["format"])
            document = report_build(
                study, compare=others, source=options["source"], correction=options["correction"]
            )
            rendered = render(document)
        except WorkbenchError as exc:
            raise fail(exc) from exc
        out: Path | None = options["out"]
        if out is None:
            if not rendered.content_type.startswith(TEXT_TYPES):
                raise CommandError(f"--format {options['format']} writes a binary file: give --out FILE")
            if rendered.attachments:
                self.stderr.write(
                    f"{len(rendered.attachments)} figure(s) not written: "
                    "give --out FILE to write them beside the report"
                )
            self.stdout.write(rendered.body.decode(), ending="")
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(rendered.body)
        for name, data in rendered.attachments.items():
            target = out.parent / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        supplement = ""
        if options["format"] in SUPPLEMENTED_FORMATS:
            target = out.parent / supplement_name(out.name)
            target.write_bytes(supplement_zip(document))
            supplement = f" and its supplement {target}"
        self.stdout.write(f"wrote {out} and {len(rendered.attachments)} attachment(s){supplement}")
