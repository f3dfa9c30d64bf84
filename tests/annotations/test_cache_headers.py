"""What browsers and proxies may keep: an item image privately for ten minutes (the next item's
prefetch), never a year on a shared computer; an API answer (task data, presigned ``direct_url``s)
not at all (docs/security.md)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from annotations.services.studies import enrollment_add
from tests.annotations.builders import image_item
from tests.helpers import client_for
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db

TEN_MINUTES = "private, max-age=600"


def _max_age(value: str) -> int:
    parts = dict(part.strip().partition("=")[::2] for part in value.split(","))
    return int(parts["max-age"])


def test_an_item_image_is_cached_privately_for_minutes_not_a_year(
    file_store: FileStore, study, owner
) -> None:
    item = image_item(study, "a", size=(64, 32))
    client = Client()
    client.force_login(owner)
    for path in (f"/items/{item.pk}/images/0/", f"/items/{item.pk}/images/0/display/"):
        response = client.get(path)
        if file_store.kind == "filesystem":
            assert response.status_code == 200 and response["Cache-Control"] == TEN_MINUTES, path
            continue
        # On S3: the redirect is private and short, and the bucket answers the image with the same
        # ten minutes (the presigned URL's response-cache-control).
        assert response.status_code == 302
        assert (
            response["Cache-Control"].startswith("private, ") and _max_age(response["Cache-Control"]) <= 600
        )
        query = parse_qs(urlsplit(response["Location"]).query)
        assert query["response-cache-control"] == [TEN_MINUTES], path
        assert "immutable" not in response["Location"]


def test_api_answers_are_not_stored_and_the_tasks_direct_url_asks_for_ten_minutes(
    file_store: FileStore, study, annotator_user
) -> None:
    item = image_item(study, "a", size=(64, 32))
    enrollment_add(study=study, user=annotator_user)
    api = client_for(annotator_user)
    claimed = api.post(f"/api/studies/{study.pk}/assignments/next/")
    assert claimed.status_code == 200 and claimed["Cache-Control"] == "private, no-store"
    again = api.get(f"/api/assignments/{claimed.json()['id']}/")
    assert again.status_code == 200 and again["Cache-Control"] == "private, no-store"
    direct = claimed.json()["task"]["item"]["images"][0]["direct_url"]
    if file_store.kind == "s3":
        assert parse_qs(urlsplit(direct).query)["response-cache-control"] == [TEN_MINUTES]
    assert item.pk == claimed.json()["task"]["item"]["id"]


def test_every_api_answer_without_its_own_caching_is_not_stored(owner) -> None:
    assert client_for(owner).get("/api/studies/")["Cache-Control"] == "private, no-store"
    refused = client_for(None).get("/api/studies/")
    assert refused.status_code == 401 and refused["Cache-Control"] == "private, no-store"
    missing = client_for(owner).get("/api/studies/999999/")
    assert missing.status_code == 404 and missing["Cache-Control"] == "private, no-store"
    page = Client()
    page.force_login(owner)
    assert "no-store" not in page.get("/").get("Cache-Control", "")  # pages keep their own rules
