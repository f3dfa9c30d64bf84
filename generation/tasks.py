"""Celery tasks of generation. Names ``generate_*`` route to the ``gpu`` queue (settings)."""

from __future__ import annotations

from celery import shared_task

from generation.services import generation_job_run


@shared_task(name="generation.tasks.generate_images_task", acks_late=True)
def generate_images_task(job_id: int) -> str:
    """Run one generation job; running it twice is harmless (the job is claimed compare-and-set,
    and a re-run makes only the missing images). A folder model must lie under WORKBENCH_MODEL_DIRS."""
    return generation_job_run(job_id=job_id).status
