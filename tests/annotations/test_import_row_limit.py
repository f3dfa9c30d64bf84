"""An upload of many rows is imported by a worker even when its bytes are few
(``WORKBENCH_IMPORT_INLINE_ROWS``), and no answer lists every new id: the counts and the first
``ID_EXAMPLES`` ids (docs/import-export.md, "Imports as jobs").

A 19 MB manifest of 915,689 rows was imported within the request for 73 s and its answer listed every
new item id (about 7 MB); two at once slowed every other user."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from annotations.interchange.import_kinds import ID_EXAMPLES
from annotations.models import ImportJob, Item, Study
from common.uploads import upload_rows
from tests.factories import ItemFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

ROWS = 150


def _manifest(rows: int = ROWS, prefix: str = "r") -> bytes:
    """A CSV of reference items (no image files): a few bytes per row."""
    return ("external_id,prompt\n" + "".join(f"{prefix}{n},p{n}\n" for n in range(rows))).encode()


def _page(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _bounded(answer: dict[str, Any], count: int, key: str = "item_ids") -> None:
    ids = answer[key]
    assert len(ids) == min(count, ID_EXAMPLES) and answer[f"{key}_count"] == count
    assert answer[f"{key}_truncated"] is (count > ID_EXAMPLES)


# --- Many rows, few bytes: a job ------------------------------------------------------------------


def test_a_small_manifest_of_many_rows_is_a_job_through_the_page(
    study: Study, owner, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_ROWS = 20
    data = _manifest()
    assert len(data) < settings.WORKBENCH_IMPORT_INLINE_BYTES
    client = _page(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("study-import-items", args=[study.pk]),
            {"file": SimpleUploadedFile("items.csv", data)},
            HTTP_ACCEPT="application/json",
        )
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get()
    assert (job.kind, job.status, job.error) == ("items", "done", "")
    assert Item.objects.filter(study=study).count() == ROWS  # the job imported every row
    status = client.get(answer.json()["job"]["status_url"]).json()
    assert status["report"]["created"] == ROWS
    _bounded(status["report"], ROWS)


def test_a_form_post_of_many_rows_is_queued_too(
    study: Study, owner, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_ROWS = 20
    with django_capture_on_commit_callbacks(execute=True):
        answer = _page(owner).post(
            reverse("study-import-items", args=[study.pk]),
            {"file": SimpleUploadedFile("items.csv", _manifest()), "next": "items"},
        )
    assert answer.status_code == 302
    assert ImportJob.objects.get().status == "done"
    assert Item.objects.filter(study=study).count() == ROWS


def test_a_small_manifest_of_many_rows_is_a_job_through_the_api(
    study: Study, owner, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_ROWS = 20
    api = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post(
            f"/api/studies/{study.pk}/items/import/",
            {
                "file": SimpleUploadedFile(
                    "items.jsonl",
                    b"".join(
                        json.dumps({"external_id": f"j{n}", "prompt": "p"}).encode() + b"\n"
                        for n in range(ROWS)
                    ),
                )
            },
            format="multipart",
        )
    assert answer.status_code == 202, answer.content
    job = api.get(f"/api/imports/{answer.json()['id']}/").json()
    assert job["status"] == "done" and job["report"]["created"] == ROWS
    _bounded(job["report"], ROWS)
    assert Item.objects.filter(study=study).count() == ROWS


def test_a_zip_of_a_long_manifest_is_a_job(
    study: Study, owner, settings, django_capture_on_commit_callbacks
) -> None:
    """Compressed, a long manifest is small: its rows are counted unpacked."""
    settings.WORKBENCH_IMPORT_INLINE_ROWS = 20
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.csv", _manifest())
    with django_capture_on_commit_callbacks(execute=True):
        answer = client_for(owner).post(
            f"/api/studies/{study.pk}/items/import/",
            {"file": SimpleUploadedFile("batch.zip", buffer.getvalue())},
            format="multipart",
        )
    assert answer.status_code == 202, answer.content
    assert ImportJob.objects.get().status == "done"
    assert Item.objects.filter(study=study).count() == ROWS


def test_every_other_inline_import_counts_rows_too(
    study: Study, owner, settings, django_capture_on_commit_callbacks
) -> None:
    """Annotations (through ``import_upload``, as features, COCO, Label Studio, stereotype tables and
    controls): a JSONL of many short lines becomes a job, which imports every line."""
    for n in range(30):
        ItemFactory.create(study=study, external_id=f"a{n}")
    lines = b"".join(
        json.dumps({"item": f"a{n}", "annotator": "ann-1", "question": "gender", "value": "male"}).encode()
        + b"\n"
        for n in range(30)
    )
    settings.WORKBENCH_IMPORT_INLINE_ROWS = 10
    api = client_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post(
            f"/api/studies/{study.pk}/annotations/import/",
            {"file": SimpleUploadedFile("answers.jsonl", lines), "format": "jsonl"},
            format="multipart",
        )
    assert answer.status_code == 202 and answer.json()["kind"] == "annotations", answer.content
    job = api.get(f"/api/imports/{answer.json()['id']}/").json()
    assert job["status"] == "done" and job["report"]["created"] == 30, job


def test_a_new_study_from_a_label_studio_export_of_many_tasks_is_a_job(
    owner, settings, django_capture_on_commit_callbacks
) -> None:
    tasks = [{"id": n, "data": {"text": f"t{n}"}} for n in range(40)]
    config = b'<View><Text name="text" value="$text"/><Choices name="ok" toName="text">' + (
        b'<Choice value="yes"/><Choice value="no"/></Choices></View>'
    )
    settings.WORKBENCH_IMPORT_INLINE_ROWS = 20
    with django_capture_on_commit_callbacks(execute=True):
        answer = client_for(owner).post(
            "/api/studies/labelstudio/",
            {
                "name": "many tasks",
                "file": SimpleUploadedFile("export.json", json.dumps(tasks).encode()),
                "config": SimpleUploadedFile("config.xml", config),
            },
            format="multipart",
        )
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get()
    assert job.status == "done", job.error
    assert Item.objects.filter(study=job.study).count() == 40


def test_a_manifest_within_both_limits_is_still_imported_in_the_request(
    study: Study, owner, settings
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_ROWS = ROWS + 1  # the header is a line too
    answer = client_for(owner).post(
        f"/api/studies/{study.pk}/items/import/",
        {"file": SimpleUploadedFile("items.csv", _manifest())},
        format="multipart",
    )
    assert answer.status_code == 201 and answer.json()["created"] == ROWS
    assert not ImportJob.objects.exists()


# --- No answer lists every new id -----------------------------------------------------------------


def test_the_apis_inline_answer_lists_the_first_ids_and_counts_them(study: Study, owner) -> None:
    answer = client_for(owner).post(
        f"/api/studies/{study.pk}/items/import/",
        {"file": SimpleUploadedFile("items.csv", _manifest())},
        format="multipart",
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    _bounded(body, ROWS)
    first = list(Item.objects.filter(study=study).order_by("id").values_list("id", flat=True)[:ID_EXAMPLES])
    assert body["item_ids"] == first


def test_the_upload_scripts_answer_lists_the_first_ids_and_counts_them(study: Study, owner) -> None:
    answer = _page(owner).post(
        reverse("study-import-items", args=[study.pk]),
        {"file": SimpleUploadedFile("items.csv", _manifest())},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 200 and answer.json()["created"] == ROWS
    _bounded(answer.json(), ROWS)


def test_a_small_import_lists_all_its_ids(study: Study, owner) -> None:
    answer = client_for(owner).post(
        f"/api/studies/{study.pk}/items/import/",
        {"file": SimpleUploadedFile("items.csv", _manifest(3))},
        format="multipart",
    )
    _bounded(answer.json(), 3)


def test_the_controls_answer_lists_the_first_ids_and_counts_them(study: Study, owner) -> None:
    for n in range(ROWS):
        ItemFactory.create(study=study, external_id=f"c{n}")
    gold = ("external_id,gender\n" + "".join(f"c{n},male\n" for n in range(ROWS))).encode()
    answer = client_for(owner).post(
        f"/api/studies/{study.pk}/controls/import/",
        {"file": SimpleUploadedFile("gold.csv", gold)},
        format="multipart",
    )
    assert answer.status_code == 201 and answer.json()["marked"] == ROWS, answer.content
    _bounded(answer.json(), ROWS)


# --- Counting rows: cheap and bounded ---------------------------------------------------------------


def _upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


def test_rows_are_counted_by_file_type_and_only_up_to_the_limit() -> None:
    big = 1 << 30
    assert upload_rows(_upload("m.csv", _manifest(10)), limit=100, unpacked_limit=big) == 11
    assert upload_rows(_upload("m.jsonl", b"{}\n" * 7), limit=100, unpacked_limit=big) == 7
    assert upload_rows(_upload("e.json", b'[{"a": {"b": 1}}, {"c": 2}]'), limit=100, unpacked_limit=big) == 3
    assert upload_rows(_upload("a.png", b"\n" * 50), limit=10, unpacked_limit=big) == 1
    assert upload_rows(_upload("m.csv", b"x\n" * 10_000), limit=10, unpacked_limit=big) > 10
    assert upload_rows(_upload("no.zip", b"not a zip"), limit=10, unpacked_limit=big) == 0
    upload = _upload("m.csv", _manifest(10))
    upload_rows(upload, limit=3, unpacked_limit=big)
    assert upload.read() == _manifest(10)  # left at its start for storage to keep


def test_a_zip_counts_its_manifest_lines_and_images_and_stops_at_the_unpacked_limit() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.csv", _manifest(10))
        archive.writestr("a.png", b"png")
        archive.writestr("b.png", b"png")
    data = buffer.getvalue()
    assert upload_rows(_upload("batch.zip", data), limit=100, unpacked_limit=1 << 20) == 13
    # a long single line: few rows, but more unpacked bytes than the inline size is a job
    long_line = io.BytesIO()
    with zipfile.ZipFile(long_line, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.jsonl", b" " * 100_000)
    assert upload_rows(_upload("one.zip", long_line.getvalue()), limit=100, unpacked_limit=1_000) == 101
