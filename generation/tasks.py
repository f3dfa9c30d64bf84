"""Celery tasks of generation. Names ``generate_*`` route to the ``gpu`` queue (settings)."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from generation.environment import worker_device_record
from generation.services import generation_job_run


@shared_task(name="generation.tasks.generate_images_task", acks_late=True, bind=True)
def generate_images_task(self: Task[Any, Any], job_id: int) -> str:
    """Run one generation job; running it twice is harmless (the job is claimed compare-and-set,
    and a re-run makes only the missing images). A worker also records what it sees of CUDA (for the
    generation page), once the job has imported torch anyway. A folder model must lie under
    WORKBENCH_MODEL_DIRS."""
    status = generation_job_run(job_id=job_id).status
    if not self.request.is_eager:
        worker_device_record(str(self.request.hostname or "worker"))
    return status
