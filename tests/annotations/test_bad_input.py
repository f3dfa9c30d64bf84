"""Junk input never reaches a 500: every URL the project serves, as the study's owner (an admin, so
that nothing stops at a permission check), with nonsense query and form values, ids too large for the
database, ids that are not numbers, hostile JSON bodies and null characters; then each attack of
issue 15 through the path a user takes (the submit API, the task page, item and annotation imports,
comparisons).

The null-character cases matter on PostgreSQL (text and jsonb refuse ``\\u0000``): run this module
there too (``DATABASE_URL=postgres://...``)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotations.models import Annotation, Annotator, Assignment, Item, Study
from annotations.services.studies import enrollment_add
from tests.annotations.builders import image_item
from tests.annotations.url_walk import walked_urls
from tests.factories import ItemFactory, MachineAnnotatorFactory, StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

JUNK_QUERY = {
    "study": ["x", "-1"],
    "source": "=x",
    "resamples": "abc",
    "fresh": "1",
    "breakdown": "annotator:",
    "condition": "zz",
    "where": "bad",
    "value": "zz",
    "table": "nope",
    "by": "x",
    "page": "x",
}
JUNK_FORM = {
    "rule": "bogus",
    "k": "x",
    "value": "",
    "question": "nope",
    "reason": "",
    "kind": "x",
    "control_rate": "abc",
    "max_uses": "-1",
    "valid_days": "x",
    "platform": "x",
    "pool": "x",
    "demographics": "- {",
    "consent": "x",
    "action": "x",
}
HUGE_ID = "9" * 25  # more than 2**63: no database column holds it
DEEP = "[" * 100_000 + "]" * 100_000
BOX_1E400 = '{"option": "hat", "x": 1e400, "y": 2, "w": 3, "h": 4}'


def _owner_with_study() -> tuple[Client, Study, Item]:
    owner = UserFactory.create(username="boss", role="researcher", is_staff=True, is_superuser=True)
    study = StudyFactory.create(owner=owner)
    item = ItemFactory.create(study=study)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    return client, study, item


def _server_errors(client: Client, paths: list[tuple[str, str | None]], query: dict, form: dict) -> list[str]:
    failures = []
    for path, name in paths:
        for method, data in (("get", query), ("post", form)):
            status = getattr(client, method)(path, data).status_code
            if status >= 500:
                failures.append(f"{method.upper()} {path} ({name}): {status}")
    return failures


def test_no_url_answers_junk_with_a_server_error(_media_root) -> None:
    client, study, item = _owner_with_study()
    paths = walked_urls(lambda name: str(item.pk if "item" in name else study.pk))
    assert len(paths) > 100
    assert _server_errors(client, paths, JUNK_QUERY, JUNK_FORM) == []


def test_no_url_answers_an_id_too_large_for_the_database_with_a_server_error(_media_root) -> None:
    client, study, _item = _owner_with_study()
    huge = walked_urls(lambda name: HUGE_ID)
    mixed = walked_urls(lambda name: str(study.pk) if name == "pk" else HUGE_ID)
    query = {**JUNK_QUERY, "study": [str(study.pk), HUGE_ID], "item": HUGE_ID, "annotator": HUGE_ID}
    form = {**JUNK_FORM, "item": HUGE_ID, "annotator": HUGE_ID, "reveal": HUGE_ID, "study": HUGE_ID}
    assert _server_errors(client, huge + mixed, query, form) == []


def test_no_url_answers_an_id_that_is_not_a_number_with_a_server_error(_media_root) -> None:
    client, _study, _item = _owner_with_study()
    paths = walked_urls(lambda name: "abc") + walked_urls(lambda name: "1x")
    assert _server_errors(client, paths, {}, {}) == []
    for path in ("/api/studies/abc/", "/api/studies/1x/", f"/api/studies/{HUGE_ID}/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert client.patch(path, "{}", content_type="application/json").status_code == 404


def test_no_url_answers_null_characters_with_a_server_error(_media_root) -> None:
    client, study, item = _owner_with_study()
    paths = walked_urls(
        lambda name: str(item.pk if "item" in name else study.pk),
        others={"token": "a%00b", "fmt": "csv%00", "format": "json"},
    )
    query = {key: "a\x00b" for key in JUNK_QUERY} | {"study": [str(study.pk), "1\x00"]}
    form = {key: "a\x00b" for key in JUNK_FORM} | {"name": "a\x00b", "username": "\x00"}
    assert _server_errors(client, paths, query, form) == []
    refused = client.get(f"/studies/{study.pk}/findings/", {"source": "a\x00b"})
    assert refused.status_code == 400 and "source" in refused.content.decode()
    anonymous = Client(raise_request_exception=False)
    assert anonymous.get("/join/a%00b/").status_code == 400


def hostile_bodies(study: Study, machine: Annotator) -> dict[str, str]:
    """JSON bodies every API URL gets: each must be answered with a 4xx (or a success that stored only
    valid values), never a 500."""
    numbers = {
        "study": study.pk,
        "name": "big numbers",
        "design": "soda",
        "limit": 1,
        "model": {"source": "org/some-model", "steps": 2, "width": 64, "height": 64},
        "base_seed": 10**30,
        "annotator": machine.pk,
        "sample_size": 10**30,
        "seed": 10**30,
        "k": 10**30,
        "item": 10**30,
        "max_uses": 10**30,
        "items_per_participant": 10**30,
        "min_answered_items": 10**30,
        "time_spent_ms": 2**70,
        "overlap": 10**30,
        "lease_minutes": 10**30,
    }
    return {
        "deeply nested": DEEP,
        "nested object": '{"a":' * 50_000 + "1" + "}" * 50_000,
        "NaN": '{"name": NaN, "answers": {"gender": {"value": NaN}}, "protocol": {"name": NaN}}',
        "Infinity": '{"name": "x", "settings": Infinity, "model": {"source": "x", "guidance": -Infinity}}',
        "1e400": '{"name": "x", "base_seed": 1e400, "answers": {"boxes": {"value": [{"x": 1e400}]}}}',
        "null character": '{"name": "a\\u0000b", "reason": "\\u0000", "username": "\\u0000",'
        ' "answers": {"colour": {"value": "red\\u0000"}}, "protocol_yaml": "name: \\u0000"}',
        "lone surrogate": '{"name": "\\ud800", "reason": "\\udfff"}',
        "huge numbers": json.dumps(numbers),
        # issue 24: int() of 4,301+ digits raises ValueError ("Exceeds the limit") inside the parser
        "4,301-digit integer": '{"name": "x", "base_seed": ' + "9" * 4301 + ', "overlap": 1}',
    }


def test_no_api_url_answers_a_hostile_json_body_with_a_server_error(_media_root) -> None:
    client, study, item = _owner_with_study()
    machine = MachineAnnotatorFactory.create()
    bodies = hostile_bodies(study, machine)
    failures, tried = [], 0
    for path, name in walked_urls(lambda name: str(item.pk if "item" in name else study.pk)):
        if not path.startswith("/api/"):
            continue
        for label, body in bodies.items():
            for method in ("post", "patch"):
                tried += 1
                status = getattr(client, method)(path, body, content_type="application/json").status_code
                if status >= 500:
                    failures.append(f"{method.upper()} {path} ({name}) with {label}: {status}")
    assert tried > 500
    assert failures == []


def test_a_consensus_k_that_is_not_a_number_is_refused_with_a_message(study, owner) -> None:
    client = Client()
    client.force_login(owner)
    response = client.post(f"/studies/{study.pk}/consensus/", {"rule": "at-least-k", "k": "two"}, follow=True)
    assert response.status_code == 200
    assert "Consensus not computed: &#x27;two&#x27; is not a whole number" in response.content.decode()


# --- Each attack through the path a user takes --------------------------------------------------


@pytest.fixture
def leased(study, annotator_user):
    """An annotator holding a lease on an image item of 2000x1000 pixels."""
    study.overlap = 1
    study.save()
    image_item(study, "a")
    enrollment_add(study=study, user=annotator_user)
    api = client_for(annotator_user)
    pk = api.post(f"/api/studies/{study.pk}/assignments/next/").json()["id"]
    return api, pk


def _submit(api, pk: int, body: str):
    return api.post(f"/api/assignments/{pk}/submit/", body, content_type="application/json")


def test_the_submit_api_refuses_hostile_numbers_nesting_and_characters(leased) -> None:
    api, pk = leased
    answers = '"gender": {"value": "male"}, "attributes": {"value": ["hat"]}'
    overflow = _submit(api, pk, '{"answers": {' + answers + ', "boxes": {"value": [' + BOX_1E400 + "]}}}")
    assert overflow.status_code == 400, overflow.content
    assert "not a finite number" in overflow.json()["detail"]
    nested = _submit(api, pk, '{"answers": ' + DEEP + "}")
    assert nested.status_code == 400 and "nested more than" in nested.json()["detail"]
    nan = _submit(api, pk, '{"answers": {' + answers + ', "smiling": {"value": NaN}}}')
    assert nan.status_code == 400 and "NaN" in nan.json()["detail"]
    null = _submit(api, pk, '{"answers": {' + answers + ', "colour": {"value": "red\\u0000"}}}')
    assert null.status_code == 400 and "answers.colour.value" in null.json()["detail"]
    slow = _submit(api, pk, '{"answers": {' + answers + '}, "time_spent_ms": ' + str(2**70) + "}")
    assert slow.status_code == 400 and "time_spent_ms" in slow.json()
    assert not Annotation.objects.exists()
    assert Assignment.objects.get(pk=pk).status == "leased"


def test_the_task_page_refuses_hostile_boxes_and_null_characters(study, annotator_user) -> None:
    study.overlap = 1
    study.save()
    image_item(study, "a")
    enrollment_add(study=study, user=annotator_user)
    client = Client(raise_request_exception=False)
    client.force_login(annotator_user)
    pk = int(client.get(f"/annotate/studies/{study.pk}/next/")["Location"].rstrip("/").split("/")[-1])
    form = {"q-gender": "female", "q-attributes": ["hat"], "time_spent_ms": "4200"}
    for boxes, message in (
        (f"[{BOX_1E400}]", "not a finite number"),
        (DEEP, "nested more than"),
        ('[{"option": "hat", "x": NaN, "y": 2, "w": 3, "h": 4}]', "NaN"),
    ):
        response = client.post(f"/annotate/assignments/{pk}/", {**form, "q-boxes": boxes})
        assert response.status_code == 400, boxes[:40]
        assert 'id="error-boxes"' in response.content.decode() and message in response.content.decode()
    null = client.post(f"/annotate/assignments/{pk}/", {**form, "q-colour": "red\x00"})
    assert null.status_code == 400 and "q-colour" in null.content.decode()
    assert "null character" in null.content.decode()
    digits = client.post(f"/annotate/assignments/{pk}/", {**form, "time_spent_ms": "²" + "9" * 30})
    assert digits.status_code == 302  # a time that is not plain digits is not recorded, not a 500
    assert Assignment.objects.get(pk=pk).time_spent_ms is None
    assert not Annotation.objects.filter(question_key="colour").exists()


def _import(client: Client, url: str, name: str, content: str | bytes):
    data = content.encode() if isinstance(content, str) else content
    return client.post(url, {"file": SimpleUploadedFile(name, data)}, format="multipart")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("m.jsonl", '{"external_id": "a", "text": "t", "metadata": {"x": NaN}}\n', "NaN"),
        ("m.jsonl", '{"external_id": "a", "text": "t", "settings": {"g": Infinity}}\n', "Infinity"),
        ("m.jsonl", '{"external_id": "a", "text": "t", "score": 1e400}\n', "not a finite number"),
        ("m.jsonl", '{"external_id": "a", "text": "t", "metadata": ' + DEEP + "}\n", "nested more than"),
        ("m.jsonl", '{"external_id": "a", "text": "t\\u0000"}\n', "null character"),
        ("m.csv", "external_id,text,notes\na,t," + "x" * 200_000 + "\n", "longer than"),
        ("m.csv", 'external_id,text,tags\na,t,"[1, NaN]"\n', "NaN"),
        ("m.csv", "external_id,text\na,t\x00\n", "null character"),
    ],
)
def test_item_manifests_with_hostile_values_are_refused_naming_the_line(
    study, owner, name, content, message
) -> None:
    api = client_for(owner)
    response = _import(api, f"/api/studies/{study.pk}/items/import/", name, content)
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert message in detail and ("line 1" in detail or "row 2" in detail), detail
    assert not Item.objects.filter(study=study).exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"item": "a", "annotator": "r", "question": "boxes", "value": [' + BOX_1E400 + "]}", "finite"),
        ('{"item": "a", "annotator": "r", "question": "gender", "value": ' + DEEP + "}", "nested more than"),
        (
            '{"item": "a", "annotator": "r", "question": "gender", "value": "male",'
            ' "annotator_attributes": {"age": NaN}}',
            "NaN",
        ),
        (
            '{"item": "a", "annotator": "r", "question": "gender", "value": "male", "time_spent_ms": '
            + str(2**70)
            + "}",
            "time_spent_ms",
        ),
        ('{"item": "a", "annotator": "r\\u0000", "question": "gender", "value": "male"}', "null character"),
    ],
)
def test_annotation_imports_with_hostile_values_are_refused_naming_the_line(
    study, owner, line, message
) -> None:
    image_item(study, "a")
    api = client_for(owner)
    response = _import(api, f"/api/studies/{study.pk}/annotations/import/", "a.jsonl", line + "\n")
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"] and "line 1" in response.json()["detail"]
    assert not Annotation.objects.exists() and not Annotator.objects.filter(name__startswith="r").exists()


def test_the_item_import_page_refuses_a_hostile_manifest_with_a_message(owner, study) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    upload = SimpleUploadedFile("m.jsonl", b'{"external_id": "a", "metadata": %s}\n' % DEEP.encode())
    response = client.post(f"/studies/{study.pk}/import/items/", {"file": upload}, follow=True)
    assert response.status_code in (200, 400) and "nested more than" in response.content.decode()
    assert not Item.objects.filter(study=study).exists()


def test_every_compare_url_refuses_a_study_id_too_large_for_the_database(study, owner) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    query = f"?study={study.pk}&study={HUGE_ID}"
    for path in ("/compare/", "/compare/csv/", "/compare/figures/ssi_cells.png", "/api/compare/"):
        response = client.get(path + query)
        assert response.status_code in (400, 404), (path, response.status_code)
