"""A real S3 API server for the tests: moto's standalone server (``moto[server]``) in its own process.

``s3_server`` (session) starts ``moto_server`` on a free loopback port once; ``s3_bucket`` makes a
new, empty bucket per test and points the WORKBENCH_S3_* settings and boto3's credentials at it, so
code under test talks HTTP to a separate server exactly as it would to MinIO or AWS S3.

``WORKBENCH_TEST_STORAGE=s3`` (CI's PostgreSQL + Redis pass) puts every test on such a bucket
(tests/conftest.py); ``default_store`` is the store a test's files went to either way, and
``storage_env`` the WORKBENCH_S3_* variables a worker or web process started by a test needs to
see the same store.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

# moto accepts any credentials; these only have to be present for boto3 to sign requests.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing-key", "AWS_SECRET_ACCESS_KEY": "testing-secret"}
REGION = "us-east-1"
# "s3": every test's default storage is a fresh bucket on the test S3 server (tests/conftest.py);
# "filesystem" (the default): the test's media folder, as `make test` on the embedded defaults.
TEST_STORAGE = os.environ.get("WORKBENCH_TEST_STORAGE", "filesystem")
if TEST_STORAGE not in ("filesystem", "s3"):
    raise RuntimeError(f"WORKBENCH_TEST_STORAGE={TEST_STORAGE!r}: use filesystem or s3")


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    process: subprocess.Popen[bytes]


@dataclass(frozen=True)
class S3Bucket:
    name: str
    endpoint_url: str

    def client(self) -> Any:
        return _client(self.endpoint_url)

    def keys(self, prefix: str = "") -> list[str]:
        """Every object name in the bucket under ``prefix`` (orphan checks list the bucket)."""
        paginator = self.client().get_paginator("list_objects_v2")
        return [
            obj["Key"]
            for page in paginator.paginate(Bucket=self.name, Prefix=prefix)
            for obj in page.get("Contents", [])
        ]


@lru_cache(maxsize=4)
def _client(endpoint_url: str) -> Any:
    """One boto3 client per server for the session: making one costs ~0.1 s of CPU, and with
    ``WORKBENCH_TEST_STORAGE=s3`` every test makes a bucket."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint_url, region_name=REGION, **_boto_credentials())


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_s3_server(log_dir: Path) -> S3Server:
    """moto_server on a free loopback port, waited for until it answers."""
    port = _free_port()
    moto_server = Path(sys.executable).with_name("moto_server")
    log = (log_dir / "moto-server.log").open("wb")
    process = subprocess.Popen(
        [str(moto_server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited with {process.returncode}; see {log.name}")
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            return S3Server(endpoint_url=endpoint, process=process)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("moto_server did not answer within 30 s")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("s3"))
    yield server
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture
def s3_bucket(s3_server: S3Server, settings: Any, monkeypatch: pytest.MonkeyPatch) -> S3Bucket:
    """A new empty bucket on the test S3 server, with the WORKBENCH_S3_* settings pointing at it."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    bucket = S3Bucket(name=f"wb-test-{uuid.uuid4().hex[:12]}", endpoint_url=s3_server.endpoint_url)
    bucket.client().create_bucket(Bucket=bucket.name)
    settings.S3_BUCKET = bucket.name
    settings.S3_ENDPOINT_URL = s3_server.endpoint_url
    settings.S3_REGION = REGION
    settings.S3_ADDRESSING_STYLE = "path"
    return bucket


@dataclass(frozen=True)
class FileStore:
    """Where a test's stored files went: the media folder, or the test bucket (``file_store``)."""

    kind: str  # "filesystem" or "s3"
    media_root: Path
    bucket: S3Bucket | None

    def names(self, prefix: str = "") -> list[str]:
        """Every stored file's name under ``prefix``, sorted: orphan checks list the store."""
        if self.bucket is not None:
            return sorted(self.bucket.keys(prefix))
        return sorted(
            name
            for name in (path.relative_to(self.media_root).as_posix() for path in self.media_root.rglob("*"))
            if name.startswith(prefix) and (self.media_root / name).is_file()
        )

    def read(self, name: str) -> bytes:
        if self.bucket is not None:
            body: bytes = self.bucket.client().get_object(Bucket=self.bucket.name, Key=name)["Body"].read()
            return body
        return (self.media_root / name).read_bytes()


@pytest.fixture(params=["filesystem", "s3"])
def file_store(request: pytest.FixtureRequest, settings: Any) -> FileStore:
    """Runs a storage-touching test twice: files in the media folder, then in a fresh bucket on the
    test S3 server (docs/deploy.md, "Object storage")."""
    media_root = Path(settings.MEDIA_ROOT)
    if request.param == "s3":
        return FileStore(kind="s3", media_root=media_root, bucket=request.getfixturevalue("s3_bucket"))
    settings.S3_BUCKET = ""
    return FileStore(kind="filesystem", media_root=media_root, bucket=None)


@pytest.fixture
def default_store(request: pytest.FixtureRequest, settings: Any) -> FileStore:
    """The store this test's files go to by default: the test bucket (``WORKBENCH_TEST_STORAGE=s3``,
    or a test that asked for ``s3_bucket``), else the media folder. Tests check what was stored (and
    that nothing was left behind) through it, never by walking ``MEDIA_ROOT``."""
    media_root = Path(settings.MEDIA_ROOT)
    if settings.S3_BUCKET:
        return FileStore(kind="s3", media_root=media_root, bucket=request.getfixturevalue("s3_bucket"))
    return FileStore(kind="filesystem", media_root=media_root, bucket=None)


def storage_env(settings: Any) -> dict[str, str]:
    """The WORKBENCH_S3_* variables for a process a test starts (a worker, a web node), so that it
    stores and reads files where this test does; empty on the filesystem (the media folder is passed
    on by itself). boto3's credentials are already in the environment (``s3_bucket``)."""
    if not settings.S3_BUCKET:
        return {}
    return {
        "WORKBENCH_S3_BUCKET": settings.S3_BUCKET,
        "WORKBENCH_S3_ENDPOINT_URL": settings.S3_ENDPOINT_URL,
        "WORKBENCH_S3_REGION": settings.S3_REGION,
        "WORKBENCH_S3_ADDRESSING_STYLE": settings.S3_ADDRESSING_STYLE,
        "WORKBENCH_S3_SERVE": settings.S3_SERVE,
    }


def fetch_download(response: Any, store: FileStore) -> bytes:
    """The bytes a browser gets for a file answer: on S3, the app answers 302 to a presigned URL,
    fetched here from the S3 server itself; on the filesystem, the app streams the file."""
    if store.kind == "s3":
        assert response.status_code == 302, response.status_code
        location = response["Location"]
        assert location.startswith(store.bucket.endpoint_url if store.bucket else "")
        assert "X-Amz-Signature=" in location and "X-Amz-Expires=" in location
        with urllib.request.urlopen(location, timeout=10) as answer:
            body: bytes = answer.read()
        return body
    assert response.status_code == 200, response.status_code
    return b"".join(response.streaming_content)


def served_disposition(response: Any) -> str:
    """The ``Content-Disposition`` a browser gets for a file answer: the app's own header, or, for a
    redirect to a presigned URL, the one the URL makes the bucket answer with."""
    if response.status_code == 302:
        query = parse_qs(urlsplit(response["Location"]).query)
        return query.get("response-content-disposition", [""])[0]
    return str(response["Content-Disposition"])
