"""``manage.py resume_stale_jobs``: queue again every job whose worker was lost, and refit the posterior
overlap models that are due (one sweep, as each worker runs it)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from workbench.stale_jobs import refit_overlap_models, resume_stale_jobs


class Command(BaseCommand):
    help = (
        "Queue again every running export, generation and labelling job whose heartbeat is older than "
        "WORKBENCH_JOB_STALE_SECONDS (its worker was lost); each resumes where it stopped. Workers do "
        "this on their own every WORKBENCH_JOB_SWEEP_SECONDS; run this from cron when that is 0. The "
        "same sweep refits the model of each active study under a posterior overlap policy that has "
        "collected WORKBENCH_OVERLAP_REFIT_EVERY judgements since its last fit (overlap_refits: their ids)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps({**resume_stale_jobs(), "overlap_refits": refit_overlap_models()}))
