from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, study_arg
from common.display import cell_display
from common.errors import WorkbenchError
from findings.comparison import comparison_query_parse, comparison_report, comparison_sides


class Command(BaseCommand):
    help = (
        "Several studies' metrics lined up on the same groups: each study's value, the n behind it and the "
        "difference from the first study (docs/metrics.md, 'Comparing studies'). --source, --condition and "
        "--model and --where take one value for every study or one per study, in order."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "studies",
            nargs="+",
            help="Two or more study ids or exact names (a study may repeat "
            "with another source, condition or model)",
        )
        parser.add_argument("--json", action="store_true", help="Print the whole comparison as JSON")
        parser.add_argument(
            "--source", action="append", default=[], help="consensus | judgements | LABELLER[@VERSION]"
        )
        parser.add_argument(
            "--condition", action="append", default=[], help="Narrow to one condition (e.g. initial)"
        )
        parser.add_argument("--model", action="append", default=[], help="Narrow to one model")
        parser.add_argument(
            "--where",
            action="append",
            default=[],
            help="Narrow to column=value of a table's group (e.g. group=nurse; several joined by ';')",
        )
        parser.add_argument(
            "--rows", type=int, default=20, help="Rows shown per table without --json (default 20)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        studies = [study_arg(value) for value in options["studies"]]
        try:
            queries = comparison_query_parse(
                studies=[str(s.pk) for s in studies],
                sources=options["source"],
                conditions=options["condition"],
                models=options["model"],
                wheres=options["where"],
            )
            comparison = comparison_report(
                sides=comparison_sides(studies=studies, queries=queries), cached=False
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        if options["json"]:
            self.stdout.write(dump(comparison))
            return
        for side in comparison["sides"]:
            self.stdout.write(
                f"{side['label']}: study {side['study']} {side['description']} ({side['protocol']}), "
                f"{side['n_items']} items"
            )
        for note in comparison["notes"]:
            self.stdout.write(f"note: {note}")
        for table in comparison["tables"]:
            self.stdout.write(f"\n{table['key']}: {table['title']} ({len(table['rows'])} groups)")
            self.stdout.write("  " + "\t".join(table["columns"]))
            for row in table["rows"][: options["rows"]]:
                self.stdout.write("  " + "\t".join(cell_display(v) for v in row))
            for note in table["notes"]:
                self.stdout.write(f"  note: {note}")
        for label, tables in comparison["only_in"].items():
            self.stdout.write(f"\nonly in {label}: " + ", ".join(t["key"] for t in tables))
        for table in comparison["not_comparable"]:
            self.stdout.write(f"not narrowed: {table['key']} ({table['reason']})")
