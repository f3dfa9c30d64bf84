"""The Celery app. Broker and result backend come from Django settings (``CELERY_*``)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

app = Celery("workbench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _start_stale_job_sweeper(**_kwargs: object) -> None:
    """Each worker resumes jobs whose worker was lost (workbench/stale_jobs.py)."""
    from workbench.stale_jobs import sweeper_start

    sweeper_start()


@worker_shutdown.connect
def _stop_stale_job_sweeper(**_kwargs: object) -> None:
    from workbench.stale_jobs import sweeper_stop

    sweeper_stop()
