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
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{s3_bucket.name}/w/"]
    job = import_job_from_address(study=study, user=owner, address=f"s3://{s3_bucket.name}/w/")
    s3_env = {
        "WORKBENCH_S3_IMPORT_BUCKETS": f"{s3_bucket.name}/w/",  # the worker checks the address again
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


def test_a_worker_process_runs_a_label_studio_upload_kept_in_the_bucket(settings, s3_bucket) -> None:
    """A Label Studio zip posted to the page over the inline limit: kept in the bucket, imported by a
    worker process (its own media folder; the bucket and the database in common), the upload deleted."""
    import io
    import zipfile

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from annotations.models import Annotation

    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.control.purge()
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    owner = UserFactory.create(username="ls-owner", role="researcher")
    study = StudyFactory.create(owner=owner)  # its questions: gender (single), attributes, boxes, ...
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "tasks.json",
            '[{"id": 7, "data": {"image": "/data/upload/1/a.png"}, "annotations": [{"completed_by": 3, '
            '"result": [{"from_name": "gender", "to_name": "image", "type": "choices", '
            '"value": {"choices": ["female"]}}]}]}]',
        )
        archive.writestr("upload/1/a.png", png_bytes((4, 5, 6)))
    client = Client()
    client.force_login(owner)
    answer = client.post(
        f"/studies/{study.pk}/import/labelstudio/", {"file": SimpleUploadedFile("ls.zip", buffer.getvalue())}
    )
    assert answer.status_code == 302
    job = ImportJob.objects.get(study=study)
    assert job.kind == "labelstudio" and s3_bucket.keys("uploads/")
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
    assert (job.status, job.error, job.report["tasks"]) == ("done", "", 1), job.error
    assert Annotation.objects.get(study=study, question_key="gender").value == "female"
    assert s3_bucket.keys("uploads/") == [] and len(s3_bucket.keys(f"items/{study.pk}/")) == 1
