"""The lifecycle every background job shares (exports, generation, labelling).

A job is a row of a model that extends :class:`BackgroundJob`. Its life, in plain functions:

- :func:`job_enqueue`: the service that made the row sends its task *by name* once the transaction
  commits, so no service imports its tasks module (tasks import services, never the reverse);
- :func:`job_claim`: the worker claims the row compare-and-set (PENDING -> RUNNING), so two workers
  never run one job; the claim carries a fresh ``claim_token`` that the run's heartbeats and its
  finish must match;
- :func:`job_keepalive`: for as long as the run lasts a thread stamps ``heartbeat_at`` every fifth
  of the stale time, so only a run whose process is gone stops stamping (a model that loads for
  minutes, or a slow batch, is not a lost worker);
- :func:`job_heartbeat`: between batches the worker stamps ``heartbeat_at`` and learns, in the same
  query, whether to stop (cancellation asked for, or the job taken over by another run);
  :class:`Heartbeat` does it at most every few seconds inside a long loop;
- :func:`job_finish`: the worker sets the final status, the error and ``finished_at`` (only while
  it still holds the job).

A worker that dies (SIGKILL, the out-of-memory killer, a lost machine) stops stamping. A worker that
*hangs* (a deadlock, a stuck driver call, a network read that never returns) keeps stamping from its
keep-alive thread but makes no progress: only the run's own steps (:func:`job_claim`,
:func:`job_heartbeat` between batches, :class:`Heartbeat` inside them) stamp ``progress_at``. A RUNNING
job whose ``heartbeat_at`` is older than ``WORKBENCH_JOB_STALE_SECONDS``, or whose ``progress_at`` is
older than ``WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS`` (0: no deadline), is *stale*: :func:`job_claim`
takes it over (a task the broker delivers again), and :func:`jobs_resume_stale` (the workers' sweeper and
``manage.py resume_stale_jobs``) puts it back to PENDING and sends its task again. Either way
``resumed_count`` goes up and the job shows "worker lost, resumed"; the run continues from what is
stored (each job kind's run skips what exists). docs/deploy.md, "When a worker dies".
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection, models, transaction
from django.db.models import F, Q
from django.utils import timezone

logger = logging.getLogger(__name__)


# What every job's API answer says of its lifecycle, in this order (the one list; each app's serializer
# adds its own fields around it): the state, why it failed, when it was made, started, last beat and
# ended, and how often a lost worker's run was taken over.
JOB_FIELDS = (
    "status",
    "error",
    "created_at",
    "started_at",
    "heartbeat_at",
    "finished_at",
    "resumed_count",
    "resumed_at",
    "worker_note",
)


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
    claim_token = models.CharField(
        max_length=32, blank=True, default="", help_text="The run that holds the job (set by each claim)"
    )
    resumed_count = models.PositiveIntegerField(
        default=0, help_text="Times the job was taken over after its worker stopped beating"
    )
    resumed_at = models.DateTimeField(null=True, blank=True, help_text="The last takeover")
    progress_at = models.DateTimeField(
        null=True, blank=True, help_text="Last step the run made (a hung worker beats but stops stepping)"
    )

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)

    @property
    def is_hung(self) -> bool:
        """RUNNING, beating, but no progress for longer than ``WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS``."""
        deadline = progress_before()
        return (
            self.status == self.Status.RUNNING
            and deadline is not None
            and self.progress_at is not None
            and self.progress_at < deadline
        )

    @property
    def is_stale(self) -> bool:
        """RUNNING with no heartbeat for longer than ``WORKBENCH_JOB_STALE_SECONDS`` (its worker is
        lost) or no progress past the deadline (its worker hangs)."""
        return self.status == self.Status.RUNNING and (
            self.heartbeat_at is None or self.heartbeat_at < stale_before() or self.is_hung
        )

    @property
    def worker_note(self) -> str:
        """What the job page and the API say about lost workers ("" when none was lost)."""
        if self.is_hung and self.heartbeat_at is not None and self.heartbeat_at >= stale_before():
            return "worker stuck (no progress), waiting to resume"
        if self.is_stale:
            return "worker lost, waiting to resume"
        if self.resumed_count == 1:
            return "worker lost, resumed"
        if self.resumed_count > 1:
            return f"worker lost, resumed ({self.resumed_count} times)"
        return ""


J = TypeVar("J", bound=BackgroundJob)


def stale_after() -> timedelta:
    """How long a RUNNING job may go without a heartbeat before it counts as lost (the setting
    ``WORKBENCH_JOB_STALE_SECONDS``; it must exceed the longest gap between two stamps)."""
    return timedelta(seconds=max(1, int(settings.WORKBENCH_JOB_STALE_SECONDS)))


def stale_before(now: datetime | None = None) -> datetime:
    """Heartbeats before this moment are stale."""
    return (now or timezone.now()) - stale_after()


def progress_before(now: datetime | None = None) -> datetime | None:
    """Progress stamps before this moment are past the deadline (None: no deadline, the setting
    ``WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS`` is 0). The deadline must exceed the longest step a run
    makes without calling :func:`job_heartbeat` or a :class:`Heartbeat` (loading a model included)."""
    seconds = int(settings.WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS)
    return None if seconds <= 0 else (now or timezone.now()) - timedelta(seconds=seconds)


def stale_jobs(now: datetime | None = None) -> Q:
    """The filter of stale jobs: RUNNING, and last heartbeat before :func:`stale_before` (or none),
    or last progress before :func:`progress_before` (a hung worker)."""
    now = now or timezone.now()
    lost = Q(heartbeat_at__lt=stale_before(now)) | Q(heartbeat_at__isnull=True)
    deadline = progress_before(now)
    if deadline is not None:
        lost |= Q(progress_at__lt=deadline)
    return Q(status=BackgroundJob.Status.RUNNING) & lost


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


@dataclass(frozen=True)
class JobClaim:
    """A won claim: the token the run's heartbeats and finish must match, and whether it took the
    job over from a lost worker (``resumed``)."""

    job_id: int
    token: str
    resumed: bool


def job_claim(model: type[BackgroundJob], job_id: int) -> JobClaim | None:
    """Claim a job compare-and-set; a :class:`JobClaim` only for the one caller that got it.

    A PENDING job becomes RUNNING (``started_at`` and ``heartbeat_at`` stamped, ``error`` cleared).
    A stale RUNNING job (see :func:`stale_jobs`; its worker died and the broker delivered its task
    again) is taken over: the update's condition is the stale heartbeat itself, so of two takers
    the second finds the heartbeat fresh and gets nothing (PostgreSQL re-checks the condition
    after the row lock; SQLite runs one writer at a time). ``resumed_count`` goes up. Each claim
    sets a new ``claim_token``, so the run it replaced (if it still lives) learns at its next
    heartbeat that the job is no longer its own. A job that is running (and beating), finished,
    cancelled or gone answers None."""
    now = timezone.now()
    token = uuid.uuid4().hex
    manager = model._default_manager
    claimed = manager.filter(pk=job_id, status=BackgroundJob.Status.PENDING).update(
        status=BackgroundJob.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        progress_at=now,
        error="",
        claim_token=token,
    )
    if claimed:
        return JobClaim(job_id=job_id, token=token, resumed=False)
    taken = manager.filter(stale_jobs(now), pk=job_id).update(
        heartbeat_at=now,
        progress_at=now,
        error="",
        claim_token=token,
        resumed_count=F("resumed_count") + 1,
        resumed_at=now,
    )
    if taken:
        logger.warning(
            "%s %s: worker lost (no heartbeat for %s) or stuck (no progress for %s s); taken over",
            model.__name__,
            job_id,
            stale_after(),
            settings.WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS,
        )
        return JobClaim(job_id=job_id, token=token, resumed=True)
    return None


def job_heartbeat(model: type[BackgroundJob], job_id: int, token: str | None = None) -> bool:
    """Stamp ``heartbeat_at`` and ``progress_at`` (the run made a step) and answer whether the run
    should stop: True when cancellation was
    requested, the job was taken over by another run (its ``claim_token`` is no longer ``token``),
    or the row is gone. One query: the stamp is written only while the run may go on, so an update
    of no row is the answer."""
    alive = model._default_manager.filter(pk=job_id, cancel_requested=False)
    if token is not None:
        alive = alive.filter(claim_token=token)
    now = timezone.now()
    return alive.update(heartbeat_at=now, progress_at=now) == 0


def job_finish(
    model: type[J], job_id: int, *, status: str, error: str = "", token: str | None = None, **fields: Any
) -> J:
    """Set the job's final ``status``, ``error`` and ``finished_at`` (and any other ``fields``, e.g.
    counters or a file name) and return the job as stored now. With ``token``, only while the run
    still holds the job: a run that was taken over changes nothing (the run that took it finishes it)."""
    rows = model._default_manager.filter(pk=job_id)
    if token is not None:
        rows = rows.filter(claim_token=token)
    rows.update(status=status, error=error, finished_at=timezone.now(), **fields)
    return model._default_manager.get(pk=job_id)


class JobStopped(Exception):
    """Raised by :class:`Heartbeat` inside a long step: the job was cancelled or taken over."""


class Heartbeat:
    """A heartbeat for long loops: calling it stamps the job at most every ``interval`` seconds
    (default a tenth of the stale time, at most 10 s) and raises :class:`JobStopped` when the run
    should stop. Cheap to call for every row or file."""

    def __init__(
        self,
        model: type[BackgroundJob],
        job_id: int,
        token: str | None,
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model, self.job_id, self.token, self.clock = model, job_id, token, clock
        self.interval = interval if interval is not None else min(10.0, stale_after().total_seconds() / 10)
        self.last = clock()

    def __call__(self) -> None:
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        if job_heartbeat(self.model, self.job_id, self.token):
            raise JobStopped(f"{self.model.__name__} {self.job_id} was cancelled or taken over")


@contextmanager
def job_keepalive(model: type[BackgroundJob], job_id: int, token: str | None) -> Iterator[None]:
    """Stamp the job's heartbeat from a thread, every fifth of the stale time, while the run in this
    thread lasts (loading a model, hashing its weights, a slow batch: all of it). It stops when the
    block ends, when the job is no longer this run's (taken over, or gone), or with the process.

    The thread uses its own database connection and closes it when done. Inside an atomic block
    (a test's transaction) it is not started: another connection could not see the uncommitted job
    row, and a worker runs in autocommit. It does not stop the run; the run's own heartbeat
    between batches does that."""
    if connection.in_atomic_block:
        yield
        return
    stop = threading.Event()
    every = max(0.5, stale_after().total_seconds() / 5)

    def beat() -> None:
        from django.db import connection as thread_connection

        rows = model._default_manager.filter(pk=job_id)
        if token is not None:
            rows = rows.filter(claim_token=token)
        try:
            while not stop.wait(every):
                try:
                    # A cancelled job is still this process's until the run stops: keep stamping it.
                    if rows.update(heartbeat_at=timezone.now()) == 0:
                        return  # taken over, or gone
                except DatabaseError:  # the database away for a moment: try again, on a new connection
                    logger.exception("%s %s: the keep-alive heartbeat failed", model.__name__, job_id)
                    thread_connection.close()
        finally:
            thread_connection.close()

    thread = threading.Thread(target=beat, name=f"keepalive-{model.__name__}-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


JobT = TypeVar("JobT", bound=BackgroundJob)


def job_run(
    model: type[JobT], job_id: int, run: Callable[[JobT, str], JobT], *, related: tuple[str, ...] = ("study",)
) -> JobT:
    """The one start of every job's run: claim the job (a pending one, or a stale one taken over,
    compare-and-set), read it with ``related``, and call ``run(job, token)`` while a thread keeps its
    heartbeat (``job_keepalive``). A job another run holds, or one already finished, is answered as
    it is, untouched."""
    claim = job_claim(model, job_id)
    job = model._default_manager.select_related(*related).get(pk=job_id)
    if claim is None:
        return job
    with job_keepalive(model, job.pk, claim.token):
        return run(job, claim.token)


def job_requeue_stale(model: type[BackgroundJob], job_id: int, **fields: Any) -> bool:
    """Put a stale RUNNING job back to PENDING (compare-and-set on the stale heartbeat, so one of
    several sweepers wins), count the takeover, and void the lost run's token. True when this call
    did it; the caller then sends the task again. ``fields``: more columns to set (a re-run clears
    ``cancel_requested``)."""
    now = timezone.now()
    return (
        model._default_manager.filter(stale_jobs(now), pk=job_id).update(
            status=BackgroundJob.Status.PENDING,
            claim_token="",
            resumed_count=F("resumed_count") + 1,
            resumed_at=now,
            **fields,
        )
        == 1
    )


def jobs_resume_stale(
    model: type[BackgroundJob],
    *,
    task_name: str,
    queue_for: Callable[[Any], str | None] | None = None,
) -> list[int]:
    """Resume every stale job of ``model``: one whose cancellation was asked for ends CANCELLED;
    the others go back to PENDING (:func:`job_requeue_stale`) and their task ``task_name`` is sent
    again (to ``queue_for(job)`` when given). Returns the ids sent again. Safe to run from many
    processes at once: each job is won by one."""
    resumed = []
    for job in model._default_manager.filter(stale_jobs()).order_by("pk"):
        if job.cancel_requested:
            model._default_manager.filter(stale_jobs(), pk=job.pk).update(
                status=BackgroundJob.Status.CANCELLED, finished_at=timezone.now(), claim_token=""
            )
            continue
        if job_requeue_stale(model, job.pk):
            logger.warning(
                "%s %s: worker lost (no heartbeat for %s) or stuck (no progress); queued again",
                model.__name__,
                job.pk,
                stale_after(),
            )
            job_enqueue(task_name=task_name, job_id=job.pk, queue=queue_for(job) if queue_for else None)
            resumed.append(job.pk)
    return resumed
