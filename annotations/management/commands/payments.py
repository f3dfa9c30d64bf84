"""Payment records of a study as CSV (the same file as /studies/ID/payments.csv; docs/crowd.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import study_arg
from annotations.selectors.payments import PAYMENT_COLUMNS, payment_rows
from common.spreadsheet import csv_lines


class Command(BaseCommand):
    help = "Write a study's payment records (items, time on task, platform ids per person) as CSV."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--out", type=Path, help="File to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        lines = csv_lines(payment_rows(study_arg(options["study"])), PAYMENT_COLUMNS)
        if options["out"] is None:
            for line in lines:
                self.stdout.write(line, ending="")
            return
        with options["out"].open("w", encoding="utf-8", newline="") as handle:
            handle.writelines(lines)
