from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, study_arg
from common.errors import WorkbenchError
from findings.report import findings_report
from metrics.multiple_testing import CORRECTIONS, DEFAULT_CORRECTION


class Command(BaseCommand):
    help = (
        "Every metric that applies to the study's protocol (docs/metrics.md), from the protocol's default "
        "source (the reading its paper's numbers use: every judgement for stereotype-markers, the human "
        "consensus otherwise), every judgement (visage), or one machine labeller."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument(
            "--json", action="store_true", help="Print the whole report as JSON (default: a summary)"
        )
        parser.add_argument(
            "--source",
            default=None,
            help="consensus | judgements | LABELLER[@VERSION] | ppi:LABELLER[@VERSION] (the labeller on each "
            "item + the human consensus on the validation sample; default: the protocol's default source)",
        )
        parser.add_argument(
            "--width",
            type=float,
            help="ppi: the 95%% interval width to say how many more human labels would reach (default 0.1)",
        )
        parser.add_argument(
            "--min-people",
            type=int,
            help="ppi: the fewest people-labelled items a row is estimated from (default "
            "WORKBENCH_PPI_MIN_PEOPLE, 10); fewer: no estimate, with the reason",
        )
        parser.add_argument(
            "--correction",
            choices=CORRECTIONS,
            default=DEFAULT_CORRECTION,
            help="How tables that run many tests adjust their p-values (p_adjusted): holm (Holm step-down, "
            "the default) or bh (Benjamini-Hochberg)",
        )
        parser.add_argument(
            "--partial",
            action="store_true",
            help="Count partial items too (fewer judgements than the overlap; provisional, marked so)",
        )
        parser.add_argument(
            "--embeddings",
            help="visage pull: whose stored image embeddings, LABELLER[@VERSION] (default: the only one)",
        )
        parser.add_argument(
            "--captions",
            help="visage salience: whose stored captions, LABELLER[@VERSION] (default: the only one)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        try:
            report = findings_report(
                study=study,
                source=options["source"],
                embeddings=options["embeddings"],
                captions=options["captions"],
                include_partial=options["partial"],
                width=options["width"],
                correction=options["correction"],
                min_people=options["min_people"],
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        if options["json"]:
            self.stdout.write(dump(report.to_json()))
            return
        self.stdout.write(
            f"{report.name} ({report.protocol}), source {report.source}, {report.n_items} items"
        )
        self.stdout.write(f"  {report.source_note}")
        self.stdout.write(f"  items: {report.coverage['summary']}")
        self.stdout.write(f"  reliability: {report.reliability_note}")
        for entry in report.reliability:
            alpha = "undefined" if entry["alpha"] is None else f"{entry['alpha']:.3f}"
            left = " (left out of the findings)" if entry.get("excluded") else ""
            why = f": {entry['reason']}" if entry["reason"] else ""
            self.stdout.write(f"    {entry['question']}: alpha {alpha}, {entry['verdict']}{left}{why}")
        if any("p_adjusted" in table.names for table in report.tables):
            self.stdout.write(f"  multiple comparisons: {report.correction_note}")
        if report.warning:
            self.stdout.write(f"  warning: {report.warning}")
        for key, value in report.summary.items():
            self.stdout.write(f"  {key}: {dump(value)}")
        for table in report.tables:
            empty = f" ({table.empty_reason})" if table.empty_reason else ""
            rows = f"{len(table.rows)} rows, {table.n_items} items behind it"
            self.stdout.write(f"  table {table.key}: {rows}{empty}")
            if table.warning:
                self.stdout.write(f"    warning: {table.warning}")
        for note in report.notes:
            self.stdout.write(f"  note: {note}")
