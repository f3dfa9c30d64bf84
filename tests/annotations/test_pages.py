"""Researcher pages through Django's test client: create, import, export, share; escaping; access."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.test import Client

from annotations.models import Item, Study
from annotations.services.studies import enrollment_add
from tests.annotations.imagefiles import png_bytes
from tests.factories import EXAMPLE_PROTOCOL, ItemFactory
from tests.s3_server import FileStore, fetch_download, served_disposition

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_login_page_and_home_require_sign_in(owner) -> None:
    assert Client().get("/").status_code == 302
    page = Client().get("/accounts/login/")
    assert page.status_code == 200 and b"no self-registration" in page.content
    response = Client().post("/accounts/login/", {"username": "owner", "password": "correct horse battery"})
    assert response.status_code == 302


def test_create_a_study_from_a_preset_and_from_a_file(owner) -> None:
    client = login(owner)
    response = client.post(
        "/studies/new/", {"name": "Axes", "preset": "bias-axes", "overlap": 3, "lease_minutes": 30}
    )
    study = Study.objects.get(name="Axes")
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/"
    upload = io.BytesIO(EXAMPLE_PROTOCOL.encode())
    upload.name = "mine.yaml"
    client.post("/studies/new/", {"name": "Mine", "protocol_file": upload, "overlap": 2, "lease_minutes": 10})
    assert Study.objects.get(name="Mine").overlap == 2


def test_a_bad_protocol_file_shows_the_line_and_field(owner) -> None:
    upload = io.BytesIO(b"name: x\nunit: image\nquestions:\n  - key: a\n    kind: singel\n    prompt: p\n")
    upload.name = "bad.yaml"
    page = login(owner).post(
        "/studies/new/", {"name": "Bad", "protocol_file": upload, "overlap": 3, "lease_minutes": 30}
    )
    assert page.status_code == 200
    assert "bad.yaml, line 5, questions[0].kind" in page.content.decode()
    assert not Study.objects.filter(name="Bad").exists()


def test_import_items_on_the_page_and_see_them(owner, study, default_store: FileStore) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a.png", png_bytes())
    buffer.name = "a.zip"
    buffer.seek(0)
    client = login(owner)
    response = client.post(f"/studies/{study.pk}/import/items/", {"file": buffer}, follow=True)
    assert "Imported 1 items" in response.content.decode()
    item = Item.objects.get(study=study)
    items_page = client.get(f"/studies/{study.pk}/items/").content.decode()
    assert f"/items/{item.pk}/images/0/" in items_page
    image = client.get(f"/items/{item.pk}/images/0/")
    assert fetch_download(image, default_store) == png_bytes()
    assert "inline" in served_disposition(image)
    if default_store.kind == "filesystem":  # on S3 the bucket answers the presigned URL
        assert image["Content-Type"] == "image/png" and "sandbox" in image["Content-Security-Policy"]


def test_an_empty_upload_is_refused_with_a_message(owner, study) -> None:
    empty = io.BytesIO(b"")
    empty.name = "a.zip"
    page = login(owner).post(f"/studies/{study.pk}/import/items/", {"file": empty}, follow=True)
    assert "Nothing was imported. The submitted file is empty." in page.content.decode()


def test_a_refused_import_says_why_on_the_page(owner, study) -> None:
    bad = io.BytesIO(b'{"item": "nope", "annotator": "r", "question": "gender", "value": "male"}\n')
    bad.name = "a.jsonl"
    page = login(owner).post(f"/studies/{study.pk}/import/annotations/", {"file": bad}, follow=True)
    assert "Nothing was imported. line 1: item &#x27;nope&#x27; is not in this study" in page.content.decode()


def test_prompts_and_names_are_escaped(owner, study) -> None:
    study.name = "<script>alert(1)</script>"
    study.save()
    ItemFactory.create(study=study, prompt="<img src=x onerror=alert(1)>")
    client = login(owner)
    for url in ("/", f"/studies/{study.pk}/", f"/studies/{study.pk}/items/"):
        html = client.get(url).content.decode()
        assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in client.get(f"/studies/{study.pk}/").content.decode()


def test_pages_are_scoped_to_the_user(owner, other_researcher, annotator_user, study) -> None:
    item = ItemFactory.create(study=study, is_reference=False)
    enrollment_add(study=study, user=annotator_user)
    assert login(other_researcher).get(f"/studies/{study.pk}/").status_code == 404
    assert login(annotator_user).get(f"/studies/{study.pk}/").status_code == 403
    assert login(other_researcher).get(f"/items/{item.pk}/images/0/").status_code == 404
    home = login(annotator_user).get("/", follow=True).content.decode()  # their dashboard
    assert study.name in home
    assert login(annotator_user).get("/studies/new/").status_code == 403


def test_export_download_from_the_page(owner, study) -> None:
    ItemFactory.create(study=study, external_id="i1")
    response = login(owner).get(f"/studies/{study.pk}/export/jsonl/")
    assert response.status_code == 200 and b'"type": "study"' in response.getvalue()
    assert login(owner).get(f"/studies/{study.pk}/export/xml/").status_code == 404


def test_healthz() -> None:
    response = Client().get("/healthz/")
    assert response.json()["status"] == "ok"
