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


@worker_ready.connect
def _record_cuda_as_the_worker_sees_it(sender: object = None, **_kwargs: object) -> None:
    """A worker of the ``gpu`` queue records what it sees of CUDA for the generation page
    (``generation.environment.worker_device_record``), in a thread: importing torch takes seconds."""
    import threading

    queues = getattr(getattr(sender, "task_consumer", None), "queues", None) or []
    if "gpu" not in {queue.name for queue in queues}:
        return
    hostname = str(getattr(sender, "hostname", "") or "worker")

    def record() -> None:
        from django.db import connection

        from generation.environment import worker_device_record

        try:
            worker_device_record(hostname)
        except Exception:  # a failed probe must not stop the worker
            import logging

            logging.getLogger(__name__).exception("could not record what this worker sees of CUDA")
        finally:
            connection.close()

    threading.Thread(target=record, name="cuda-probe", daemon=True).start()


@worker_shutdown.connect
def _stop_stale_job_sweeper(**_kwargs: object) -> None:
    from workbench.stale_jobs import sweeper_stop

    sweeper_stop()
