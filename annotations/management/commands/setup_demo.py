from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from annotations.models import Study
from annotations.services.demo import demo_accounts_ensure, demo_study_ensure


class Command(BaseCommand):
    help = "Create the demo accounts and, when no study exists yet, the demo study; print the accounts."

    def handle(self, *args: Any, **options: Any) -> None:
        accounts = demo_accounts_ensure()
        if Study.objects.exists():
            self.stdout.write("Studies exist already; no demo study added.")
        else:
            study, _created = demo_study_ensure()
            self.stdout.write(f"Demo study {study.pk}: {study.name} ({study.items.count()} items)")
        self.stdout.write("Demo accounts (username / password):")
        for username, password in accounts.items():
            self.stdout.write(f"  {username:<12} {password}")
