from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, study_arg
from annotations.selectors.agreement import agreement_csv_rows, agreement_report
from common.spreadsheet import csv_cell


class Command(BaseCommand):
    help = "The agreement report of a study: alpha per question with bootstrap intervals, machines vs humans."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--json", action="store_true", help="Print the whole report as JSON")
        parser.add_argument(
            "--resamples", type=int, default=1000, help="Bootstrap resamples (0: no interval)"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--breakdown",
            help=(
                "An item metadata field to break machine accuracy down by, or annotator:KEY for alpha "
                "within each pool of annotators (their answer KEY given to this study) and, between every "
                "two pools, kappa_x, its normalised form and majority agreement (the report's 'cross')"
            ),
        )
        parser.add_argument("--csv", type=Path, help="Also write the headline rows as CSV")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        report = agreement_report(
            study=study,
            n_resamples=options["resamples"],
            seed=options["seed"],
            breakdown=options["breakdown"],
        )
        if options["csv"] is not None:
            with options["csv"].open("w", newline="", encoding="utf-8") as handle:
                csv.writer(handle).writerows(
                    [csv_cell(value) for value in row] for row in agreement_csv_rows(report)
                )
        if options["json"]:
            self.stdout.write(dump(report))
            return
        for row in list(agreement_csv_rows(report))[1:]:
            value = "undefined: " + row[10] if row[2] in ("", None) and row[10] else row[2]
            if row[7] != "":
                value = f"accuracy {row[7]:.3f}" if row[7] is not None else "accuracy undefined"
            self.stdout.write(f"{row[0]:<40} {row[1]:<30} {value}")
        for line in cross_lines(report.get("by_annotator_attribute")):
            self.stdout.write(line)


def _number(value: Any, low: Any, high: Any, reason: Any) -> str:
    if value is None:
        return f"undefined: {reason}"
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{value:.3f}{interval}"


def cross_lines(breakdown: dict[str, Any] | None) -> list[str]:
    """The pools' alphas and the cross-pool entries as lines of text (the JSON has every field)."""
    if not breakdown:
        return []
    lines = [f"by annotator attribute {breakdown['attribute']!r}"]
    for group in breakdown["groups"]:
        for question in group["questions"]:
            for alpha in question["humans"]:
                value = _number(alpha["value"], alpha["ci_low"], alpha["ci_high"], alpha["undefined_reason"])
                lines.append(
                    f"  {group['group']:<20} {alpha['label']:<30} alpha {value} (n={alpha['n_items']} items)"
                )
    for entry in breakdown["cross"]:
        pools = " x ".join(entry["pools"])
        kappa = _number(entry["kappa_x"], entry["low"], entry["high"], entry["undefined_reason"])
        scaled = _number(
            entry["normalised"],
            entry["normalised_low"],
            entry["normalised_high"],
            entry["normalised_undefined_reason"],
        )
        majority = _number(
            entry["majority_agreement"],
            entry["majority_low"],
            entry["majority_high"],
            entry["majority_undefined_reason"],
        )
        lines.append(
            f"  {pools:<20} {entry['question']:<30} kappa_x {kappa} (n={entry['n_items']} items); "
            f"normalised {scaled}; majority agreement {majority} "
            f"(n={entry['majority_n_items']} items, {entry['majority_excluded']} without a majority)"
        )
    return lines
