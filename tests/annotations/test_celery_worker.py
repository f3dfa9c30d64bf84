"""A real Celery worker process takes tasks from the configured broker (embedded SQLite broker by
default, Redis in CI's second pass) and writes to the test database."""

from __future__ import annotations

import pytest

from annotations.interchange.exports import export_job_create
from annotations.models import ExportJob
from annotations.tasks import ping_task
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.worker import celery_worker, wait_for
from workbench.celery import app

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_process_runs_a_task_and_a_background_export(settings) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.control.purge()
    owner = UserFactory.create(username="w-owner", role="researcher")
    study = StudyFactory.create(owner=owner)
    ItemFactory.create(study=study, external_id="i1")
    job = export_job_create(study=study, user=owner, fmt="jsonl")  # enqueued on commit (autocommit here)
    result = ping_task.delay("hello")
    with celery_worker() as worker:
        assert result.get(timeout=90) == "pong:hello"
        finished = wait_for(lambda: ExportJob.objects.get(pk=job.pk).status == ExportJob.Status.DONE)
        if not finished:
            worker.terminate()
            output = worker.communicate(timeout=20)[0]
            pytest.fail(f"the export job did not finish; worker said:\n{output[-3000:]}")
    job.refresh_from_db()
    with job.file.open("rb") as handle:
        assert b'"external_id": "i1"' in handle.read()
