from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from annotations.models import Study
from workbench.demo import demo_accounts_ensure, demo_accounts_file, demo_study_ensure

# Labellers whose "weights" ship inside their packages, so the demo's machine labels are real.
DEMO_LABELLERS = {
    "colour": ("colour-rule", {}),
    "ocr": ("rapidocr-text", {"presence_questions": ["text_presence"]}),
}


class Command(BaseCommand):
    help = (
        "Create the demo accounts and, when no study exists yet, the demo study (and queue its machine "
        "labellers: the colour rule and RapidOCR); print the accounts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--labellers",
            default="colour,ocr",
            help="Comma-separated demo labellers to queue on a new demo study ('' for none)",
        )
        parser.add_argument(
            "--no-accounts",
            action="store_true",
            help="Do not print the accounts (scripts/run.sh prints them last)",
        )
        parser.add_argument(
            "--accounts-only",
            action="store_true",
            help="Only print the demo accounts made earlier (reads their file; changes nothing)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["accounts_only"]:
            path = demo_accounts_file()
            if not path.exists():
                self.stdout.write("No demo accounts yet (run manage.py setup_demo).")
                return
            self._print_accounts(json.loads(path.read_text()))
            return
        accounts = demo_accounts_ensure()
        if Study.objects.exists():
            self.stdout.write("Studies exist already; no demo study added.")
        else:
            study, _created = demo_study_ensure()
            self.stdout.write(f"Demo study {study.pk}: {study.name} ({study.items.count()} items)")
            self._queue_labellers(study, [k.strip() for k in options["labellers"].split(",") if k.strip()])
        if not options["no_accounts"]:
            self._print_accounts(accounts)

    def _print_accounts(self, accounts: dict[str, str]) -> None:
        self.stdout.write("Demo accounts (username / password):")
        for username, password in accounts.items():
            self.stdout.write(f"  {username:<12} {password}")

    def _queue_labellers(self, study: Study, kinds: list[str]) -> None:
        # generation may import annotations, not the other way round: the demo command lives here
        # but only reaches generation at run time, as a composition step.
        from labelling.services import labeller_register, labelling_job_create

        for kind in kinds:
            name, config = DEMO_LABELLERS[kind]
            annotator = labeller_register(name=name, kind=kind, config=config)
            labelling_job_create(study=study, annotator=annotator, user=None)
            self.stdout.write(f"Queued machine labeller {name} on the demo study.")
