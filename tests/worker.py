"""Start a real Celery worker process against the test database and the configured broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from tests.s3_server import storage_env

ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """A DATABASE_URL for the database the tests are using right now (the test database)."""
    current = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{current['NAME']}"
    if connection.vendor == "postgresql":
        auth = f"{quote(current['USER'])}:{quote(current['PASSWORD'] or '')}@" if current["USER"] else ""
        return (
            f"postgres://{auth}{current['HOST'] or '127.0.0.1'}:{current['PORT'] or 5432}/{current['NAME']}"
        )
    raise RuntimeError(f"no worker test support for {connection.vendor}")


@contextmanager
def celery_worker(
    *, queues: str = "celery,gpu", extra_env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen]:
    """A worker process (solo pool) that sees the test database and the test's store (its media
    folder, or its bucket). It runs in its own process group (see :func:`kill_worker`); its output goes
    to ``log`` when given (a long run could fill a pipe nobody reads), else to a pipe read when a test
    fails."""
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "WORKBENCH_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "WORKBENCH_MODEL_DIRS": ",".join(settings.WORKBENCH_MODEL_DIRS),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        **storage_env(settings),  # the test's bucket, when its files are in one
        **(extra_env or {}),
    }
    output = subprocess.PIPE if log is None else log.open("a")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workbench",
            "worker",
            "-Q",
            queues,
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()
        if not isinstance(output, int):  # a log file we opened (subprocess.PIPE is an int)
            output.close()


def kill_worker(process: subprocess.Popen) -> None:
    """SIGKILL the worker's whole process group, as the out-of-memory killer or a lost machine would:
    no shutdown, no acknowledgement, no cleanup."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=20)


def wait_for(predicate, *, timeout: float = 90, every: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False
