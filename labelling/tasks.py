"""Celery tasks of machine labelling: ids in, the service does the work."""

from __future__ import annotations

from celery import shared_task

from labelling.services import labelling_job_run


@shared_task(name="labelling.tasks.label_items_task", acks_late=True)
def label_items_task(job_id: int) -> str:
    """Run one labelling job (claimed compare-and-set; re-runs skip what is answered)."""
    return labelling_job_run(job_id=job_id).status
