"""Buckets by tenant (docs/security.md, third round, H1): a bucket address never reaches the
workbench's own folders of its storage bucket (every study's images, display copies, uploads waiting
for a job, export and report files), is allowed only under entries a deployment lists (per study or
per account), gets the same refusal whether or not anything is stored there, and an export never
replaces an object it did not write. Against a real S3 API server (moto's), through the page, the
API and the command line a researcher uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import models
from django.test import Client
from django.urls import reverse

from annotations.apps import bucket_entries_check
from annotations.interchange.bucket_addresses import STORAGE_NAMESPACES
from annotations.interchange.exports import export_job_create
from annotations.interchange.import_jobs import import_job_from_address, import_job_run
from annotations.interchange.item_import import items_import
from annotations.interchange.sources import uploads_store
from annotations.models import ExportJob, ImportJob, Item, ItemImage, Study
from annotations.services.stored_files import display_image_name
from common.uploads import ITEM_SUFFIXES
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory
from tests.helpers import client_for
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.django_db


def _page(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _victim_study(owner: Any, tmp_path: Path) -> Study:
    """Another researcher's study whose two images are stored in the storage bucket."""
    victim = StudyFactory.create(owner=owner, name="victim")
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "a.png").write_bytes(png_bytes((200, 0, 0)))
    (folder / "b.png").write_bytes(png_bytes((0, 200, 0)))
    items_import(study=victim, address=folder)
    assert ItemImage.objects.filter(item__study=victim).count() == 2
    return victim


def _page_import(client: Client, study: Study, address: str) -> Any:
    return client.post(
        reverse("study-import-items", args=[study.pk]), {"address": address}, HTTP_ACCEPT="application/json"
    )


def _api_import(user: Any, study: Study, address: str) -> Any:
    return client_for(user).post(
        f"/api/studies/{study.pk}/items/import/", {"address": address}, format="multipart"
    )


def _refusal(answer: Any) -> str:
    assert answer.status_code == 400, answer.content
    body = answer.json()
    return str(body.get("error") or json.dumps(body))


def test_no_bucket_address_is_allowed_by_default_not_even_the_storage_bucket(
    owner, other_researcher, s3_bucket: S3Bucket, tmp_path: Path, settings
) -> None:
    victim = _victim_study(owner, tmp_path)
    mine = StudyFactory.create(owner=other_researcher, name="mine")
    assert settings.WORKBENCH_S3_IMPORT_BUCKETS == [] and settings.S3_BUCKET == s3_bucket.name
    refused = _refusal(
        _page_import(_page(other_researcher), mine, f"s3://{s3_bucket.name}/items/{victim.pk}/")
    )
    assert "not a place this study may read from; allowed: none" in refused
    assert not ImportJob.objects.exists() and not Item.objects.filter(study=mine).exists()
    # No bucket form is offered where nothing is allowed.
    page = _page(other_researcher).get(reverse("study-items", args=[mine.pk])).content.decode()
    assert 'id="bucket-form"' not in page


@pytest.mark.parametrize("folder", ["items/{victim}/", "display/", "uploads/", "exports/", "reports/"])
def test_the_storage_folders_stay_out_of_reach_even_when_the_whole_bucket_is_listed(
    owner, other_researcher, s3_bucket: S3Bucket, tmp_path: Path, settings, folder: str
) -> None:
    """The attack of the third round: a researcher without access to study 1 imported
    ``s3://<bucket>/items/1/`` into their own study and got its images. Listing the storage bucket
    whole (the old default) no longer reaches anything of the workbench's own, by page or API."""
    victim = _victim_study(owner, tmp_path)
    uploads_store(
        [SimpleUploadedFile("kept.zip", b"PK\x05\x06" + b"\0" * 18)], paths=[], suffixes=ITEM_SUFFIXES
    )
    mine = StudyFactory.create(owner=other_researcher, name="mine")
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [s3_bucket.name]
    address = f"s3://{s3_bucket.name}/{folder.format(victim=victim.pk)}"
    for answer in (
        _page_import(_page(other_researcher), mine, address),
        _api_import(other_researcher, mine, address),
    ):
        assert "not a place this study may read from" in _refusal(answer)
    assert not ImportJob.objects.exists() and not Item.objects.filter(study=mine).exists()


def test_a_refusal_says_the_same_whether_or_not_objects_exist(
    owner, other_researcher, s3_bucket: S3Bucket, tmp_path: Path, settings
) -> None:
    victim = _victim_study(owner, tmp_path)
    mine = StudyFactory.create(owner=other_researcher, name="mine")
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{s3_bucket.name}/exchange/{{study}}/"]
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key=f"exchange/{victim.pk}/a.png", Body=png_bytes())
    client = _page(other_researcher)
    stored = _refusal(_page_import(client, mine, f"s3://{s3_bucket.name}/exchange/{victim.pk}/"))
    empty = _refusal(_page_import(client, mine, f"s3://{s3_bucket.name}/exchange/999999/"))
    own_items = _refusal(_page_import(client, mine, f"s3://{s3_bucket.name}/items/{victim.pk}/"))
    no_items = _refusal(_page_import(client, mine, f"s3://{s3_bucket.name}/items/999999/"))
    assert stored.replace(f"/{victim.pk}/:", "/N/:") == empty.replace("/999999/:", "/N/:")
    assert own_items.replace(f"/{victim.pk}/:", "/N/:") == no_items.replace("/999999/:", "/N/:")
    for message in (stored, own_items):
        assert f"allowed: s3://{s3_bucket.name}/exchange/{mine.pk}/" in message and "a.png" not in message
    # Export targets are refused the same way (the export of a bucket of another study's items).
    exported = client.post(
        reverse("study-export-bucket", args=[mine.pk]),
        {"format": "csv", "target": f"s3://{s3_bucket.name}/items/{victim.pk}/"},
        HTTP_ACCEPT="application/json",
    )
    assert "not a place this study may write to" in _refusal(exported)
    assert not ExportJob.objects.exists()


def test_entries_scoped_per_study_and_per_account(
    owner, other_researcher, s3_bucket: S3Bucket, settings, django_capture_on_commit_callbacks
) -> None:
    mine = StudyFactory.create(owner=other_researcher, name="mine")
    theirs = StudyFactory.create(owner=owner, name="theirs")
    client = s3_bucket.client()
    for key in (f"lab/{mine.pk}/m.png", f"lab/{theirs.pk}/t.png", f"people/{owner.pk}/o.png"):
        client.put_object(Bucket=s3_bucket.name, Key=key, Body=png_bytes())
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [
        f"{s3_bucket.name}/lab/{{study}}/",
        f"{s3_bucket.name}/people/{{user}}/",
    ]
    assert "not a place" in _refusal(
        _api_import(other_researcher, mine, f"s3://{s3_bucket.name}/lab/{theirs.pk}/")
    )
    assert "not a place" in _refusal(
        _api_import(other_researcher, mine, f"s3://{s3_bucket.name}/people/{owner.pk}/")
    )
    with django_capture_on_commit_callbacks(execute=True):
        answer = _api_import(other_researcher, mine, f"s3://{s3_bucket.name}/lab/{mine.pk}/")
    assert answer.status_code == 202, answer.content
    with django_capture_on_commit_callbacks(execute=True):
        answer = _api_import(owner, theirs, f"s3://{s3_bucket.name}/people/{owner.pk}/")
    assert answer.status_code == 202, answer.content
    assert list(Item.objects.filter(study=mine).values_list("external_id", flat=True)) == ["m.png"]
    assert list(Item.objects.filter(study=theirs).values_list("external_id", flat=True)) == ["o.png"]
    # The command line has no account: an entry naming {user} is not one it may use.
    with pytest.raises(CommandError, match="not a place this study may read from"):
        call_command("import_items", str(theirs.pk), f"s3://{s3_bucket.name}/people/{owner.pk}/")


def test_a_queued_import_is_checked_again_when_it_runs(owner, study, s3_bucket: S3Bucket, settings) -> None:
    s3_bucket.client().put_object(Bucket=s3_bucket.name, Key="lab/a.png", Body=png_bytes())
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{s3_bucket.name}/lab/"]
    settings.CELERY_TASK_ALWAYS_EAGER = False
    job = import_job_from_address(study=study, user=owner, address=f"s3://{s3_bucket.name}/lab/")
    settings.WORKBENCH_S3_IMPORT_BUCKETS = []  # the deployment withdrew the entry before the job ran
    finished = import_job_run(job_id=job.pk)
    assert (
        finished.status == ImportJob.Status.FAILED
        and "not a place this study may read from" in finished.error
    )
    assert not Item.objects.filter(study=study).exists()


def test_an_export_never_replaces_an_object_it_did_not_write(
    owner, study, s3_bucket: S3Bucket, settings, django_capture_on_commit_callbacks
) -> None:
    """The attack wrote ``study-<id>.<ext>`` over another lab's file (whose next import then failed)."""
    Item.objects.create(study=study, external_id="e1", prompt="p")
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{s3_bucket.name}/shared/"]
    client = s3_bucket.client()
    theirs = f"shared/study-{study.pk}.csv"
    client.put_object(Bucket=s3_bucket.name, Key=theirs, Body=b"another lab's manifest\n")
    page = _page(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = page.post(
            reverse("study-export-bucket", args=[study.pk]),
            {"format": "csv", "target": f"s3://{s3_bucket.name}/shared/"},
        )
    assert answer.status_code == 302
    job = ExportJob.objects.get()
    assert job.status == "done" and job.target == f"s3://{s3_bucket.name}/shared/study-{study.pk}-2.csv"
    assert client.get_object(Bucket=s3_bucket.name, Key=theirs)["Body"].read() == b"another lab's manifest\n"
    # A run of the same job that was taken over replaces its own object, not the other lab's.
    ExportJob.objects.filter(pk=job.pk).update(
        status="pending", claim_token="", target=job.target.rsplit("/", 1)[0] + "/"
    )
    from annotations.interchange.exports import export_job_run

    again = export_job_run(job_id=job.pk)
    assert again.target == job.target
    assert sorted(s3_bucket.keys("shared/")) == sorted([theirs, f"shared/study-{study.pk}-2.csv"])
    # The command line keeps to the same rule: a third name.
    call_command("export", str(study.pk), "--format", "csv", "--to", f"s3://{s3_bucket.name}/shared/")
    assert f"shared/study-{study.pk}-3.csv" in s3_bucket.keys("shared/")


def test_export_entries_may_differ_from_import_entries(owner, study, s3_bucket: S3Bucket, settings) -> None:
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{s3_bucket.name}/in/"]
    settings.WORKBENCH_S3_EXPORT_BUCKETS = [f"{s3_bucket.name}/out/"]
    with pytest.raises(Exception, match="not a place this study may write to; allowed: s3://.*/out/"):
        export_job_create(study=study, user=owner, fmt="csv", target=f"s3://{s3_bucket.name}/in/")
    assert export_job_create(study=study, user=owner, fmt="csv", target=f"s3://{s3_bucket.name}/out/").target


def test_entries_that_name_the_storage_are_ignored_and_reported_at_start_up(
    s3_bucket: S3Bucket, settings
) -> None:
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [
        s3_bucket.name,
        f"{s3_bucket.name}/items/",
        f"{s3_bucket.name}/lab/",
        "bad bucket",
    ]
    problems = [message.msg for message in bucket_entries_check()]
    assert len(problems) == 3, problems
    assert sum("reaches the workbench's own storage" in problem for problem in problems) == 2
    assert any("'bad bucket'" in problem for problem in problems)


def test_every_stored_file_lies_in_a_storage_folder_that_addresses_never_reach(
    owner, s3_bucket: S3Bucket, tmp_path: Path, settings
) -> None:
    """STORAGE_NAMESPACES is complete: every file field's folder (exports, reports), and every object
    a study's images, display copies, kept uploads and export jobs leave in the bucket."""
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, models.FileField) and isinstance(field.upload_to, str):
                assert field.upload_to.split("/", 1)[0] in STORAGE_NAMESPACES, (model, field.name)
    victim = _victim_study(owner, tmp_path)
    for image in ItemImage.objects.filter(item__study=victim):
        display_image_name(image, size=4)  # a display copy (the test images are larger than 4 px)
    uploads_store(
        [SimpleUploadedFile("kept.zip", b"PK\x05\x06" + b"\0" * 18)], paths=[], suffixes=ITEM_SUFFIXES
    )
    export_job_create(study=victim, user=owner, fmt="jsonl")
    keys = s3_bucket.keys()
    assert keys and {key.split("/", 1)[0] for key in keys} <= STORAGE_NAMESPACES, keys
