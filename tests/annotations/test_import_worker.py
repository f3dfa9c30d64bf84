"""A real Celery worker process imports a bucket prefix as an import job (the S3 API server and the
test database in common; the web side only queued it)."""

from __future__ import annotations

import pytest

from annotations.interchange.import_jobs import import_job_from_address
from annotations.models import ImportJob, Item
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory, UserFactory
from tests.worker import celery_worker, wait_for
from workbench.celery import app

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_process_imports_a_bucket_prefix(settings, s3_bucket) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.control.purge()
    client = s3_bucket.client()
    client.put_object(Bucket=s3_bucket.name, Key="w/a.png", Body=png_bytes((1, 2, 3)))
    client.put_object(
        Bucket=s3_bucket.name, Key="w/manifest.jsonl", Body=b'{"external_id": "wa", "file": "a.png"}\n'
    )
    owner = UserFactory.create(username="w-owner", role="researcher")
    study = StudyFactory.create(owner=owner)
    job = import_job_from_address(study=study, user=owner, address=f"s3://{s3_bucket.name}/w/")
    s3_env = {
        "WORKBENCH_S3_BUCKET": s3_bucket.name,
        "WORKBENCH_S3_ENDPOINT_URL": s3_bucket.endpoint_url,
        "WORKBENCH_S3_REGION": settings.S3_REGION,
        "WORKBENCH_S3_ADDRESSING_STYLE": "path",
    }
    with celery_worker(extra_env=s3_env) as worker:
        finished = wait_for(lambda: not ImportJob.objects.get(pk=job.pk).is_active)
        if not finished:
            worker.terminate()
            output = worker.communicate(timeout=20)[0]
            pytest.fail(f"the import job did not finish; worker said:\n{output[-3000:]}")
    job.refresh_from_db()
    assert (job.status, job.error, job.report.get("created")) == ("done", "", 1)
    item = Item.objects.get(study=study, external_id="wa")
    with item.images.get().file.open("rb") as handle:
        assert handle.read() == png_bytes((1, 2, 3))
