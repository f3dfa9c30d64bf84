from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from annotations.command_args import dump, study_arg
from annotations.models import Annotator
from annotations.services.validation_sample import validation_sample_clear, validation_sample_create
from common.errors import WorkbenchError


def _labeller(name: str, study: Any) -> Annotator:
    labeller = (
        Annotator.objects.filter(kind=Annotator.Kind.MACHINE, name=name)
        .filter(Q(study__isnull=True) | Q(study=study))
        .order_by("-created_at")
        .first()
    )
    if labeller is None:
        raise CommandError(f"no labeller {name!r}")
    return labeller


class Command(BaseCommand):
    help = (
        "Draw a seeded sample of a labeller's items for human validation (humans are then assigned only "
        "those) under a design whose inclusion probabilities are stored (uniform, stratified, active), and "
        "say how wide the interval on its accuracy will be."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--labeller", help="The machine labeller's name")
        size = parser.add_mutually_exclusive_group()
        size.add_argument("--size", type=int)
        size.add_argument("--fraction", type=float, help="e.g. 0.1 for the agent paper's 10%%")
        parser.add_argument(
            "--stratify-by", default="condition", help="condition, model, kind or a metadata field"
        )
        parser.add_argument(
            "--design",
            default="stratified",
            help="stratified (default, by --stratify-by) | uniform | active (oversample where the labeller "
            "is unsure or disagrees with --against)",
        )
        parser.add_argument("--against", help="active design: another machine labeller to disagree with")
        parser.add_argument(
            "--mix",
            type=float,
            default=0.5,
            help="active design: weight of uncertainty vs uniform, in [0, 1)",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--expected-accuracy", type=float, default=0.9)
        parser.add_argument(
            "--width", type=float, help="Report the smallest size whose 95%% interval is this wide"
        )
        parser.add_argument("--clear", action="store_true", help="Remove the study's sample")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        if options["clear"]:
            validation_sample_clear(study=study)
            self.stdout.write(dump({"study": study.pk, "validation_sample": None}))
            return
        if not options["labeller"] or (options["size"] is None and options["fraction"] is None):
            raise CommandError("give --labeller and --size or --fraction")
        labeller = _labeller(options["labeller"], study)
        against = _labeller(options["against"], study) if options["against"] else None
        try:
            report = validation_sample_create(
                study=study,
                labeller=labeller,
                size=options["size"],
                fraction=options["fraction"],
                stratify_by=options["stratify_by"],
                seed=options["seed"],
                expected_accuracy=options["expected_accuracy"],
                width=options["width"],
                design=options["design"],
                against=against,
                mix=options["mix"],
            )
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(dump(report))
