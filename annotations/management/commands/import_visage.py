from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, source_arg_or_none, user_arg
from annotations.interchange.visage_import import visage_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Create a stereotype-markers study (and, with --visual-attributes, a visualness study) from the "
        "released ViSAGe files and a SeeGULL table; prints the new study ids as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--annotations", type=file_arg, required=True, help="image_annotations_full_set.csv"
        )
        parser.add_argument(
            "--seegull", type=file_arg, required=True, help="SeeGULL table, e.g. stereotypes_global_v2.csv"
        )
        parser.add_argument(
            "--visual-attributes", type=file_arg, help="Visual Attributes_.xlsx (visual-ness ratings)"
        )
        parser.add_argument("--owner", help="Owner's username (default: the only researcher or admin)")
        parser.add_argument("--name", default="ViSAGe", help="Prefix of the study names")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_arg(options["owner"])
        started = time.perf_counter()
        try:
            report = visage_import(
                owner=owner,
                annotations_address=source_arg(options["annotations"], study=None),
                seegull_address=source_arg(options["seegull"], study=None),
                visual_attributes_address=source_arg_or_none(options["visual_attributes"], study=None),
                name=options["name"],
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(dump(report.as_dict() | {"seconds": round(time.perf_counter() - started, 2)}))
