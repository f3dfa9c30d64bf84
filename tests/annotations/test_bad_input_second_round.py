"""The junk walk of ``test_bad_input.py`` extended to issue 24's inputs (finding L1): whole numbers of
4,301+ digits (Python's int-string limit) in API bodies, the token endpoint, the task page and every
import; nesting deep enough for ``RecursionError`` in features lines, Label Studio configs and protocol
YAML; a 300-character file name in a drag-and-drop upload; null characters and lone surrogates that
PostgreSQL refuses (feature captions and labellers, Label Studio task data, protocol YAML, labeller
configurations, the admin's account CSV); NaN and 1e400 in Label Studio task data. Each must be a 400
that names the field, line, task or row, with nothing stored.

The null-character cases give a 500 only on PostgreSQL: run this module there too
(``DATABASE_URL=postgres://...``); on SQLite they check the message and that nothing was stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotations.models import Annotation, Annotator, Item, ItemFeature, Study, User
from annotations.services.studies import enrollment_add
from tests.annotations.builders import LABELSTUDIO_FIXTURES, image_item
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

HUGE_INT = "9" * 4301  # int("9" * 4301) raises ValueError: Exceeds the limit (4300 digits)
DEEP = "[" * 100_000 + "]" * 100_000
PROTOCOL = """name: p
unit: image
questions:
  - key: gender
    kind: single
    prompt: Gender?
    options: [male, female]
"""


def _upload(client: Any, url: str, name: str, content: str | bytes, **extra: Any):
    data = content.encode() if isinstance(content, str) else content
    return client.post(url, {"file": SimpleUploadedFile(name, data), **extra}, format="multipart")


# --- Whole numbers of 4,301+ digits ------------------------------------------------------------------


def test_the_token_endpoint_answers_a_huge_integer_with_a_400() -> None:
    anonymous = Client(raise_request_exception=False)
    body = '{"username": ' + HUGE_INT + ', "password": "x"}'
    response = anonymous.post("/api/auth/token/", body, content_type="application/json")
    assert response.status_code == 400, response.status_code
    assert "username is a whole number of 4,301 digits" in response.json()["detail"]


def test_an_api_body_with_a_huge_integer_is_a_400_naming_the_field(owner) -> None:
    api = client_for(owner)
    body = '{"name": "s", "preset": "object-attributes", "overlap": ' + HUGE_INT + "}"
    response = api.post("/api/studies/", body, content_type="application/json")
    assert response.status_code == 400 and "overlap is a whole number" in response.json()["detail"]
    assert not Study.objects.filter(name="s").exists()


def test_the_task_page_refuses_a_huge_integer_in_its_boxes(study, annotator_user) -> None:
    study.overlap = 1
    study.save()
    image_item(study, "a")
    enrollment_add(study=study, user=annotator_user)
    client = Client(raise_request_exception=False)
    client.force_login(annotator_user)
    pk = int(client.get(f"/annotate/studies/{study.pk}/next/")["Location"].rstrip("/").split("/")[-1])
    boxes = '[{"option": "hat", "x": ' + HUGE_INT + ', "y": 2, "w": 3, "h": 4}]'
    form = {"q-gender": "female", "q-attributes": ["hat"], "q-boxes": boxes, "time_spent_ms": "4200"}
    response = client.post(f"/annotate/assignments/{pk}/", form)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="error-boxes"' in html and "0.x is a whole number of 4,301 digits" in html
    assert not Annotation.objects.exists()


@pytest.mark.parametrize(
    ("url", "name", "content", "message"),
    [
        ("items/import/", "m.jsonl", '{"external_id": "a", "metadata": {"n": %s}}\n', "line 1: metadata.n"),
        (
            "annotations/import/",
            "a.jsonl",
            '{"item": "a", "annotator": "r", "question": "gender", "value": "male", "time_spent_ms": %s}\n',
            "line 1: time_spent_ms",
        ),
        (
            "features/import/",
            "f.jsonl",
            '{"item": "a", "labeller": "l", "embedding": [%s]}\n',
            "line 1: embedding.0",
        ),
        (
            "annotations/import/?coco",
            "c.json",
            '{"images": [], "categories": [], "annotations": [], "info": %s}',
            "info is a whole number",
        ),
        (
            "labelstudio/import/",
            "ls.json",
            '[{"id": 7, "data": {"image": "a.png", "n": %s}}]',
            "task 7.data.n",
        ),
    ],
)
def test_every_import_refuses_a_huge_integer_naming_the_line(
    study, owner, url, name, content, message
) -> None:
    image_item(study, "a")
    before = (Item.objects.count(), Annotation.objects.count(), ItemFeature.objects.count())
    extra = {"format": "coco", "question": "boxes"} if url.endswith("?coco") else {}
    path = f"/api/studies/{study.pk}/{url.removesuffix('?coco')}"
    response = _upload(client_for(owner), path, name, content % HUGE_INT, **extra)
    assert response.status_code == 400, response.content[:300]
    detail = response.json()["detail"]
    assert message in detail and "4,301 digits" in detail, detail
    assert (Item.objects.count(), Annotation.objects.count(), ItemFeature.objects.count()) == before


def test_protocol_yaml_with_a_huge_integer_or_deep_nesting_is_a_400_with_the_line(owner) -> None:
    api = client_for(owner)
    for text, message in (
        (PROTOCOL + "version: " + HUGE_INT + "\n", "line 8"),
        (PROTOCOL + "description: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested more than 64"),
    ):
        for url, body in (
            ("/api/protocols/validate/", {"protocol_yaml": text}),
            ("/api/studies/", {"name": "yaml", "protocol_yaml": text}),
        ):
            response = api.post(url, body, format="json")
            assert response.status_code == 400, (url, response.content[:200])
            assert message in json.dumps(response.json()), response.json()
    assert not Study.objects.filter(name="yaml").exists()


# --- Deep nesting --------------------------------------------------------------------------------------


def test_a_features_line_nested_deeply_is_a_400_naming_the_line(study, owner) -> None:
    image_item(study, "a")
    line = '{"item": "a", "labeller": "l", "embedding": ' + DEEP + "}\n"
    response = _upload(client_for(owner), f"/api/studies/{study.pk}/features/import/", "f.jsonl", line)
    assert response.status_code == 400 and "line 1" in response.json()["detail"]
    assert "nested more than" in response.json()["detail"]


def test_a_labelstudio_config_nested_deeply_is_a_400_naming_the_line(owner) -> None:
    config = "<View>\n" + "<View>" * 50_000 + "</View>" * 50_000 + "</View>"
    tasks = (LABELSTUDIO_FIXTURES / "project_export.json").read_bytes()
    response = client_for(owner).post(
        "/api/studies/labelstudio/",
        {
            "name": "deep",
            "file": SimpleUploadedFile("export.json", tasks),
            "config": SimpleUploadedFile("config.xml", config.encode()),
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content[:300]
    assert "line 2: tags are nested more than 64 levels deep" in response.json()["detail"]
    assert not Study.objects.filter(name="deep").exists()


# --- File names ------------------------------------------------------------------------------------------


def test_a_dropped_file_with_a_300_character_name_is_a_400_naming_it(owner, study) -> None:
    from tests.annotations.imagefiles import png_bytes

    client = Client(raise_request_exception=False)
    client.force_login(owner)
    long_name = "p" * 300 + ".png"
    for paths in ([long_name], [f"shoot/{'é' * 130}.png"]):
        files = [SimpleUploadedFile("1.png", png_bytes(), content_type="image/png")]
        answer = client.post(
            f"/studies/{study.pk}/import/items/",
            {"images": files, "paths": paths},
            HTTP_ACCEPT="application/json",
        )
        assert answer.status_code == 400, answer.status_code
        assert "rename it" in answer.json()["error"] and "…" in answer.json()["error"]
    assert not Item.objects.filter(study=study).exists()


# --- What PostgreSQL cannot store (a 500 there before) ------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"item": "a", "labeller": "l", "captions": ["a man\\u0000"]}',
            "line 1: captions.0 contains a null",
        ),
        ('{"item": "a", "labeller": "l\\u0000", "captions": ["a man"]}', "line 1: labeller contains a null"),
        ('{"item": "a", "labeller": "l", "captions": ["\\ud800"]}', "line 1: captions.0 contains a lone"),
    ],
)
def test_feature_captions_and_labellers_postgresql_cannot_store_are_refused(
    study, owner, line, message
) -> None:
    image_item(study, "a")
    response = _upload(client_for(owner), f"/api/studies/{study.pk}/features/import/", "f.jsonl", line + "\n")
    assert response.status_code == 400 and message in response.json()["detail"], response.content[:300]
    assert not ItemFeature.objects.exists() and not Annotator.objects.filter(name__startswith="l").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"a\\u0000b"', "task 101.data.note contains a null character"),
        ('"\\udfff"', "task 101.data.note contains a lone UTF-16 surrogate"),
        ("NaN", "task 101.data.note is NaN: not a number JSON allows"),
        ("1e400", "task 101.data.note is 1e400: not a finite number"),
    ],
)
def test_labelstudio_task_data_is_refused_naming_the_task_and_field(owner, value, message) -> None:
    tasks = (LABELSTUDIO_FIXTURES / "project_export.json").read_text()
    hostile = tasks.replace('"data": {', '"data": {"note": ' + value + ", ", 1)
    assert hostile != tasks and '"id": 101' in tasks
    response = client_for(owner).post(
        "/api/studies/labelstudio/",
        {
            "name": "ls",
            "file": SimpleUploadedFile("export.json", hostile.encode()),
            "config": SimpleUploadedFile("config.xml", (LABELSTUDIO_FIXTURES / "config.xml").read_bytes()),
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content[:300]
    assert message in response.json()["detail"], response.json()
    assert not Study.objects.filter(name="ls").exists()


@pytest.mark.parametrize(("escaped", "problem"), [("\\0", "null character"), ("\\ud800", "lone UTF-16")])
def test_protocol_yaml_postgresql_cannot_store_is_not_valid(owner, escaped, problem) -> None:
    api = client_for(owner)
    text = PROTOCOL.replace("prompt: Gender?", f'prompt: "Gender{escaped}?"')
    validated = api.post("/api/protocols/validate/", {"protocol_yaml": text}, format="json")
    assert validated.status_code == 400 and problem in validated.json()["detail"], validated.content
    assert "protocol.questions.0.prompt" in validated.json()["detail"]
    created = api.post("/api/studies/", {"name": "nul", "protocol_yaml": text}, format="json")
    assert created.status_code == 400 and problem in json.dumps(created.json())
    assert not Study.objects.filter(name="nul").exists()


def test_a_labeller_configuration_postgresql_cannot_store_is_refused_on_the_page(admin_user) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    for config, problem in (
        ('colours: {red: "re\\0d"}', "null character"),
        ("threshold: " + HUGE_INT, "4,301 digits"),
        ("colours: " + "[" * 20_000, "nested more than 64"),
    ):
        response = client.post("/labellers/", {"name": "rule", "kind": "colour", "config": config})
        assert response.status_code == 200 and problem in response.content.decode(), config[:30]
    assert not Annotator.objects.filter(kind="machine").exists()


def test_the_admin_account_csv_refuses_names_postgresql_cannot_store(admin_user) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    text = (
        "username,email,name\nada,ada@example.org,Ada\x00 L\n"
        "bea,bea@example.org,Bea\ncy\x00,cy@example.org,Cy\n"
    )
    response = client.post(
        "/admin/annotations/user/import-csv/", {"file": SimpleUploadedFile("people.csv", text.encode())}
    )
    assert response.status_code == 200, response.status_code
    html = response.content.decode()
    assert "the name contains a null character" in html and "1 created, 2 refused" in html
    assert "the username contains a null character" in html
    assert list(User.objects.exclude(pk=admin_user.pk).values_list("username", flat=True)) == ["bea"]


def test_an_invitation_demographic_form_with_hostile_yaml_is_a_400(owner, study) -> None:
    """The invitation form's YAML (like a protocol's): nesting, huge integers and null characters."""
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    data = {"platform": "none", "pool": "crowd", "valid_days": 7, "max_uses": 10}
    for form, message in (
        ("- " + "[" * 5_000, "nested more than 64"),
        ("- {key: age, label: Age, kind: number, required: " + HUGE_INT[:5000] + "}", "4,301 digits"),
        ('- {key: age, label: "A\\0ge", kind: number}', "0.label contains a null character"),
    ):
        response = client.post(f"/studies/{study.pk}/invitations/", {**data, "demographics": form})
        assert response.status_code == 400, (form[:30], response.status_code)
        assert message in response.content.decode(), form[:30]
    assert not study.invitations.exists()
