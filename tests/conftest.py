"""Fixtures shared by the whole suite: accounts of every role, studies, a private media folder.

Imports of Django code are inside the fixtures, so the pure tests (``tests/metrics``) also run
without Django (``pytest -p no:django tests/metrics``).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.core.management import call_command

from tests.s3_server import (  # noqa: F401 (fixtures: a real S3 API server)
    TEST_STORAGE,
    default_store,
    file_store,
    s3_bucket,
    s3_server,
)
from tests.shared_cache import shared_cache  # noqa: F401 (fixture: a real Redis as the shared cache)

if TYPE_CHECKING:
    from annotations.models import Study, User


@pytest.fixture(autouse=True)
def _workbench_test_settings(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path | None]:
    if not request.config.pluginmanager.hasplugin("django"):
        yield None
        return
    from django.core.cache import cache

    from workbench.celery import app as celery_app

    settings = request.getfixturevalue("settings")
    # Each test starts with an empty cache: throttle counts, item counts and reports from another test
    # (or, on a shared Redis cache, from an earlier run) never leak in.
    cache.clear()
    media = tmp_path_factory.mktemp("media")
    settings.MEDIA_ROOT = str(media)
    # Models the tests build live in pytest's temporary folders: those are the allowed model folders
    # (a test of the refusal sets its own; generation/model_source.py).
    settings.WORKBENCH_MODEL_DIRS = [str(tmp_path_factory.getbasetemp())]
    settings.CELERY_TASK_ALWAYS_EAGER = True
    celery_app.conf.task_always_eager = True  # Celery caches its config; a worker test turns this off
    # Hashing passwords properly costs ~0.3 s per account; tests create many accounts.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # The test VLM servers listen on 127.0.0.1 (tests/fixtures/chat_server.py); only that loopback
    # address is allowed, explicitly, as a deployment allows its own LLM host (docs/security.md).
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
    # WORKBENCH_TEST_STORAGE=s3 (CI's PostgreSQL + Redis pass): every file this test stores goes to a
    # fresh bucket on the test S3 server, as on a deployment with WORKBENCH_S3_BUCKET; a test about the
    # filesystem itself is marked `filesystem`.
    on_s3 = TEST_STORAGE == "s3" and request.node.get_closest_marker("filesystem") is None
    if on_s3:
        request.getfixturevalue("s3_bucket")
    yield media
    if on_s3 and settings.S3_BUCKET:
        # Nothing may go around the storage: with a bucket, the media folder stays empty.
        written = [str(path.relative_to(media)) for path in media.rglob("*") if path.is_file()]
        assert written == [], f"files written to the media folder instead of the bucket: {written}"


@pytest.fixture
def _media_root(_workbench_test_settings: Path) -> Path:
    return _workbench_test_settings


def _user(username: str, role: str, **extra: Any) -> User:
    from tests.factories import UserFactory

    return UserFactory.create(username=username, role=role, **extra)


@pytest.fixture
def owner(db: None) -> User:
    return _user("owner", "researcher")


@pytest.fixture
def other_researcher(db: None) -> User:
    return _user("other", "researcher")


@pytest.fixture
def annotator_user(db: None) -> User:
    return _user("ann", "annotator")


@pytest.fixture
def admin_user(db: None) -> User:
    return _user("boss", "admin", is_superuser=True, is_staff=True)


@pytest.fixture
def study(owner: User) -> Study:
    from tests.factories import StudyFactory

    return StudyFactory.create(owner=owner)


@pytest.fixture
def demo_study(settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any) -> Study:
    """The demo study with its colour-rule labeller's answers (so machine vs human has rows)."""
    from annotations.models import Study

    settings.DATA_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        call_command("setup_demo", "--labellers", "colour", stdout=io.StringIO())
    return Study.objects.get()
