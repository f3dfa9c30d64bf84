"""The REST API: every endpoint for the allowed and the refused user (owner, other researcher,
annotator, anonymous), main flows end to end, and the OpenAPI schema."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from annotations.models import Annotation, Enrollment, Item, Study
from annotations.services.studies import enrollment_add
from tests.annotations.imagefiles import png_bytes
from tests.factories import EXAMPLE_PROTOCOL, ItemFactory
from tests.helpers import client_for
from tests.s3_server import FileStore, fetch_download

pytestmark = pytest.mark.django_db

ROLES = ["owner", "other", "annotator", "anonymous"]


@pytest.fixture
def clients(owner, other_researcher, annotator_user, study):
    enrollment_add(study=study, user=annotator_user)
    return {
        "owner": client_for(owner),
        "other": client_for(other_researcher),
        "annotator": client_for(annotator_user),
        "anonymous": client_for(None),
    }


def upload(name: str, data: bytes) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def zip_of_images(count: int = 2) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for index in range(count):
            zf.writestr(f"img{index}.png", png_bytes((index * 40, 0, 0)))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("role", "status", "visible"),
    [("owner", 200, True), ("other", 200, False), ("annotator", 200, True), ("anonymous", 401, False)],
)
def test_study_list_is_scoped(clients, study, role, status, visible) -> None:
    response = clients[role].get("/api/studies/")
    assert response.status_code == status
    if status == 200:
        assert (study.pk in [row["id"] for row in response.json()["results"]]) is visible


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 404), ("annotator", 200), ("anonymous", 401)]
)
def test_study_detail(clients, study, role, status) -> None:
    assert clients[role].get(f"/api/studies/{study.pk}/").status_code == status


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_study_update(clients, study, role, status) -> None:
    response = clients[role].patch(f"/api/studies/{study.pk}/", {"overlap": 5}, format="json")
    assert response.status_code == status
    study.refresh_from_db()
    assert study.overlap == (5 if status == 200 else 3)


def test_bad_updates_are_refused_with_the_field(clients, study) -> None:
    response = clients["owner"].patch(f"/api/studies/{study.pk}/", {"overlap": 0}, format="json")
    assert response.status_code == 400 and "overlap" in response.json()
    response = clients["owner"].patch(f"/api/studies/{study.pk}/", {"status": "exploded"}, format="json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 204), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_study_delete(clients, study, role, status) -> None:
    assert clients[role].delete(f"/api/studies/{study.pk}/").status_code == status
    assert Study.objects.filter(pk=study.pk).exists() is (status != 204)


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 201), ("other", 201), ("annotator", 403), ("anonymous", 401)]
)
def test_study_create_from_a_preset(clients, role, status) -> None:
    response = clients[role].post("/api/studies/", {"name": "Audit", "preset": "bias-axes"}, format="json")
    assert response.status_code == status
    if status == 201:
        assert response.json()["preset"] == "bias-axes"
        assert response.json()["protocol"]["questions"][0]["key"] == "person"


def test_study_create_from_protocol_yaml_and_refusals(clients) -> None:
    owner = clients["owner"]
    response = owner.post(
        "/api/studies/", {"name": "Mine", "protocol_yaml": EXAMPLE_PROTOCOL, "overlap": 2}, format="json"
    )
    assert response.status_code == 201 and response.json()["overlap"] == 2
    bad = owner.post(
        "/api/studies/",
        {"name": "Bad", "protocol_yaml": "name: x\nunit: image\nquestions: 3\n"},
        format="json",
    )
    assert bad.status_code == 400 and "line 3, questions" in bad.json()["detail"]
    both = owner.post(
        "/api/studies/",
        {"name": "Both", "preset": "subgroup", "protocol_yaml": EXAMPLE_PROTOCOL},
        format="json",
    )
    assert both.status_code == 400 and "exactly one" in both.json()["detail"]
    unknown = owner.post("/api/studies/", {"name": "U", "preset": "nope"}, format="json")
    assert unknown.status_code == 400 and "unknown preset 'nope'" in unknown.json()["detail"]
    assert Study.objects.filter(name__in=["Bad", "Both", "U"]).count() == 0


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 201), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_item_import_endpoint(clients, study, role, status) -> None:
    response = clients[role].post(
        f"/api/studies/{study.pk}/items/import/",
        {"file": upload("batch.zip", zip_of_images())},
        format="multipart",
    )
    assert response.status_code == status
    assert Item.objects.filter(study=study).count() == (2 if status == 201 else 0)


def test_item_import_refusals_are_400_and_write_nothing(clients, study) -> None:
    owner = clients["owner"]
    wrong = owner.post(
        f"/api/studies/{study.pk}/items/import/", {"file": upload("x.exe", b"MZ")}, format="multipart"
    )
    assert wrong.status_code == 400 and "accepted files are .zip" in wrong.json()["detail"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("ok.png", png_bytes())
        zf.writestr("../../etc/cron.d/evil", b"x")
    evil = owner.post(
        f"/api/studies/{study.pk}/items/import/",
        {"file": upload("e.zip", buffer.getvalue())},
        format="multipart",
    )
    assert evil.status_code == 400 and "outside the target folder" in evil.json()["detail"]
    assert Item.objects.count() == 0


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 201), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_annotation_import_endpoint(clients, study, role, status) -> None:
    ItemFactory.create(study=study, external_id="i1")
    line = json.dumps(
        {"item": "i1", "annotator": "m", "annotator_kind": "machine", "question": "gender", "value": "male"}
    )
    response = clients[role].post(
        f"/api/studies/{study.pk}/annotations/import/",
        {"file": upload("a.jsonl", line.encode())},
        format="multipart",
    )
    assert response.status_code == status
    assert Annotation.objects.count() == (1 if status == 201 else 0)


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_export_endpoint(clients, study, role, status) -> None:
    ItemFactory.create(study=study, external_id="i1")
    response = clients[role].get(f"/api/studies/{study.pk}/export/jsonl/")
    assert response.status_code == status
    if status == 200:
        records = [json.loads(line) for line in response.getvalue().decode().splitlines()]
        assert [r["type"] for r in records] == ["study", "item"]


def test_large_exports_become_background_jobs(
    clients,
    study,
    owner,
    settings,
    django_capture_on_commit_callbacks,
    default_store: FileStore,
) -> None:
    settings.WORKBENCH_EXPORT_INLINE_LIMIT = 0
    ItemFactory.create(study=study, external_id="i1")
    with django_capture_on_commit_callbacks(execute=True):
        response = clients["owner"].post(f"/api/studies/{study.pk}/export/csv/")
    assert response.status_code == 202
    job_id = response.json()["id"]
    status = clients["owner"].get(f"/api/exports/{job_id}/").json()
    assert status["status"] == "done" and status["download_url"] == f"/api/exports/{job_id}/download/"
    assert fetch_download(clients["owner"].get(status["download_url"]), default_store).startswith(
        b"item,item_kind,"
    )
    assert clients["other"].get(status["download_url"]).status_code == 404


@pytest.mark.parametrize(
    ("role", "status", "count"),
    [("owner", 200, 1), ("other", 200, 0), ("annotator", 200, 0), ("anonymous", 401, None)],
)
def test_items_are_for_researchers_of_the_study(clients, study, role, status, count) -> None:
    item = ItemFactory.create(study=study, external_id="i1", condition="gender:women")
    ItemFactory.create(study=study, external_id="i2", condition="base")
    response = clients[role].get("/api/items/", {"study": study.pk, "condition": "gender:women"})
    assert response.status_code == status
    if count is not None:
        assert response.json()["count"] == count
    detail = clients[role].get(f"/api/items/{item.pk}/")
    assert detail.status_code == (200 if role == "owner" else 404 if role != "anonymous" else 401)


def test_annotators_see_only_their_own_annotations(clients, study, annotator_user) -> None:
    item = ItemFactory.create(study=study, external_id="i1")
    from annotations.services.studies import annotator_for_user
    from tests.factories import MachineAnnotatorFactory

    mine = Annotation.objects.create(
        study=study,
        item=item,
        annotator=annotator_for_user(user=annotator_user),
        question_key="gender",
        value="male",
    )
    Annotation.objects.create(
        study=study,
        item=item,
        annotator=MachineAnnotatorFactory.create(),
        question_key="gender",
        value="female",
    )
    seen = clients["annotator"].get("/api/annotations/").json()["results"]
    assert [row["id"] for row in seen] == [mine.pk]
    assert clients["owner"].get("/api/annotations/", {"study": study.pk}).json()["count"] == 2
    assert clients["other"].get("/api/annotations/").json()["count"] == 0
    assert clients["owner"].get("/api/annotations/", {"annotator_kind": "machine"}).json()["count"] == 1


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 403), ("annotator", 403), ("anonymous", 401)]
)
def test_sharing_is_for_the_owner(clients, study, other_researcher, role, status) -> None:
    target = {"username": "other"} if role != "other" else {"username": "owner"}
    response = clients[role].post(f"/api/studies/{study.pk}/share/", target, format="json")
    assert response.status_code == (404 if role == "other" else status)
    if status == 200:
        assert clients["other"].get(f"/api/studies/{study.pk}/").status_code == 200


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 201), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_enrolment(clients, study, role, status) -> None:
    from tests.factories import StudyFactory, UserFactory

    newbie = UserFactory.create(username="newbie", role="annotator")
    # An annotator of another study of the owner's: one the owner may enrol (docs/security.md).
    enrollment_add(study=StudyFactory.create(owner=study.owner), user=newbie)
    response = clients[role].post(
        f"/api/studies/{study.pk}/enrollments/", {"username": "newbie", "pool": "expert"}, format="json"
    )
    assert response.status_code == status
    assert Enrollment.objects.filter(study=study, user__username="newbie").exists() is (status == 201)
    if status == 201:
        assert response.json()["pool"] == "expert"


def test_presets_protocol_validation_and_me(clients) -> None:
    owner = clients["owner"]
    keys = [row["key"] for row in owner.get("/api/presets/").json()]
    assert "ssi-rubric" in keys and len(keys) == 7
    assert owner.get("/api/presets/visualness/").json()["unit"] == "text"
    assert owner.get("/api/presets/nope/").status_code == 404
    ok = owner.post("/api/protocols/validate/", {"protocol_yaml": EXAMPLE_PROTOCOL}, format="json")
    assert ok.status_code == 200 and ok.json()["valid"]
    bad = owner.post(
        "/api/protocols/validate/",
        {"protocol_yaml": "name: x\nunit: image\nquestions:\n  - key: A\n"},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["line"] == 4
    assert owner.get("/api/me/").json()["role"] == "researcher"
    assert clients["anonymous"].get("/api/presets/").status_code == 401


def test_token_authentication(owner) -> None:
    client = APIClient()
    response = client.post("/api/auth/token/", {"username": "owner", "password": "correct horse battery"})
    token = response.json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/me/").json()["username"] == "owner"
    assert APIClient().post("/api/auth/token/", {"username": "owner", "password": "wrong"}).status_code == 400


def test_the_openapi_schema_validates(tmp_path) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/studies/{id}/" in out.read_text()
