"""The lifecycle every background job shares (exports, generation, labelling).

A job is a row of a model that extends :class:`BackgroundJob`. Its life, in plain functions:

- :func:`job_enqueue`: the service that made the row sends its task *by name* once the transaction
  commits, so no service imports its tasks module (tasks import services, never the reverse);
- :func:`job_claim`: the worker claims the row compare-and-set (PENDING -> RUNNING), so two workers
  never run one job;
- :func:`job_heartbeat`: between batches the worker stamps ``heartbeat_at`` and learns, in the same
  query, whether cancellation was asked for (a stale ``heartbeat_at`` marks a worker that died);
- :func:`job_finish`: the worker sets the final status, the error and ``finished_at``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from celery import current_app
from django.db import models, transaction
from django.utils import timezone


class BackgroundJob(models.Model):
    """What every background job shares: a status claimed compare-and-set, cancellation between
    batches, a heartbeat, an error message, and timestamps."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the worker running the job"
    )
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)


J = TypeVar("J", bound=BackgroundJob)


def job_enqueue(*, task_name: str, job_id: int, queue: str | None = None) -> None:
    """Send the task ``task_name`` with ``job_id`` once the current transaction commits (at once
    outside a transaction); nothing is sent if it rolls back.

    The task is looked up now, by name, in the Celery app's registry (every app's tasks module is
    imported by its ``AppConfig.ready``), so an unknown name raises ``celery.exceptions.NotRegistered``
    in the caller, inside its transaction. It is sent with ``apply_async``: to ``queue`` when given,
    else where ``CELERY_TASK_ROUTES`` or the default queue say; ``CELERY_TASK_ALWAYS_EAGER`` runs it
    in this process instead (tests)."""
    task = current_app.tasks[task_name]
    options: dict[str, Any] = {} if queue is None else {"queue": queue}
    transaction.on_commit(lambda: task.apply_async((job_id,), **options))


def job_claim(model: type[BackgroundJob], job_id: int) -> bool:
    """Claim a pending job compare-and-set (PENDING -> RUNNING, ``started_at`` and ``heartbeat_at``
    stamped, ``error`` cleared). True only for the one caller that got it; a job that is running,
    finished, cancelled or gone answers False."""
    now = timezone.now()
    claimed = model._default_manager.filter(pk=job_id, status=BackgroundJob.Status.PENDING).update(
        status=BackgroundJob.Status.RUNNING, started_at=now, heartbeat_at=now, error=""
    )
    return claimed == 1


def job_heartbeat(model: type[BackgroundJob], job_id: int) -> bool:
    """Stamp ``heartbeat_at`` and answer whether the job should stop: True when cancellation was
    requested (or the row is gone). One query: the stamp is written only while no cancellation is
    requested, so an update of no row is the answer (a cancelled job stops now; its stamp does not
    matter)."""
    alive = model._default_manager.filter(pk=job_id, cancel_requested=False).update(
        heartbeat_at=timezone.now()
    )
    return alive == 0


def job_finish(model: type[J], job_id: int, *, status: str, error: str = "", **fields: Any) -> J:
    """Set the job's final ``status``, ``error`` and ``finished_at`` (and any other ``fields``, e.g.
    counters or a file name) and return the job as stored now."""
    model._default_manager.filter(pk=job_id).update(
        status=status, error=error, finished_at=timezone.now(), **fields
    )
    return model._default_manager.get(pk=job_id)
