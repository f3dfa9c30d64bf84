"""Every kind of import upload (Label Studio, COCO, annotations, features, stereotype table, controls)
lands in storage and, over ``WORKBENCH_IMPORT_INLINE_MB``, becomes an import job: through the pages
and the API a researcher uses, on the media folder and on a real S3 API server (``file_store``).

For each kind: the job gives the same rows and the same report sentence as the import within the
request; a refusal is the job's error, word for word the request's, and writes nothing; a cancelled
job imports nothing; no upload (nor item file) is left in storage afterwards.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from annotations.interchange.exports import export_coco
from annotations.interchange.import_jobs import import_job_run
from annotations.interchange.import_kinds import KINDS, ImportRun
from annotations.interchange.sources import stored_delete, upload_keep
from annotations.models import Annotation, ImportJob, Item, ItemFeature, StereotypeEntry, Study
from common.jobs import JobStopped
from tests.annotations.builders import LABELSTUDIO_FIXTURES, row_counts
from tests.helpers import client_for
from tests.s3_server import FileStore, S3Bucket

pytestmark = pytest.mark.django_db

CONFIG = LABELSTUDIO_FIXTURES / "config.xml"
MEDIA = LABELSTUDIO_FIXTURES / "media"


def ls_study(name: str) -> Study:
    """A study made from the Label Studio fixture (items 101-103, questions gender, attributes,
    quality, comment, boxes), through the command; its own answers are removed."""
    out = io.StringIO()
    call_command(
        "import_labelstudio",
        str(LABELSTUDIO_FIXTURES / "project_export.json"),
        "--create",
        name,
        "--config",
        str(CONFIG),
        "--media-root",
        str(MEDIA),
        "--owner",
        "owner",
        stdout=out,
    )
    study = Study.objects.get(pk=json.loads(out.getvalue())["study"])
    Annotation.objects.filter(study=study).delete()
    return study


def _ls_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(LABELSTUDIO_FIXTURES / "snapshot_export.json", "export.json")
        for file in MEDIA.rglob("*.png"):
            archive.write(file, file.relative_to(MEDIA).as_posix())
    return buffer.getvalue()


def _coco(study: Study) -> bytes:
    """The COCO boxes of a Label Studio study (imported, exported, then removed again)."""
    from annotations.interchange.labelstudio.importer import labelstudio_import

    labelstudio_import(address=LABELSTUDIO_FIXTURES / "project_export.json", study=study)
    data = json.dumps(export_coco(study)).encode()
    Annotation.objects.filter(study=study).delete()
    return data


def _ratings() -> bytes:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "all_visual_attr"
    sheet.append(
        ["attribute", "rating_asia", "score_asia", "rating_emea", "score_emea", "rating_na", "score_na"]
    )
    sheet.append(["hat", "", 5, "", 4, "", 4])
    sheet.append(["poor", "", 1, "", 2, "", 1])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


SEEGULL = b"identity,attribute,NA_stereo,mean offensiveness_score\nXland,hat,3,1\nXland,poor,1,2\n"


@dataclass(frozen=True)
class Case:
    """One kind of import as a researcher sends it: the page (URL name and form fields), the API
    path, a good upload and one whose content is refused (its type is right)."""

    kind: str
    page: str
    good: Callable[[Study], dict[str, Any]]
    bad: Callable[[Study], dict[str, Any]]
    api: str | None = None
    refusal: str = "Nothing was imported."


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


CASES = [
    Case(
        "labelstudio",
        "study-import-labelstudio",
        lambda study: {"file": _file("project.zip", _ls_zip())},
        lambda study: {"file": _file("export.json", b'[{"id": 1, "data": {}, "annotations": "no"}]')},
        api="/api/studies/{pk}/labelstudio/import/",
    ),
    Case(
        "coco",
        "study-import-annotations",
        lambda study: {"file": _file("instances.json", _coco(study)), "format": "coco", "question": "boxes"},
        lambda study: {
            "file": _file("instances.json", b'{"images": []}'),
            "format": "coco",
            "question": "boxes",
        },
        api="/api/studies/{pk}/annotations/import/",
    ),
    Case(
        "annotations",
        "study-import-annotations",
        lambda study: {
            "file": _file(
                "answers.jsonl",
                b'{"item": "101", "annotator": "ann-1", "question": "gender", "value": "female"}\n'
                b'{"item": "102", "annotator": "ann-1", "question": "gender", "value": "male"}\n',
            ),
            "format": "jsonl",
        },
        lambda study: {
            "file": _file(
                "answers.jsonl",
                b'{"item": "101", "annotator": "ann-1", "question": "gender", "value": "female"}\n'
                b'{"item": "nope", "annotator": "ann-1", "question": "gender", "value": "male"}\n',
            ),
            "format": "jsonl",
        },
        api="/api/studies/{pk}/annotations/import/",
    ),
    Case(
        "features",
        "study-features-import",
        lambda study: {
            "file": _file(
                "f.jsonl",
                b'{"item": "101", "labeller": "clip", "embedding": [1, 0, 0]}\n'
                b'{"item": "102", "labeller": "clip", "embedding": [0, 1, 0]}\n'
                b'{"item": "102", "labeller": "blip", "captions": ["a hat"]}\n',
            )
        },
        lambda study: {"file": _file("f.jsonl", b'{"item": "zz", "labeller": "c", "captions": ["a"]}\n')},
        api="/api/studies/{pk}/features/import/",
    ),
    Case(
        "stereotypes",
        "study-stereotypes-import",
        lambda study: {
            "file": _file("seegull.csv", SEEGULL),
            "visual_attributes": _file("r.xlsx", _ratings()),
        },
        lambda study: {"file": _file("seegull.csv", b"identity,attribute\nXland,hat\nXland,hat\n")},
        refusal="Nothing was replaced.",
    ),
    Case(
        "controls",
        "study-controls-upload",
        lambda study: {"file": _file("gold.csv", b"external_id,gender\n101,female\n102,male\n")},
        lambda study: {"file": _file("gold.csv", b"external_id,gender\n101,robot\n")},
        api="/api/studies/{pk}/controls/import/",
        refusal="Nothing was marked.",
    ),
]
IDS = [case.kind for case in CASES]


def same_in_any_study(data: Any) -> Any:
    """``data`` without what differs between two studies: the stand-in names of Label Studio's
    people are made per study (``foreign_answers.stand_in_name``)."""
    return json.loads(re.sub(r"imported-person-[0-9a-f]+", "imported-person", json.dumps(data)))


def state(study: Study) -> dict[str, Any]:
    """What any of these imports writes, without ids: comparable between two studies."""
    return {
        "answers": sorted(
            (
                a.item.external_id,
                same_in_any_study(a.annotator.name),
                a.annotator.kind,
                a.question_key,
                json.dumps(a.value),
            )
            for a in Annotation.objects.filter(study=study).select_related("item", "annotator")
        ),
        "items": sorted(
            (i.external_id, i.control_kind, json.dumps(i.control_answers), i.images.count())
            for i in Item.objects.filter(study=study)
        ),
        "features": sorted(
            (f.item.external_id, f.kind, bytes(f.vector or b"").hex(), json.dumps(f.data))
            for f in ItemFeature.objects.filter(item__study=study).select_related("item")
        ),
        "stereotypes": sorted(
            (e.identity, e.attribute, e.na_stereo, e.visual)
            for e in StereotypeEntry.objects.filter(study=study)
        ),
    }


def _page(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_an_upload_over_the_inline_limit_is_a_job_with_the_inline_result(
    case: Case, owner, file_store: FileStore, settings, django_capture_on_commit_callbacks
) -> None:
    inline, queued = ls_study("inline"), ls_study("queued")
    client = _page(owner)
    answer = client.post(reverse(case.page, args=[inline.pk]), case.good(inline))
    said = _messages(answer)
    assert len(said) == 1 and not said[0].startswith("Nothing"), said
    assert not ImportJob.objects.exists()

    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(reverse(case.page, args=[queued.pk]), case.good(queued))
    assert answer.status_code == 302 and answer["Location"] == reverse("study-items", args=[queued.pk])
    assert "is queued" in _messages(answer)[-1]
    job = ImportJob.objects.get()
    assert (job.kind, job.status, job.error, job.requested_by) == (case.kind, "done", "", owner)
    assert state(queued) == state(inline) and state(inline) != state(ls_study("untouched"))
    page = client.get(reverse("study-items", args=[queued.pk])).content.decode()
    status = client.get(reverse("study-import-job", args=[queued.pk, job.pk])).json()
    assert status["summary"] == said[0] and status["kind"] == case.kind
    assert said[0].replace("'", "&#x27;") in page
    assert file_store.names("uploads/") == []  # the kept upload (and its other file) went with the job


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_refused_job_shows_the_requests_refusal_as_its_error_and_writes_nothing(
    case: Case, owner, file_store: FileStore, settings, django_capture_on_commit_callbacks
) -> None:
    study = ls_study("refused")
    client = _page(owner)
    before, stored = row_counts(), file_store.names()
    said = _messages(client.post(reverse(case.page, args=[study.pk]), case.bad(study)))
    assert len(said) == 1 and said[0].startswith(case.refusal), said
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    with django_capture_on_commit_callbacks(execute=True):
        queued = client.post(reverse(case.page, args=[study.pk]), case.bad(study))
    assert "is queued" in _messages(queued)[-1]
    job = ImportJob.objects.get()
    assert job.status == "failed" and f"{case.refusal} {job.error}" == said[0]
    status = client.get(reverse("study-import-job", args=[study.pk, job.pk])).json()
    assert status["error"] == job.error and status["summary"] == ""
    counts = row_counts()
    assert counts == before and state(study)["stereotypes"] == [] and file_store.names() == stored


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_cancelled_job_imports_nothing_and_deletes_its_upload(
    case: Case, owner, file_store: FileStore, settings
) -> None:
    study = ls_study("cancelled")
    empty = state(study)
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    client = _page(owner)
    client.post(reverse(case.page, args=[study.pk]), case.good(study))  # its task is sent on commit: not yet
    job = ImportJob.objects.get()
    kept = file_store.names("uploads/")
    assert job.status == "pending" and len(kept) == (2 if case.kind == "stereotypes" else 1)
    stopped = client.post(
        reverse("study-import-job-cancel", args=[study.pk, job.pk]), HTTP_ACCEPT="application/json"
    )
    assert stopped.json()["status"] == "cancelled"
    assert import_job_run(job_id=job.pk).status == "cancelled"  # the task delivered late does nothing
    assert state(study) == empty and file_store.names("uploads/") == []


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_running_job_asked_to_stop_ends_cancelled_with_nothing_written(case: Case, owner, settings) -> None:
    study = ls_study("stopped")
    empty, files = state(study), row_counts(Path(settings.MEDIA_ROOT))["files"]
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    _page(owner).post(reverse(case.page, args=[study.pk]), case.good(study))
    job = ImportJob.objects.get()
    ImportJob.objects.filter(pk=job.pk).update(status="running")
    api = client_for(owner)
    assert api.post(f"/api/imports/{job.pk}/cancel/").json()["status"] == "running"  # asked, not yet stopped
    ImportJob.objects.filter(pk=job.pk).update(status="pending")  # its task is delivered now
    assert import_job_run(job_id=job.pk).status == "cancelled"
    assert state(study) == empty and row_counts(Path(settings.MEDIA_ROOT))["files"] == files


@pytest.mark.parametrize("case", [c for c in CASES if c.api], ids=[c.kind for c in CASES if c.api])
def test_the_api_answers_202_and_the_job_gives_the_201_report(
    case: Case, owner, other_researcher, s3_bucket: S3Bucket, settings, django_capture_on_commit_callbacks
) -> None:
    inline, queued = ls_study("api-inline"), ls_study("api-queued")
    api = client_for(owner)
    assert case.api is not None
    now = api.post(case.api.format(pk=inline.pk), case.good(inline), format="multipart")
    assert now.status_code == 201, now.content
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    with django_capture_on_commit_callbacks(execute=True):
        later = api.post(case.api.format(pk=queued.pk), case.good(queued), format="multipart")
    assert later.status_code == 202 and later.json()["kind"] == case.kind, later.content
    job = api.get(f"/api/imports/{later.json()['id']}/").json()
    assert job["status"] == "done" and job["summary"]
    study_keys = {"study", "study_id", "study_name", "item_ids"}
    assert same_in_any_study({k: v for k, v in job["report"].items() if k not in study_keys}) == (
        same_in_any_study({k: v for k, v in now.json().items() if k not in study_keys})
    )
    assert state(queued) == state(inline)
    assert client_for(other_researcher).get(f"/api/imports/{job['id']}/").status_code == 404


def test_a_refused_upload_type_is_still_a_400_before_anything_is_kept(owner, file_store, settings) -> None:
    study = ls_study("typed")
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    answer = client_for(owner).post(
        f"/api/studies/{study.pk}/features/import/", {"file": _file("f.csv", b"item\n")}, format="multipart"
    )
    assert answer.status_code == 400 and "accepted files are" in answer.json()["detail"]
    assert not ImportJob.objects.exists() and file_store.names("uploads/") == []


def test_the_stereotype_and_label_studio_commands_read_a_bucket(
    owner, s3_bucket: S3Bucket, capsys, settings
) -> None:
    settings.WORKBENCH_S3_IMPORT_BUCKETS = [f"{s3_bucket.name}/tables/", f"{s3_bucket.name}/media/"]
    client = s3_bucket.client()
    client.put_object(Bucket=s3_bucket.name, Key="tables/seegull.csv", Body=SEEGULL)
    client.put_object(Bucket=s3_bucket.name, Key="tables/ratings.xlsx", Body=_ratings())
    for file in MEDIA.rglob("*.png"):
        client.put_object(
            Bucket=s3_bucket.name, Key=f"media/{file.relative_to(MEDIA).as_posix()}", Body=file.read_bytes()
        )
    study = ls_study("from-bucket")
    call_command(
        "import_seegull",
        str(study.pk),
        f"s3://{s3_bucket.name}/tables/seegull.csv",
        "--visual-attributes",
        f"s3://{s3_bucket.name}/tables/ratings.xlsx",
    )
    assert state(study)["stereotypes"] == [("Xland", "hat", 3, True), ("Xland", "poor", 1, False)]
    capsys.readouterr()
    call_command(
        "import_labelstudio",
        str(LABELSTUDIO_FIXTURES / "project_export.json"),
        "--create",
        "media from a bucket",
        "--config",
        str(CONFIG),
        "--media-root",
        f"s3://{s3_bucket.name}/media/",
        "--owner",
        "owner",
    )
    created = Study.objects.get(pk=json.loads(capsys.readouterr().out)["study"])
    assert created.items.filter(is_reference=False).count() == 2  # the two images came from the bucket


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_cancel_that_comes_while_the_import_runs_rolls_it_all_back(
    case: Case, owner, file_store: FileStore
) -> None:
    """The job's last check, inside the import's transaction, finds the cancel: no row is written and
    the files the run stored (a Label Studio zip's images) are deleted again."""
    study = ls_study("late-cancel")
    empty, stored = state(study), file_store.names()
    form = case.good(study)
    options = {name: form.get(name, "") for name in ("question", "annotator", "kind")}
    main = upload_keep(form["file"], suffixes=KINDS[case.kind].suffixes)
    files = {}
    if "visual_attributes" in form:
        files["ratings"] = upload_keep(form["visual_attributes"], suffixes=(".xlsx",), stem="ratings")

    def cancelled() -> None:
        raise JobStopped("cancelled")

    run = ImportRun(study=study, address=main, files=files, options=options, before_commit=cancelled)
    with pytest.raises(JobStopped):
        KINDS[case.kind].run(run)
    for kept in (main, *files.values()):
        stored_delete(kept.name)
    assert state(study) == empty and file_store.names() == stored
