from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, study_arg, user_arg
from annotations.models import Annotator, Study
from annotations.selectors.quality import quality_report
from annotations.services.quality import annotator_exclude, annotator_reinstate
from common.errors import WorkbenchError


def _annotator(study: Study, name: str) -> Annotator:
    matches = list(
        Annotator.objects.filter(kind=Annotator.Kind.HUMAN, name=name)
        .filter(assignments__study=study)
        .distinct()[:2]
    ) or list(
        Annotator.objects.filter(kind=Annotator.Kind.HUMAN, name=name, annotations__study=study).distinct()[
            :2
        ]
    )
    if len(matches) != 1:
        raise CommandError(f"no single human annotator named {name!r} in this study")
    return matches[0]


class Command(BaseCommand):
    help = (
        "Each annotator's quality in a study: gold accuracy, attention checks, agreement with the others "
        "(leave-one-out), median time, straight-lining, flags. --exclude / --reinstate change who counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--json", action="store_true", help="Print the whole report as JSON")
        parser.add_argument("--exclude", metavar="ANNOTATOR", help="Exclude this annotator (needs --reason)")
        parser.add_argument("--reinstate", metavar="ANNOTATOR", help="Reinstate this excluded annotator")
        parser.add_argument("--reason", default="", help="Why (for --exclude; a note for --reinstate)")
        parser.add_argument(
            "--as", dest="user", help="The researcher recorded as doing it (default: the only one)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        try:
            if options["exclude"]:
                annotator_exclude(
                    study=study,
                    annotator=_annotator(study, options["exclude"]),
                    user=user_arg(options["user"]),
                    reason=options["reason"],
                )
                self.stdout.write(f"{options['exclude']} is excluded; the consensus was recomputed.")
            if options["reinstate"]:
                annotator_reinstate(
                    study=study,
                    annotator=_annotator(study, options["reinstate"]),
                    user=user_arg(options["user"]),
                    note=options["reason"],
                )
                self.stdout.write(f"{options['reinstate']} is reinstated; the consensus was recomputed.")
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        study.refresh_from_db()
        report = quality_report(study=study)
        if options["json"]:
            self.stdout.write(dump(report))
            return
        self.stdout.write(
            f"{report['name']}: {report['controls']['gold']} gold items, "
            f"{report['controls']['attention']} attention checks, "
            f"control rate {report['settings']['control_rate']}"
        )
        self.stdout.write(
            f"{'annotator':<20} {'gold':>9} {'attention':>10} {'agreement':>14} {'median s':>9} "
            f"{'run':>4}  flags"
        )
        for row in report["annotators"]:
            gold = f"{row['gold']['correct']}/{row['gold']['n']}" if row["gold"]["n"] else "-"
            attention = f"{row['attention']['passed']}+/{row['attention']['failed']}-"
            agreement = (
                f"{row['agreement']['rate']:.2f} (n={row['agreement']['n']})"
                if row["agreement"]["n"]
                else "-"
            )
            seconds = "-" if row["median_seconds"] is None else f"{row['median_seconds']:.1f}"
            run = row["straight_line"]["longest_run"] if row["straight_line"] else 0
            flags = "; ".join(flag["message"] for flag in row["flags"]) or "-"
            name = row["annotator"] + (" [excluded]" if row["excluded"] else "")
            self.stdout.write(
                f"{name:<20} {gold:>9} {attention:>10} {agreement:>14} {seconds:>9} {run:>4}  {flags}"
            )
