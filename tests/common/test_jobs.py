"""The job lifecycle of ``common.jobs``: enqueue by name on commit, claim compare-and-set,
heartbeat with cancellation, finish (on ``ExportJob``, one of the models that extend it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from celery.exceptions import NotRegistered
from django.db import transaction
from django.utils import timezone

from annotations.models import ExportJob, Study, User
from common.jobs import job_claim, job_enqueue, job_finish, job_heartbeat

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
    assert [job_claim(ExportJob, job.pk), job_claim(ExportJob, job.pk)] == [True, False]
    job.refresh_from_db()
    assert job.status == ExportJob.Status.RUNNING and job.error == ""
    assert job.started_at is not None and job.heartbeat_at == job.started_at


def test_a_job_that_is_not_pending_or_is_gone_is_not_claimed(job: ExportJob) -> None:
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.CANCELLED)
    assert job_claim(ExportJob, job.pk) is False
    assert job_claim(ExportJob, job.pk + 1000) is False
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
    from annotations.services.exports import export_job_create

    with django_capture_on_commit_callbacks(execute=True):
        job = export_job_create(study=study, user=owner, fmt="jsonl")
        assert ExportJob.objects.get(pk=job.pk).status == ExportJob.Status.PENDING
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE and job.file and job.heartbeat_at is not None
