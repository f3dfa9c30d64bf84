"""Imports from a bucket, imports as jobs, exports to a bucket: against a real S3 API server (moto's
standalone server, ``s3_bucket``), through the paths a researcher takes (command, page, API)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotations.interchange.import_jobs import import_job_cancel, import_job_run
from annotations.interchange.item_import import items_import_opened
from annotations.interchange.sources import stored_open, uploads_store
from annotations.models import ExportJob, ImportJob, Item, ItemImage
from common.errors import ImportRefused
from common.jobs import JobStopped
from common.uploads import ITEM_SUFFIXES
from tests.annotations.imagefiles import png_bytes
from tests.helpers import client_for
from tests.s3_server import REGION, S3Bucket

pytestmark = pytest.mark.django_db


def _put_batch(bucket: S3Bucket, prefix: str = "batch1/") -> None:
    client = bucket.client()
    client.put_object(Bucket=bucket.name, Key=f"{prefix}a.png", Body=png_bytes((255, 0, 0)))
    client.put_object(Bucket=bucket.name, Key=f"{prefix}img/b.png", Body=png_bytes((0, 255, 0)))
    manifest = "external_id,file,prompt\nx1,a.png,a photo of a doctor\nx2,img/b.png,a photo of a nurse\n"
    client.put_object(Bucket=bucket.name, Key=f"{prefix}manifest.csv", Body=manifest.encode())


@pytest.fixture
def s3_storage(s3_bucket: S3Bucket, settings: Any) -> S3Bucket:
    """The deployment's storage (item files, uploads waiting for their job) in the test bucket."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": s3_bucket.name,
                "endpoint_url": s3_bucket.endpoint_url,
                "region_name": REGION,
                "addressing_style": "path",
                "access_key": "testing-key",
                "secret_key": "testing-secret",
            },
        },
    }
    return s3_bucket


# The lab's folders of the test bucket that these tests read and write (the deployment lists them:
# WORKBENCH_S3_IMPORT_BUCKETS; nothing is allowed by default, tests/annotations/test_bucket_tenancy.py).
LAB_FOLDERS = ("batch1", "deep", "loose", "zips", "nothing-here", "out", "studies")


@pytest.fixture(autouse=True)
def _lab_folders_allowed(request: pytest.FixtureRequest, settings: Any) -> None:
    if "s3_bucket" in request.fixturenames:
        bucket = request.getfixturevalue("s3_bucket").name
        settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{bucket}/{folder}/" for folder in LAB_FOLDERS]


def _page_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_import_items_reads_a_manifest_and_its_images_from_a_bucket_prefix(study, s3_bucket, capsys) -> None:
    _put_batch(s3_bucket)
    call_command("import_items", str(study.pk), f"s3://{s3_bucket.name}/batch1/")
    assert json.loads(capsys.readouterr().out)["created"] == 2
    item = Item.objects.get(study=study, external_id="x2")
    assert item.prompt == "a photo of a nurse"
    assert item.images.get().file.read() == png_bytes((0, 255, 0))


def test_import_items_reads_a_manifest_named_by_its_address(study, s3_bucket) -> None:
    _put_batch(s3_bucket, "deep/batch/")
    call_command("import_items", str(study.pk), f"s3://{s3_bucket.name}/deep/batch/manifest.csv")
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == ["x1", "x2"]


def test_a_bucket_prefix_of_images_without_a_manifest_and_a_zip_in_a_bucket(study, s3_bucket) -> None:
    client = s3_bucket.client()
    client.put_object(Bucket=s3_bucket.name, Key="loose/one.png", Body=png_bytes((1, 2, 3)))
    client.put_object(Bucket=s3_bucket.name, Key="zips/set.zip", Body=_zip({"two.png": png_bytes((9, 9, 9))}))
    call_command("import_items", str(study.pk), f"s3://{s3_bucket.name}/loose/")
    call_command("import_items", str(study.pk), f"s3://{s3_bucket.name}/zips/set.zip")
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == [
        "one.png",
        "two.png",
    ]


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("https://example.org/x/", "Not a bucket address"),
        ("s3://someone-elses-bucket/data/", "not a place this study may read from"),
        ("s3://{bucket}/", "give a prefix"),
        ("s3://{bucket}/items/", "not a place this study may read from"),
        ("s3://{bucket}/nothing-here/", "no files under this prefix"),
        ("s3://{bucket}/../x/", "not a plain path"),
    ],
)
def test_import_items_refuses_bucket_addresses_it_may_not_or_cannot_read(
    study, s3_bucket, address: str, says: str
) -> None:
    with pytest.raises(CommandError, match=says):
        call_command("import_items", str(study.pk), address.format(bucket=s3_bucket.name))
    assert not Item.objects.filter(study=study).exists()


def test_a_second_bucket_is_read_only_once_the_deployment_allows_it(study, s3_bucket, settings) -> None:
    other = S3Bucket(name=f"{s3_bucket.name}-lab", endpoint_url=s3_bucket.endpoint_url)
    other.client().create_bucket(Bucket=other.name)
    _put_batch(other)
    with pytest.raises(CommandError, match="not a place this study may read from"):
        call_command("import_items", str(study.pk), f"s3://{other.name}/batch1/")
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [other.name]
    call_command("import_items", str(study.pk), f"s3://{other.name}/batch1/")
    assert Item.objects.filter(study=study).count() == 2


def test_the_items_page_imports_a_bucket_prefix_as_a_job_and_shows_its_progress(
    study, owner, s3_bucket, django_capture_on_commit_callbacks
) -> None:
    _put_batch(s3_bucket)
    client = _page_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-import-items", args=[study.pk]),
            {"address": f"s3://{s3_bucket.name}/batch1/", "next": "items"},
            HTTP_ACCEPT="application/json",
        )
    assert answer.status_code == 202, answer.content
    job = answer.json()["job"]
    status = client.get(job["status_url"]).json()
    assert status["status"] == "done" and status["report"]["created"] == 2, status
    assert Item.objects.filter(study=study).count() == 2
    page = client.get(reverse("study-items", args=[study.pk])).content.decode()
    assert f"s3://{s3_bucket.name}/batch1/" in page and "2 items imported" in page


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("s3://someone-elses-bucket/data/", "not a place this study may read from"),
        ("s3:/broken", "Not a bucket address"),
        ("s3://{bucket}/nothing-here/", "nothing is stored under this prefix"),
    ],
)
def test_the_items_page_refuses_bad_bucket_addresses_with_a_400(
    study, owner, s3_bucket, address: str, says: str
) -> None:
    answer = _page_client(owner).post(
        reverse("study-import-items", args=[study.pk]),
        {"address": address.format(bucket=s3_bucket.name)},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 400
    assert says in answer.json()["error"]
    assert not ImportJob.objects.exists()


def test_the_api_imports_a_bucket_address_as_a_job(
    study, owner, s3_bucket, django_capture_on_commit_callbacks
) -> None:
    _put_batch(s3_bucket)
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            f"/api/studies/{study.pk}/items/import/",
            {"address": f"s3://{s3_bucket.name}/batch1/"},
            format="multipart",
        )
    assert answer.status_code == 202, answer.content
    job = client.get(f"/api/imports/{answer.json()['id']}/").json()
    assert job["status"] == "done" and job["report"]["created"] == 2
    refused = client.post(
        f"/api/studies/{study.pk}/items/import/", {"address": "s3://elsewhere/x/"}, format="multipart"
    )
    assert refused.status_code == 400 and "not a place this study may read from" in json.dumps(refused.json())


def test_an_upload_over_the_inline_size_is_kept_in_storage_imported_by_a_job_then_deleted(
    study, owner, s3_storage, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    archive = _zip(
        {
            "manifest.csv": b"external_id,file\nz1,z1.png\nz2,z2.png\n",
            "z1.png": png_bytes((10, 20, 30)),
            "z2.png": png_bytes((30, 20, 10)),
        }
    )
    client = _page_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-import-items", args=[study.pk]),
            {"file": SimpleUploadedFile("batch.zip", archive), "next": "items"},
            HTTP_ACCEPT="application/json",
        )
    assert answer.status_code == 202, answer.content
    status = client.get(answer.json()["job"]["status_url"]).json()
    assert status["status"] == "done" and status["report"]["created"] == 2
    assert s3_storage.keys("uploads/") == []  # the kept upload went with the job
    assert len(s3_storage.keys(f"items/{study.pk}/")) == 2  # the item files are in the bucket
    assert ItemImage.objects.filter(item__study=study).count() == 2


def test_dropped_images_over_the_inline_size_become_one_job(
    study, owner, s3_storage, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    client = _page_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-import-items", args=[study.pk]),
            {
                "images": [
                    SimpleUploadedFile("p.png", png_bytes((1, 1, 1))),
                    SimpleUploadedFile("q.png", png_bytes((2, 2, 2))),
                ],
                "paths": ["shoot/p.png", "shoot/sub/q.png"],
            },
            HTTP_ACCEPT="application/json",
        )
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get()
    assert (job.status, job.label) == ("done", "2 files")
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == [
        "p.png",
        "sub/q.png",
    ]
    assert s3_storage.keys("uploads/") == []


def test_a_failed_import_job_reports_the_refusal_and_leaves_no_object(
    study, owner, s3_storage, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    archive = _zip({"manifest.csv": b"external_id,file\nok,ok.png\nbad,missing.png\n", "ok.png": png_bytes()})
    client = _page_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-import-items", args=[study.pk]),
            {"file": SimpleUploadedFile("batch.zip", archive)},
            HTTP_ACCEPT="application/json",
        )
    status = client.get(answer.json()["job"]["status_url"]).json()
    assert status["status"] == "failed" and "missing.png" in status["error"], status
    assert s3_storage.keys() == []  # neither the upload nor any item file is left
    assert not Item.objects.filter(study=study).exists()


def test_a_cancelled_import_job_deletes_its_upload_and_imports_nothing(study, owner, s3_storage) -> None:
    stored = uploads_store(
        [SimpleUploadedFile("batch.zip", _zip({"c.png": png_bytes()}))], paths=[], suffixes=ITEM_SUFFIXES
    )
    job = ImportJob.objects.create(study=study, requested_by=owner, upload=stored, label="batch.zip")
    assert s3_storage.keys("uploads/") == [stored]
    assert import_job_cancel(job=job).status == "cancelled"
    assert import_job_run(job_id=job.pk).status == "cancelled"  # the queued task finds nothing to do
    assert s3_storage.keys() == [] and not Item.objects.filter(study=study).exists()


def test_a_running_job_asked_to_stop_ends_cancelled_without_orphans(study, owner, s3_storage) -> None:
    stored = uploads_store(
        [SimpleUploadedFile("batch.zip", _zip({"c.png": png_bytes()}))], paths=[], suffixes=ITEM_SUFFIXES
    )
    job = ImportJob.objects.create(study=study, requested_by=owner, upload=stored, label="batch.zip")
    ImportJob.objects.filter(pk=job.pk).update(status="running")
    assert import_job_cancel(job=job).cancel_requested
    ImportJob.objects.filter(pk=job.pk).update(status="pending")  # its task is delivered now
    assert import_job_run(job_id=job.pk).status == "cancelled"
    assert s3_storage.keys() == []


def test_an_import_stopped_while_it_stores_files_deletes_the_ones_it_stored(study, s3_storage) -> None:
    names = {f"f{index}.png": png_bytes((index, 0, 0)) for index in range(4)}
    stored = uploads_store([SimpleUploadedFile("batch.zip", _zip(names))], paths=[], suffixes=ITEM_SUFFIXES)
    calls = {"n": 0}

    def tick() -> None:  # a heartbeat that learns of a cancel once two files are stored
        calls["n"] += 1
        if len(s3_storage.keys("items/")) >= 2:
            raise JobStopped("cancelled")

    with pytest.raises(JobStopped):
        items_import_opened(study=study, opened=stored_open(stored), tick=tick)
    assert calls["n"] > len(names)  # it was stopped during the file saves, not before
    assert s3_storage.keys("items/") == [] and not Item.objects.filter(study=study).exists()


def test_a_bucket_member_larger_than_the_image_limit_is_refused(study, s3_bucket, settings) -> None:
    settings.WORKBENCH_MAX_IMAGE_BYTES = 10
    _put_batch(s3_bucket)
    with pytest.raises(CommandError, match="larger than"):
        call_command("import_items", str(study.pk), f"s3://{s3_bucket.name}/batch1/")


def test_export_writes_to_a_bucket_prefix(study, s3_bucket, capsys) -> None:
    Item.objects.create(study=study, external_id="e1", prompt="p")
    call_command("export", str(study.pk), "--format", "jsonl", "--to", f"s3://{s3_bucket.name}/out/")
    key = f"out/study-{study.pk}.jsonl"
    assert s3_bucket.keys("out/") == [key]
    body = s3_bucket.client().get_object(Bucket=s3_bucket.name, Key=key)["Body"].read().decode()
    assert '"e1"' in body
    with pytest.raises(CommandError, match="not a place this study may write to"):
        call_command("export", str(study.pk), "--to", "s3://elsewhere/exports/")


def test_the_export_page_writes_an_export_job_to_a_bucket_prefix(
    study, owner, s3_bucket, django_capture_on_commit_callbacks
) -> None:
    Item.objects.create(study=study, external_id="e1", prompt="p")
    client = _page_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-export-bucket", args=[study.pk]),
            {"format": "csv", "target": f"s3://{s3_bucket.name}/out/"},
        )
    assert answer.status_code == 302
    job = ExportJob.objects.get()
    assert job.status == "done" and job.target == f"s3://{s3_bucket.name}/out/study-{study.pk}.csv"
    assert s3_bucket.keys("out/") == [f"out/study-{study.pk}.csv"]
    refused = client.post(
        reverse("study-export-bucket", args=[study.pk]),
        {"format": "csv", "target": "s3://elsewhere/out/"},
        HTTP_ACCEPT="application/json",
    )
    assert refused.status_code == 400 and "not a place this study may write to" in refused.json()["error"]
    assert ExportJob.objects.count() == 1


def test_uploads_store_refuses_what_an_import_in_the_request_refuses(s3_storage) -> None:
    with pytest.raises(Exception, match="accepted files"):
        uploads_store([SimpleUploadedFile("notes.txt", b"x")], paths=[], suffixes=ITEM_SUFFIXES)
    with pytest.raises(ImportRefused, match="outside"):
        uploads_store(
            [SimpleUploadedFile("a.png", png_bytes()), SimpleUploadedFile("b.png", png_bytes())],
            paths=["../a.png", "b.png"],
            suffixes=ITEM_SUFFIXES,
        )
    assert s3_storage.keys() == []


def test_an_import_job_whose_worker_was_lost_is_taken_over_and_imported_once(
    study, owner, s3_storage, settings, django_capture_on_commit_callbacks
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from common.jobs import job_claim

    settings.WORKBENCH_JOB_STALE_SECONDS = 60
    stored = uploads_store(
        [SimpleUploadedFile("batch.zip", _zip({"s.png": png_bytes()}))], paths=[], suffixes=ITEM_SUFFIXES
    )
    job = ImportJob.objects.create(study=study, requested_by=owner, upload=stored, label="batch.zip")
    assert job_claim(ImportJob, job.pk)  # the run that is about to be lost (its transaction never commits)
    ImportJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=61))
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("resume_stale_jobs", stdout=out)
    assert json.loads(out.getvalue())["import"] == [job.pk]
    job.refresh_from_db()
    assert (job.status, job.resumed_count, job.report["created"]) == ("done", 1, 1)
    assert Item.objects.filter(study=study).count() == 1
    assert s3_storage.keys("uploads/") == []


def test_a_study_exported_to_a_bucket_is_imported_back_from_it(study, owner, s3_bucket, capsys) -> None:
    Item.objects.create(study=study, external_id="round-trip", prompt="p")
    call_command("export", str(study.pk), "--format", "jsonl", "--to", f"s3://{s3_bucket.name}/studies/")
    capsys.readouterr()
    address = f"s3://{s3_bucket.name}/studies/study-{study.pk}.jsonl"
    call_command("import_study", address, "--owner", owner.username, "--name", "From the bucket")
    copy = Item.objects.get(study__name="From the bucket")
    assert copy.external_id == "round-trip" and copy.study_id != study.pk


def test_every_file_import_command_refuses_a_bucket_it_may_not_read(study, s3_bucket) -> None:
    for command, args in (
        ("import_annotations", [str(study.pk), "s3://elsewhere/a.jsonl"]),
        ("import_features", [str(study.pk), "s3://elsewhere/f.jsonl"]),
        ("import_study", ["s3://elsewhere/s.jsonl", "--owner", "owner"]),
        ("mark_gold", [str(study.pk), "s3://elsewhere/g.csv"]),
    ):
        with pytest.raises(CommandError, match="not a place this study may read from"):
            call_command(command, *args)


def test_the_api_imports_a_large_upload_as_a_job_only_its_owner_sees(
    study, owner, other_researcher, s3_storage, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    client = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            f"/api/studies/{study.pk}/items/import/",
            {"file": SimpleUploadedFile("batch.zip", _zip({"api.png": png_bytes()}))},
            format="multipart",
        )
    assert answer.status_code == 202, answer.content
    job_id = answer.json()["id"]
    assert client.get(f"/api/imports/{job_id}/").json()["report"]["created"] == 1
    assert s3_storage.keys("uploads/") == []
    assert client_for(other_researcher).get(f"/api/imports/{job_id}/").status_code == 404
    page = _page_client(other_researcher).get(reverse("study-import-job", args=[study.pk, job_id]))
    assert page.status_code == 404


@pytest.mark.filesystem  # the media folder itself (in a bucket: the tests above)
def test_an_upload_job_on_the_embedded_default_storage_leaves_no_upload_behind(
    study, owner, settings, _media_root, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    client = _page_client(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-import-items", args=[study.pk]),
            {
                "file": SimpleUploadedFile(
                    "batch.zip", _zip({"d.png": png_bytes(), "e.png": png_bytes((1, 1, 1))})
                )
            },
        )
    assert answer.status_code == 302
    assert ImportJob.objects.get().status == "done" and Item.objects.filter(study=study).count() == 2
    assert list((_media_root / "uploads").iterdir()) == []  # neither the file nor its folder
    page = client.get(reverse("study-items", args=[study.pk])).content.decode()
    assert "batch.zip" in page and "2 items imported" in page
