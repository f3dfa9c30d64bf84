"""Across machines (issue 28, point 6): two web nodes and a worker that share no disk.

Two gunicorn processes (web node A and B, started as docs/deploy.md starts them) and one Celery worker
(the ``celery`` and ``gpu`` queues, solo pool), each with its own ``WORKBENCH_DATA_DIR`` and media
folder, all with ``WORKBENCH_ENV=production`` and the same ``DJANGO_SECRET_KEY``. In common they have
only the test PostgreSQL database, Redis (the broker and ``WORKBENCH_CACHE_URL``) and the S3 API
server (moto's, ``tests/s3_server.py``). Through them, as users would:

- the researcher starts a generation job on A (the API); the worker finds the tiny diffusion model
  by name in its own ``WORKBENCH_MODEL_DIRS`` (the web nodes hold no model) and stores the PNGs in
  the bucket;
- an annotator's task page on A shows one of them: the image URL answers 302 to a presigned URL, and
  the S3 server answers that URL with the stored PNG;
- the researcher asks B for a zip export (a job the worker writes to the bucket) and downloads it
  from B by the same kind of redirect; the zip holds the generated image;
- an API token revoked on A is refused at once by B (the shared cache);
- nothing was written into any process's own media folder.

Needs PostgreSQL (the processes see the test database's committed rows) and Redis as the broker;
skipped otherwise (CI's PostgreSQL + Redis pass runs it: ``.ci/run``).
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from annotations.models import ExportJob, ItemImage
from annotations.services.studies import enrollment_add
from generation.models import GenerationJob
from protocols.schema import load_preset
from tests.factories import StudyFactory, UserFactory
from tests.fixtures.tiny_sd import save_tiny_sd
from tests.s3_server import S3Bucket
from tests.shared_cache import redis_reachable, web_node
from tests.worker import celery_worker, wait_for
from workbench.celery import app

pytestmark = [pytest.mark.slow, pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def cluster_services(settings: Any) -> Iterator[None]:
    """Skips unless this run has what several machines would share: PostgreSQL and a Redis broker."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: set DATABASE_URL=postgres://... (CI's second pass)")
    broker = str(settings.CELERY_BROKER_URL)
    if not broker.startswith(("redis://", "rediss://")) or not redis_reachable(broker):
        pytest.skip("needs Redis as the broker: set CELERY_BROKER_URL=redis://... (CI's second pass)")
    if not redis_reachable():
        pytest.skip("needs Redis for the shared cache (WORKBENCH_TEST_REDIS_URL)")
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.control.purge()  # no task left over from another run reaches this worker
    yield


def node_env(data_dir: Path, *, bucket: S3Bucket, cache_url: str, secret_key: str) -> dict[str, str]:
    """One machine's environment: its own data and media folders; the shared services' addresses."""
    data_dir.mkdir(parents=True)
    return {
        "WORKBENCH_ENV": "production",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secret_key,
        "WORKBENCH_DATA_DIR": str(data_dir),
        "WORKBENCH_MEDIA_ROOT": str(data_dir / "media"),
        "WORKBENCH_MODEL_DIRS": str(data_dir / "models"),
        "CELERY_BROKER_URL": str(django_settings.CELERY_BROKER_URL),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "WORKBENCH_CACHE_URL": cache_url,
        "WORKBENCH_S3_BUCKET": bucket.name,
        "WORKBENCH_S3_ENDPOINT_URL": bucket.endpoint_url,
        "WORKBENCH_S3_REGION": django_settings.S3_REGION,
        "WORKBENCH_S3_ADDRESSING_STYLE": "path",
        "WORKBENCH_S3_SERVE": "redirect",
        "HF_HUB_OFFLINE": "1",
    }


def browser_for(user: Any) -> requests.Session:
    """A browser signed in as ``user``: the session row is in PostgreSQL, signed with the shared key."""
    client = Client()
    client.force_login(user)
    browser = requests.Session()
    browser.cookies.set("sessionid", client.cookies["sessionid"].value)
    return browser


def follow_presigned(response: requests.Response, bucket: S3Bucket) -> bytes:
    """The app's 302 to a presigned URL on the S3 server, and the bytes the S3 server answers it with."""
    assert response.status_code == 302, (response.status_code, response.text[:500])
    location = response.headers["Location"]
    assert location.startswith(f"{bucket.endpoint_url}/{bucket.name}/"), location
    assert "X-Amz-Signature=" in location and "X-Amz-Expires=" in location
    unsigned = requests.get(location.split("?", 1)[0], timeout=30)
    assert unsigned.status_code == 403  # the bucket is private: only the signed URL reads the object
    signed = requests.get(location, timeout=30)
    assert signed.status_code == 200
    return signed.content


def api(node: str, key: str, method: str = "GET", path: str = "/api/me/", **kwargs: Any) -> requests.Response:
    return requests.request(
        method, f"{node}{path}", headers={"Authorization": f"Token {key}"}, timeout=60, **kwargs
    )


def files_under(folder: Path) -> list[str]:
    return sorted(str(path) for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


def test_two_web_nodes_and_a_worker_share_only_the_database_redis_and_the_bucket(
    cluster_services: None,
    shared_cache: str,
    s3_bucket: S3Bucket,
    settings: Any,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    owner = UserFactory.create(username="researcher", role="researcher")
    annotator = UserFactory.create(username="annotator", role="annotator")
    study = StudyFactory.create(
        owner=owner, name="cups", protocol=load_preset("object-attributes").to_dict(), overlap=1
    )
    enrollment_add(study=study, user=annotator)
    owner_key = Token.objects.create(user=owner).key
    annotator_key = Token.objects.create(user=annotator).key
    machines = {name: tmp_path / name for name in ("web-a", "web-b", "worker")}
    envs = {
        name: node_env(folder, bucket=s3_bucket, cache_url=shared_cache, secret_key=str(settings.SECRET_KEY))
        for name, folder in machines.items()
    }
    save_tiny_sd(machines["worker"] / "models" / "tiny-sd")  # only the worker holds the model

    with ExitStack() as stack:
        node_a = stack.enter_context(web_node(envs["web-a"]))
        node_b = stack.enter_context(web_node(envs["web-b"]))
        worker = stack.enter_context(celery_worker(extra_env=envs["worker"], log=tmp_path / "worker.log"))

        def worker_said() -> str:
            return (tmp_path / "worker.log").read_text(errors="replace")[-4000:]

        # The researcher queues generation on A by the model's name; A has no such folder.
        created = api(
            node_a,
            owner_key,
            "POST",
            "/api/generation-jobs/",
            json={
                "study": study.pk,
                "design": "soda",
                "limit": 1,
                "images_per_prompt": 2,
                "model": {"source": "tiny-sd", "steps": 2, "width": 64, "height": 64, "guidance": 1.0},
            },
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        if not wait_for(lambda: not GenerationJob.objects.get(pk=job_id).is_active, timeout=240):
            pytest.fail(f"the generation job did not finish; the worker said:\n{worker_said()}")
        job = GenerationJob.objects.get(pk=job_id)
        assert (job.status, job.generated) == ("done", job.total_images), (job.error, worker_said())
        images = list(ItemImage.objects.filter(item__study=study).order_by("pk"))
        assert len(images) == job.total_images >= 2
        stored = set(s3_bucket.keys())
        assert {image.file.name for image in images} <= stored

        # An annotator sees one of the generated images through A.
        annotator_browser = browser_for(annotator)
        task = annotator_browser.get(f"{node_a}/annotate/studies/{study.pk}/next/", timeout=60)
        assert task.status_code == 200, task.text[:500]
        source = re.search(r'<div class="canvas-stage"><img src="([^"]+)"', task.text)
        assert source is not None, task.text[:2000]
        shown = annotator_browser.get(f"{node_a}{source.group(1)}", allow_redirects=False, timeout=60)
        body = follow_presigned(shown, s3_bucket)
        assert body.startswith(PNG_MAGIC)
        originals = {
            image.file.name: s3_bucket.client()
            .get_object(Bucket=s3_bucket.name, Key=image.file.name)["Body"]
            .read()
            for image in images
        }
        displayed = {image.display_name for image in ItemImage.objects.filter(item__study=study)} - {""}
        assert body in originals.values() or any(
            body == s3_bucket.client().get_object(Bucket=s3_bucket.name, Key=name)["Body"].read()
            for name in displayed
        )
        # Someone else's request is refused by the app before any URL is made.
        stranger = browser_for(UserFactory.create(username="stranger", role="annotator"))
        refused = stranger.get(f"{node_b}{source.group(1)}", allow_redirects=False, timeout=60)
        assert refused.status_code == 404 and "Location" not in refused.headers

        # The researcher asks B for a zip export (a background job on the worker) and downloads it from B.
        researcher_browser = browser_for(owner)
        study_page = researcher_browser.get(f"{node_b}/studies/{study.pk}/", timeout=60)
        assert study_page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', study_page.text)
        assert token is not None
        asked = researcher_browser.post(
            f"{node_b}/studies/{study.pk}/export/zip/",
            data={"csrfmiddlewaretoken": token.group(1)},
            headers={"Referer": f"{node_b}/studies/{study.pk}/"},
            allow_redirects=False,
            timeout=60,
        )
        assert asked.status_code == 302, asked.text[:500]
        export = ExportJob.objects.get(study=study, format="zip")
        if not wait_for(
            lambda: ExportJob.objects.get(pk=export.pk).status in ("done", "failed"), timeout=120
        ):
            pytest.fail(f"the export job did not finish; the worker said:\n{worker_said()}")
        export.refresh_from_db()
        assert export.status == "done", (export.error, worker_said())
        assert export.file.name in set(s3_bucket.keys("exports/"))
        download = researcher_browser.get(
            f"{node_b}/studies/{study.pk}/exports/{export.pk}/", allow_redirects=False, timeout=60
        )
        archive = zipfile.ZipFile(io.BytesIO(follow_presigned(download, s3_bucket)))
        packed = [archive.read(name) for name in archive.namelist() if name.endswith(".png")]
        assert sorted(packed) == sorted(originals.values())

        # A token revoked on A is refused at once on B (which has just accepted it).
        assert api(node_b, annotator_key).status_code == 200
        assert api(node_a, annotator_key).status_code == 200
        assert api(node_a, annotator_key, "DELETE", "/api/auth/token/").status_code == 204
        assert api(node_b, annotator_key).status_code == 401
        assert api(node_b, owner_key).status_code == 200  # only that token

        assert worker.poll() is None, worker_said()

    for name, folder in machines.items():  # no process kept a file of its own
        assert files_under(folder / "media") == [], name
    assert time.monotonic() - started < 600
