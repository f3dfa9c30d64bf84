"""The job lifecycle of ``common.jobs``: enqueue by name on commit, claim compare-and-set,
heartbeat with cancellation, finish (on ``ExportJob``, one of the models that extend it)."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from celery.exceptions import NotRegistered
from django.db import transaction
from django.utils import timezone

from annotations.models import ExportJob, Study, User
from common.jobs import (
    Heartbeat,
    JobStopped,
    job_claim,
    job_enqueue,
    job_finish,
    job_heartbeat,
    job_requeue_stale,
    jobs_resume_stale,
)
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db

PING = "annotations.tasks.ping_task"


@pytest.fixture
def job(study: Study, owner: User) -> ExportJob:
    return ExportJob.objects.create(study=study, requested_by=owner, format="jsonl")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """What is sent to ``ping_task`` (its ``apply_async`` replaced by a recorder)."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(
        current_app.tasks[PING], "apply_async", lambda args, **options: calls.append((args, options))
    )
    return calls


def test_only_one_of_two_claims_gets_the_job(job: ExportJob) -> None:
    ExportJob.objects.filter(pk=job.pk).update(error="from an earlier run")
    first, second = job_claim(ExportJob, job.pk), job_claim(ExportJob, job.pk)
    assert first is not None and not first.resumed and second is None
    job.refresh_from_db()
    assert job.status == ExportJob.Status.RUNNING and job.error == "" and job.claim_token == first.token
    assert job.started_at is not None and job.heartbeat_at == job.started_at
    assert (job.resumed_count, job.is_stale, job.worker_note) == (0, False, "")


def test_a_job_that_is_not_pending_or_is_gone_is_not_claimed(job: ExportJob) -> None:
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.CANCELLED)
    assert job_claim(ExportJob, job.pk) is None
    assert job_claim(ExportJob, job.pk + 1000) is None
    job.refresh_from_db()
    assert job.status == ExportJob.Status.CANCELLED and job.started_at is None


def test_the_heartbeat_stamps_and_reports_cancellation(
    job: ExportJob, django_assert_num_queries: Any
) -> None:
    assert job_claim(ExportJob, job.pk)
    long_ago = timezone.now() - timedelta(hours=1)
    ExportJob.objects.filter(pk=job.pk).update(heartbeat_at=long_ago)
    with django_assert_num_queries(1):
        assert job_heartbeat(ExportJob, job.pk) is False
    job.refresh_from_db()
    assert job.heartbeat_at is not None and job.heartbeat_at > long_ago

    ExportJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    with django_assert_num_queries(1):
        assert job_heartbeat(ExportJob, job.pk) is True
    assert job_heartbeat(ExportJob, job.pk + 1000) is True  # a job that is gone stops too


def test_finish_sets_status_error_finished_at_and_other_fields(job: ExportJob) -> None:
    assert job_claim(ExportJob, job.pk)
    finished = job_finish(ExportJob, job.pk, status=ExportJob.Status.FAILED, error="disk full", format="csv")
    assert isinstance(finished, ExportJob)
    assert (finished.status, finished.error, finished.format) == ("failed", "disk full", "csv")
    assert finished.finished_at is not None and finished.finished_at >= finished.started_at

    done = job_finish(ExportJob, job.pk, status=ExportJob.Status.DONE)
    assert (done.status, done.error) == ("done", "")


def test_enqueue_sends_by_name_after_commit_only(
    sent: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job_enqueue(task_name=PING, job_id=7)
        assert sent == []  # not before the commit
    assert len(callbacks) == 1
    assert sent == [((7,), {})]

    with django_capture_on_commit_callbacks(execute=True):
        job_enqueue(task_name=PING, job_id=8, queue="gpu")
    assert sent[-1] == ((8,), {"queue": "gpu"})


def test_nothing_is_sent_when_the_transaction_rolls_back(
    sent: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            job_enqueue(task_name=PING, job_id=7)
            raise RuntimeError("the request failed")
    assert callbacks == [] and sent == []


def test_an_unknown_task_name_fails_in_the_caller(django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        with pytest.raises(NotRegistered):
            job_enqueue(task_name="annotations.tasks.no_such_task", job_id=1)
    assert callbacks == []


def test_every_app_registers_its_job_tasks_in_every_process() -> None:
    """``AppConfig.ready`` imports the tasks modules, so a web process finds the tasks by name."""
    for name in (
        "annotations.tasks.run_export_job_task",
        "generation.tasks.generate_images_task",
        "labelling.tasks.label_items_task",
    ):
        assert current_app.tasks[name].name == name


def test_an_export_job_runs_eagerly_through_enqueue(
    study: Study, owner: User, django_capture_on_commit_callbacks: Any
) -> None:
    from annotations.interchange.exports import export_job_create

    with django_capture_on_commit_callbacks(execute=True):
        job = export_job_create(study=study, user=owner, fmt="jsonl")
        assert ExportJob.objects.get(pk=job.pk).status == ExportJob.Status.PENDING
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE and job.file and job.heartbeat_at is not None


def _lose_the_worker(job: ExportJob, seconds: float) -> None:
    """What a worker killed ``seconds`` ago leaves: the job RUNNING, its heartbeat that old."""
    ExportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_a_stale_running_job_is_taken_over_once_and_the_lost_run_can_no_longer_touch_it(
    job: ExportJob, settings: Any
) -> None:
    settings.WORKBENCH_JOB_STALE_SECONDS = 60
    lost = job_claim(ExportJob, job.pk)
    assert lost is not None
    _lose_the_worker(job, 59)
    assert job_claim(ExportJob, job.pk) is None  # still beating, as far as anyone can tell
    job.refresh_from_db()
    assert not job.is_stale and job.worker_note == ""
    _lose_the_worker(job, 61)
    job.refresh_from_db()
    assert job.is_stale and job.worker_note == "worker lost, waiting to resume"
    takeover, again = job_claim(ExportJob, job.pk), job_claim(ExportJob, job.pk)  # a redelivered task, twice
    assert takeover is not None and takeover.resumed and again is None
    job.refresh_from_db()
    assert (job.status, job.resumed_count, job.worker_note) == ("running", 1, "worker lost, resumed")
    assert job.resumed_at is not None and job.claim_token == takeover.token != lost.token
    # The lost run, if it still lives, learns that the job is no longer its own and cannot finish it.
    assert job_heartbeat(ExportJob, job.pk, lost.token) is True
    assert job_finish(ExportJob, job.pk, status=ExportJob.Status.FAILED, token=lost.token).status == "running"
    assert job_heartbeat(ExportJob, job.pk, takeover.token) is False
    done = job_finish(ExportJob, job.pk, status=ExportJob.Status.DONE, token=takeover.token)
    assert (done.status, done.worker_note) == ("done", "worker lost, resumed")
    assert job_claim(ExportJob, job.pk) is None  # a finished job is never taken over


def test_a_job_without_any_heartbeat_while_running_counts_as_stale(job: ExportJob) -> None:
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.RUNNING, heartbeat_at=None)
    claim = job_claim(ExportJob, job.pk)
    assert claim is not None and claim.resumed


def test_the_sweep_queues_each_stale_job_once_and_ends_a_cancelled_one(
    study: Study, owner: User, sent: list[Any], settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.WORKBENCH_JOB_STALE_SECONDS = 60
    stale, cancelled, beating, pending = (
        ExportJob.objects.create(study=study, requested_by=owner, format="jsonl") for _ in range(4)
    )
    for row in (stale, cancelled, beating):
        assert job_claim(ExportJob, row.pk)
    _lose_the_worker(stale, 120)
    _lose_the_worker(cancelled, 120)
    ExportJob.objects.filter(pk=cancelled.pk).update(cancel_requested=True)
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs_resume_stale(ExportJob, task_name=PING, queue_for=lambda row: "gpu") == [stale.pk]
        assert jobs_resume_stale(ExportJob, task_name=PING) == []  # a second sweeper finds nothing
    assert sent == [((stale.pk,), {"queue": "gpu"})]
    statuses = dict(ExportJob.objects.values_list("pk", "status"))
    assert statuses == {
        stale.pk: "pending",
        cancelled.pk: "cancelled",
        beating.pk: "running",
        pending.pk: "pending",
    }
    stale.refresh_from_db()
    assert (stale.resumed_count, stale.claim_token, stale.worker_note) == (1, "", "worker lost, resumed")
    claim = job_claim(ExportJob, stale.pk)  # the task sent again claims it as any pending job
    assert claim is not None and not claim.resumed
    assert job_requeue_stale(ExportJob, beating.pk) is False


def test_the_heartbeat_of_a_long_loop_stamps_at_most_every_interval_and_stops_the_loop(
    job: ExportJob, django_assert_num_queries: Any
) -> None:
    claim = job_claim(ExportJob, job.pk)
    assert claim is not None
    now = [0.0]
    beat = Heartbeat(ExportJob, job.pk, claim.token, interval=5, clock=lambda: now[0])
    with django_assert_num_queries(0):
        for now[0] in (1.0, 2.0, 4.9):
            beat()
    now[0] = 5.0
    with django_assert_num_queries(1):
        beat()
    ExportJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    now[0] = 10.0
    with pytest.raises(JobStopped):
        beat()


def test_an_export_whose_worker_was_lost_is_written_again_once_by_the_command(
    study: Study,
    owner: User,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    default_store: FileStore,
) -> None:
    """``manage.py resume_stale_jobs`` queues a stale export again (run eagerly here); the run
    writes the file from scratch: the lost run's partial file and the file it stored before it
    could finish are gone, and the job has exactly one file."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.core.management import call_command

    from annotations.interchange.exports import export_job_file_name, export_job_workdir
    from tests.factories import ItemFactory

    settings.WORKBENCH_JOB_STALE_SECONDS = 60
    ItemFactory(study=study, external_id="i1")
    job = ExportJob.objects.create(study=study, requested_by=owner, format="jsonl")
    assert job_claim(ExportJob, job.pk)  # the run that is about to be lost
    export_job_workdir(job).mkdir(parents=True)
    (export_job_workdir(job) / "study.jsonl").write_text("half a line")
    default_storage.save(export_job_file_name(job), ContentFile(b"stored, never finished"))
    _lose_the_worker(job, 61)
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("resume_stale_jobs", stdout=out)
    assert json.loads(out.getvalue()) == {
        "export": [job.pk],
        "import": [],
        "generation": [],
        "labelling": [],
        "report": [],
        "overlap_refits": [],
    }
    job.refresh_from_db()
    assert (job.status, job.resumed_count, job.worker_note) == ("done", 1, "worker lost, resumed")
    assert job.file.name == export_job_file_name(job)
    assert default_store.names("exports/") == [job.file.name]
    with job.file.open("rb") as handle:
        assert b'"external_id": "i1"' in handle.read()
    assert not export_job_workdir(job).exists()


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_beats_but_makes_no_progress_is_taken_over_and_finished(
    study: Study, owner: User, settings: Any
) -> None:
    """A hung worker (issue 28, point 5): its keep-alive thread keeps ``heartbeat_at`` fresh, the run
    makes no step; past ``WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS`` the sweep takes the job over as
    it would a dead worker's, and the new run (eager here) finishes it. A job beating and stepping
    within the deadline is left alone."""
    import time

    from common.jobs import job_keepalive
    from workbench.stale_jobs import resume_stale_jobs

    settings.WORKBENCH_JOB_STALE_SECONDS = 3  # the keep-alive thread beats every 0.6 s
    settings.WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS = 2
    hung = ExportJob.objects.create(study=study, requested_by=owner, format="jsonl")
    claim = job_claim(ExportJob, hung.pk)
    assert claim is not None
    with job_keepalive(ExportJob, hung.pk, claim.token):  # the hung run: alive, never stepping
        time.sleep(1)
        hung.refresh_from_db()
        assert not hung.is_stale and resume_stale_jobs()["export"] == []
        time.sleep(2)
        hung.refresh_from_db()
        assert hung.heartbeat_at > hung.progress_at + timedelta(seconds=1)  # it beat after its last step
        assert hung.heartbeat_at > timezone.now() - timedelta(seconds=3)  # not a lost worker by heartbeat
        assert hung.worker_note == "worker stuck (no progress), waiting to resume"
        assert resume_stale_jobs()["export"] == [hung.pk]  # queued again: run at once (eager)
    hung.refresh_from_db()
    assert (hung.status, hung.resumed_count, hung.worker_note) == ("done", 1, "worker lost, resumed")
    assert hung.claim_token != claim.token  # the hung run can no longer touch it
    assert job_heartbeat(ExportJob, hung.pk, claim.token) is True  # its next step would stop it


def test_without_a_progress_deadline_only_the_heartbeat_counts(job: ExportJob, settings: Any) -> None:
    settings.WORKBENCH_JOB_STALE_SECONDS = 60
    settings.WORKBENCH_JOB_PROGRESS_DEADLINE_SECONDS = 0
    assert job_claim(ExportJob, job.pk)
    ExportJob.objects.filter(pk=job.pk).update(progress_at=timezone.now() - timedelta(days=2))
    job.refresh_from_db()
    assert not job.is_stale and jobs_resume_stale(ExportJob, task_name=PING) == []
