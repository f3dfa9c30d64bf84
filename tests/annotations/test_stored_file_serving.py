"""Serving stored files (item images, display versions, export downloads) on the filesystem and on
a real S3 server: after the access check, S3 answers with a redirect to a presigned URL that works
and says when it expires; anyone else is refused by the app before any URL is made."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from PIL import Image

from annotations.interchange.exports import export_job_create
from annotations.models import ExportJob, ItemImage
from annotations.services.stored_files import item_storage
from annotations.services.studies import enrollment_add
from tests.annotations.builders import image_item
from tests.annotations.imagefiles import png_bytes
from tests.helpers import client_for, streamed
from tests.s3_server import FileStore, fetch_download

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def shown(file_store: FileStore, study, annotator_user):
    """An annotator enrolled in a study with one large image item (stored in ``file_store``)."""
    item = image_item(study, "a")
    enrollment_add(study=study, user=annotator_user)
    return item


def test_the_allowed_user_gets_the_image_and_others_are_refused_first(
    file_store: FileStore, shown, owner, other_researcher
) -> None:
    image = shown.images.get()
    body = fetch_download(login(owner).get(f"/items/{shown.pk}/images/0/"), file_store)
    assert body == png_bytes(size=(2000, 1000)) == file_store.read(image.file.name)
    refused = login(other_researcher).get(f"/items/{shown.pk}/images/0/")
    assert refused.status_code == 404 and "Location" not in refused


def test_the_display_version_is_made_once_and_named_on_the_row(
    file_store: FileStore, shown, owner, other_researcher, monkeypatch
) -> None:
    client = login(owner)
    first = fetch_download(client.get(f"/items/{shown.pk}/images/0/display/"), file_store)
    assert Image.open(io.BytesIO(first)).size == (1024, 512)
    image = ItemImage.objects.get(item=shown)
    assert image.display_name and file_store.names("display/") == [image.display_name]

    # Later requests read the name from the row: the storage is not asked whether the file exists.
    def no_exists(name):
        raise AssertionError(f"exists({name!r}) asked on a request")

    storage = item_storage()
    monkeypatch.setattr(getattr(storage, "_wrapped", storage), "exists", no_exists)  # the made storage
    again = fetch_download(client.get(f"/items/{shown.pk}/images/0/display/"), file_store)
    assert again == first and file_store.names("display/") == [image.display_name]
    refused = login(other_researcher).get(f"/items/{shown.pk}/images/0/display/")
    assert refused.status_code == 404 and "Location" not in refused


def test_a_presigned_url_lives_the_configured_time_and_serves_the_image_type(
    s3_bucket, study, owner, settings
) -> None:
    settings.S3_URL_TTL_SECONDS = 2
    item = image_item(study, "a", size=(640, 480))
    before = time.time()
    response = login(owner).get(f"/items/{item.pk}/images/0/")
    assert response.status_code == 302
    assert response["Cache-Control"] == "private, max-age=1"
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["X-Amz-Expires"] == ["2"]
    signed_at = time.mktime(time.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ")) - time.timezone
    assert before - 2 <= signed_at <= time.time() + 1
    with urllib.request.urlopen(response["Location"], timeout=10) as answer:
        assert answer.headers["Content-Type"] == "image/png"
        assert answer.headers["Content-Disposition"] == f'inline; filename="item-{item.pk}-0.png"'
        assert answer.headers["Cache-Control"] == "private, max-age=600"
        assert answer.read() == png_bytes(size=(640, 480))


def test_proxy_mode_streams_the_bucket_through_the_app(s3_bucket, study, owner, settings) -> None:
    settings.S3_SERVE = "proxy"
    item = image_item(study, "a", size=(640, 480))
    response = login(owner).get(f"/items/{item.pk}/images/0/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert b"".join(streamed(response)) == png_bytes(size=(640, 480))


def test_pages_allow_images_from_the_bucket_only_when_redirecting(s3_bucket, owner, settings) -> None:
    client = login(owner)
    policy = client.get("/studies/")["Content-Security-Policy"]
    assert f"img-src 'self' {s3_bucket.endpoint_url} data: blob:" in policy
    settings.S3_SERVE = "proxy"
    assert "img-src 'self' data: blob:" in client.get("/studies/")["Content-Security-Policy"]


def test_an_api_export_download_redirects_only_its_requester(
    file_store: FileStore, study, owner, other_researcher, django_capture_on_commit_callbacks
) -> None:
    image_item(study, "a", size=(64, 48))
    with django_capture_on_commit_callbacks(execute=True):
        job = export_job_create(study=study, user=owner, fmt="jsonl")
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE and file_store.names("exports/") == [job.file.name]
    body = fetch_download(client_for(owner).get(f"/api/exports/{job.pk}/download/"), file_store)
    assert body == file_store.read(job.file.name) and b'"type": "item"' in body.replace(b'":"', b'": "')
    refused = client_for(other_researcher).get(f"/api/exports/{job.pk}/download/")
    assert refused.status_code == 404 and "Location" not in refused


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("WORKBENCH_S3_URL_TTL_SECONDS", "301", "must be 1 to 300"),
        ("WORKBENCH_S3_URL_TTL_SECONDS", "0", "must be 1 to 300"),
        ("WORKBENCH_S3_SERVE", "public", "must be 'redirect' or 'proxy'"),
    ],
)
def test_settings_refuse_long_lived_urls_and_unknown_serving(name: str, value: str, message: str) -> None:
    env = {**os.environ, name: value, "DJANGO_SETTINGS_MODULE": "workbench.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0 and message in done.stderr


def test_the_task_carries_a_direct_url_to_its_own_annotator_only(
    file_store: FileStore, shown, annotator_user, django_user_model
) -> None:
    """The claim's images carry the presigned URL ``url`` would redirect to (S3), or null (filesystem):
    a client loads the image without another request to a web node."""
    claimed = client_for(annotator_user).post(f"/api/studies/{shown.study_id}/assignments/next/")
    assert claimed.status_code == 200
    (image,) = claimed.json()["task"]["item"]["images"]
    assert image["url"] == f"/items/{shown.pk}/images/0/"
    if file_store.kind != "s3":
        assert image["direct_url"] is None
        return
    direct = image["direct_url"]
    assert direct.startswith(file_store.bucket.endpoint_url) and "X-Amz-Signature=" in direct
    with urllib.request.urlopen(direct, timeout=10) as answer:
        assert answer.headers["Content-Type"] == "image/png"
        assert answer.headers["Content-Disposition"] == f'inline; filename="item-{shown.pk}-0.png"'
        assert answer.read() == png_bytes(size=(2000, 1000))
    # The same task read again by its annotator carries a URL; another annotator finds no task.
    again = client_for(annotator_user).get(f"/api/assignments/{claimed.json()['id']}/")
    assert again.json()["task"]["item"]["images"][0]["direct_url"].startswith(file_store.bucket.endpoint_url)
    stranger = django_user_model.objects.create_user(username="stranger", password="x", role="annotator")
    enrollment_add(study=shown.study, user=stranger)
    refused = client_for(stranger).get(f"/api/assignments/{claimed.json()['id']}/")
    assert refused.status_code == 404 and "X-Amz" not in refused.content.decode()


def test_an_annotators_image_request_reads_the_image_in_one_query(
    file_store: FileStore, shown, annotator_user, django_user_model, django_assert_max_num_queries
) -> None:
    """The session, the account, then one query that finds the image only on an item given to the
    annotator; an annotator without the item is refused (404, no URL), as before."""
    client_for(annotator_user).post(f"/api/studies/{shown.study_id}/assignments/next/")
    client = login(annotator_user)
    with django_assert_max_num_queries(3):
        response = client.get(f"/items/{shown.pk}/images/0/")
    assert fetch_download(response, file_store) == png_bytes(size=(2000, 1000))
    client.get(f"/items/{shown.pk}/images/0/display/")  # makes the display version, names it on the row
    with django_assert_max_num_queries(3):
        display = client.get(f"/items/{shown.pk}/images/0/display/")
    assert Image.open(io.BytesIO(fetch_download(display, file_store))).size == (1024, 512)
    missing = client.get(f"/items/{shown.pk}/images/1/")
    assert missing.status_code == 404 and "Location" not in missing
    stranger = django_user_model.objects.create_user(username="stranger", password="x", role="annotator")
    enrollment_add(study=shown.study, user=stranger)
    for path in (f"/items/{shown.pk}/images/0/", f"/items/{shown.pk}/images/0/display/"):
        refused = login(stranger).get(path)
        assert refused.status_code == 404 and "Location" not in refused
