"""A real Redis for the shared-cache tests, and web nodes (gunicorn processes) that share it.

``WORKBENCH_TEST_REDIS_URL`` names the Redis database the tests may flush (default
``redis://127.0.0.1:6379/15``); the tests that need it skip when nothing answers there. CI's
PostgreSQL + Redis pass has one at 127.0.0.1:6379.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_REDIS_URL = os.environ.get("WORKBENCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_reachable(url: str = TEST_REDIS_URL) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except (redis.RedisError, OSError):
        return False


def shared_cache_settings(url: str = TEST_REDIS_URL) -> dict[str, Any]:
    """``CACHES`` as workbench/settings.py makes it from ``WORKBENCH_CACHE_URL=url``."""
    return {
        "default": {
            "BACKEND": "common.redis_cache.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "workbench",
            "OPTIONS": {"socket_connect_timeout": 5, "socket_timeout": 5},
        }
    }


@pytest.fixture
def shared_cache(settings: Any) -> Iterator[str]:
    """This test process on the shared cache (the Redis at ``TEST_REDIS_URL``, emptied before and after)."""
    if not redis_reachable():
        pytest.skip(f"no Redis at {TEST_REDIS_URL} (set WORKBENCH_TEST_REDIS_URL)")
    from django.core.cache import cache

    settings.CACHES = shared_cache_settings()
    settings.WORKBENCH_SHARED_CACHE = True
    cache.clear()
    yield TEST_REDIS_URL
    cache.clear()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def web_node(extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """A gunicorn process (one worker) on the test database; its base URL. ``extra_env`` adds settings
    (``WORKBENCH_CACHE_URL`` for the shared cache)."""
    from django.conf import settings

    from tests import worker
    from tests.benchmarks.bench_vs_labelstudio import gunicorn_flags, start_server, stop_server
    from tests.s3_server import storage_env

    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": worker.test_database_url(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        **storage_env(settings),  # the test's bucket, when its files are in one
        **(extra_env or {}),
    }
    if "WORKBENCH_CACHE_URL" not in (extra_env or {}):
        env.pop("WORKBENCH_CACHE_URL", None)
    command = [sys.executable, "-m", "gunicorn", "workbench.wsgi", *gunicorn_flags(port, 1, 2)]
    server = start_server(command, env, ROOT, port, "/healthz/")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(server)
