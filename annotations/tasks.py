"""Celery tasks of the annotations app: ids in, services do the work."""

from __future__ import annotations

from celery import shared_task

from annotations.interchange.accounts import password_reset_mail_send
from annotations.interchange.exports import export_job_run
from annotations.interchange.import_jobs import import_job_run


@shared_task(name="annotations.tasks.run_export_job_task", acks_late=True)
def run_export_job_task(job_id: int) -> str:
    """Run one export job (claimed compare-and-set; a run after a lost worker writes the file anew)."""
    return export_job_run(job_id=job_id).status


@shared_task(name="annotations.tasks.run_import_job_task", acks_late=True)
def run_import_job_task(job_id: int) -> str:
    """Run one import job (claimed compare-and-set; a run after a lost worker imports it anew)."""
    return import_job_run(job_id=job_id).status


@shared_task(name="annotations.tasks.ping_task")
def ping_task(value: str) -> str:
    """Round trip through the broker and a worker (used by the health check and the worker test)."""
    return f"pong:{value}"


@shared_task(name="annotations.tasks.send_password_reset_mail_task")
def send_password_reset_mail_task(email: str, base_url: str) -> int:
    """Mail the reset links someone asked for on the sign-in page (after the page answered)."""
    return password_reset_mail_send(email=email, base_url=base_url)
