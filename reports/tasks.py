"""Celery tasks of the reports app: ids in, ``reports.jobs`` does the work."""

from __future__ import annotations

from celery import shared_task

from reports.jobs import report_job_run


@shared_task(name="reports.tasks.run_report_job_task", acks_late=True)
def run_report_job_task(job_id: int) -> str:
    """Run one report job (claimed compare-and-set; a run after a lost worker makes the file anew)."""
    return report_job_run(job_id=job_id).status
