"""The shared cache's backend (common/redis_cache.py) against a real Redis (skipped when none answers
at WORKBENCH_TEST_REDIS_URL: tests/shared_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from tests.shared_cache import ROOT


def test_one_client_serves_every_call_and_thread(shared_cache: str) -> None:
    from django.core.cache import cache, caches

    from common.redis_cache import RedisCache

    backend = caches["default"]
    assert isinstance(backend, RedisCache)
    client = backend._cache
    assert client.get_client() is client.get_client(write=True) is client.get_client("any-key")
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for step in range(50):
                key = f"thread-{index}-{step}"
                cache.set(key, {"step": step, "index": index}, 30)
                assert cache.get(key) == {"step": step, "index": index}
                assert cache.incr("counter") > 0
            cache.delete_many([f"thread-{index}-{step}" for step in range(50)])
            assert cache.get(f"thread-{index}-0") is None
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    cache.set("counter", 0, 30)
    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cache.get("counter") == 8 * 50
    assert client.get_client() is client.get_client()


PROBE = """
import os, django
django.setup()
from django.core.cache import cache
cache.set("before-fork", 1, 30)
pid = os.fork()
if pid == 0:
    cache.set("from-child", cache.get("before-fork") + 1, 30)
    os._exit(0)
os.waitpid(pid, 0)
print(cache.get("from-child"))
"""


def test_a_forked_process_gets_its_own_connections(shared_cache: str, tmp_path: Any) -> None:
    """gunicorn and Celery fork after the settings load: the reused client must not share a socket
    with the parent (redis-py's pool reopens its connections in a new process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "DJANGO_"))}
    env |= {
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "WORKBENCH_DATA_DIR": str(tmp_path),
        "WORKBENCH_CACHE_URL": shared_cache,
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "2"
