"""Issue 24, M3 and L4: what an import names (people by email, machines by name) stays in the
importing researcher's studies.

M3: a Label Studio export's ``completed_by`` email was matched to any account of the instance, so a
researcher learnt which emails have accounts and filed answers under another study's expert. L4:
machine names of one researcher's imports were global: they showed in everyone's
``/api/annotators/`` and their embedding dimension blocked another researcher's import."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from annotations.interchange.foreign_answers import stand_in_name
from annotations.models import Annotation, Annotator, Enrollment, Study, User
from tests.annotations.builders import LABELSTUDIO_FIXTURES
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

SNAPSHOT = LABELSTUDIO_FIXTURES / "snapshot_export.json"  # completed_by ada@example.org, bo@example.org


def _ls_study(name: str) -> Study:
    """A study of the owner made from the Label Studio project export (bare user ids, no emails)."""
    out = io.StringIO()
    call_command(
        "import_labelstudio",
        str(LABELSTUDIO_FIXTURES / "project_export.json"),
        "--create",
        name,
        "--config",
        str(LABELSTUDIO_FIXTURES / "config.xml"),
        "--media-root",
        str(LABELSTUDIO_FIXTURES / "media"),
        "--owner",
        "owner",
        stdout=out,
    )
    return Study.objects.get(pk=json.loads(out.getvalue())["study"])


def _import_snapshot(owner: User, study: Study) -> dict[str, Any]:
    response = client_for(owner).post(
        f"/api/studies/{study.pk}/labelstudio/import/",
        {"file": SimpleUploadedFile("export.json", SNAPSHOT.read_bytes())},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def _without_names(report: dict[str, Any]) -> dict[str, Any]:
    answers = dict(report["answers"])
    answers["annotators_created"] = len(answers["annotators_created"])
    return {**report, "answers": answers, "study": None, "study_name": None}


def test_a_foreign_expert_email_gets_no_answers_and_the_answer_is_the_same(
    owner: User, other_researcher: User
) -> None:
    first = _import_snapshot(owner, _ls_study("first"))
    # Another researcher's expert has the email the export names (as username "ada").
    expert = UserFactory.create(username="ada", email="Ada@Example.org", role="annotator")
    theirs = StudyFactory.create(owner=other_researcher)
    Enrollment.objects.create(study=theirs, user=expert, pool="expert")
    staff = UserFactory.create(username="bo@example.org", role="researcher", is_staff=True)
    study = _ls_study("second")
    second = _import_snapshot(owner, study)
    assert _without_names(second) == _without_names(first)  # no oracle of which emails exist
    assert second["answers"]["accounts_matched"] == 0 and second["answers"]["emails_not_matched"] == 2
    assert not Annotation.objects.filter(annotator__user__in=[expert, staff]).exists()
    ada = Annotator.objects.get(study=study, name=stand_in_name(study, "ada@example.org"))
    assert ada.user is None and Annotation.objects.filter(study=study, annotator=ada).exists()
    listed = client_for(owner).get("/api/annotators/").json()
    names = {row["name"] for row in (listed["results"] if isinstance(listed, dict) else listed)}
    assert "ada" not in names and "bo@example.org" not in names and ada.name in names
    report = json.dumps(second)
    assert "example.org" not in report and '"ada"' not in report  # never a name or an email


def test_an_email_of_the_researchers_own_annotator_is_matched(owner: User) -> None:
    own = UserFactory.create(username="ada", email="ada@example.org", role="annotator")
    Enrollment.objects.create(study=StudyFactory.create(owner=owner), user=own)
    study = _ls_study("mine")
    report = _import_snapshot(owner, study)
    assert report["answers"]["accounts_matched"] == 1 and report["answers"]["emails_not_matched"] == 1
    assert Annotation.objects.filter(study=study, annotator__user=own).exists()


def _upload(client, url: str, name: str, lines: list[dict[str, Any]]):
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return client.post(url, {"file": SimpleUploadedFile(name, data)}, format="multipart")


def test_machine_names_of_one_researchers_import_stay_in_their_study(
    owner: User, other_researcher: User
) -> None:
    mine, theirs = StudyFactory.create(owner=owner), StudyFactory.create(owner=other_researcher)
    for study in (mine, theirs):
        ItemFactory.create(study=study, external_id="i1")
    me, them = client_for(owner), client_for(other_researcher)
    line = {"item": "i1", "annotator": "secret-model", "annotator_kind": "machine", "annotator_version": "v1"}
    response = _upload(
        me,
        f"/api/studies/{mine.pk}/annotations/import/",
        "a.jsonl",
        [line | {"question": "gender", "value": "male"}],
    )
    assert response.status_code == 201, response.content
    feature = {"item": "i1", "labeller": "clip", "version": "1"}
    response = _upload(
        me, f"/api/studies/{mine.pk}/features/import/", "f.jsonl", [feature | {"embedding": [1, 0]}]
    )
    assert response.status_code == 201, response.content
    listed = them.get("/api/annotators/", {"kind": "machine"}).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert {"secret-model", "clip"}.isdisjoint({row["name"] for row in rows})
    # The same labeller name with another dimension, in the other researcher's study: not blocked.
    response = _upload(
        them, f"/api/studies/{theirs.pk}/features/import/", "f.jsonl", [feature | {"embedding": [1, 0, 0]}]
    )
    assert response.status_code == 201, response.content
    response = _upload(
        them,
        f"/api/studies/{theirs.pk}/annotations/import/",
        "a.jsonl",
        [line | {"question": "gender", "value": "female"}],
    )
    assert response.status_code == 201 and response.json()["annotators_created"] == ["secret-model v1"]
    machines = Annotator.objects.filter(kind="machine", name="secret-model")
    assert sorted(machines.values_list("study_id", flat=True)) == sorted([mine.pk, theirs.pk])
    mine_listed = me.get("/api/annotators/", {"kind": "machine"}).json()
    mine_rows = mine_listed["results"] if isinstance(mine_listed, dict) else mine_listed
    assert sorted(row["name"] for row in mine_rows) == ["clip", "secret-model"]
    assert {row["id"] for row in mine_rows} == set(
        Annotator.objects.filter(kind="machine", study=mine).values_list("id", flat=True)
    )
