from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, study_arg
from annotations.selectors.adjudication import adjudication_queue
from annotations.services.consensus import RULES, consensus_compute, rules_chosen
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Compute the consensus labels of a study (the study's rule per question, or --rule for all or one)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--rule", choices=RULES, help="Use (and keep) this rule")
        parser.add_argument("--question", help="Only this question")
        parser.add_argument("--k", type=int, help="at-least-k: how many annotators must agree")
        parser.add_argument(
            "--agree-values", help="all-agree-set: comma-separated option keys that count as agreeing"
        )
        parser.add_argument(
            "--absolute", action="store_true", help="majority: require more than half the votes"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        rule = None
        if options["rule"]:
            rule = {"rule": options["rule"]}
            if options["k"] is not None:
                rule["k"] = options["k"]
            if options["agree_values"]:
                rule["agree_values"] = [v.strip() for v in options["agree_values"].split(",") if v.strip()]
            if options["absolute"]:
                rule["absolute"] = True
        try:
            summary = consensus_compute(study=study, question=options["question"], rule=rule)
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        queue = adjudication_queue(study=study)
        self.stdout.write(
            dump(
                {
                    "study": study.pk,
                    "questions": summary,
                    "to_adjudicate": len(queue),
                    "rules": rules_chosen(study),
                }
            )
        )
