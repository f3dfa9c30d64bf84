"""bench_cluster's parts that need no cluster: the nginx configuration it writes, the clean-up of the
process groups it starts, and its options. (The benchmark itself takes a minute or more to start
two web nodes, workers and an S3 server on a small machine: it has no smoke test in the suite;
docs/benchmarks.md, "Across machines (issue 28)".)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmarks.bench_cluster import NGINX, Processes, nginx_config, parse_args

DATABASE = "postgres://user:pass@127.0.0.1:5432/db"


@pytest.mark.skipif(not Path(NGINX).exists() and shutil.which("nginx") is None, reason="nginx not installed")
def test_the_generated_nginx_configuration_is_valid_and_fails_over(tmp_path: Path) -> None:
    config = nginx_config(tmp_path, 18080, [18081, 18082])
    nginx = NGINX if Path(NGINX).exists() else str(shutil.which("nginx"))
    check = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(config)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    text = config.read_text()
    assert "server 127.0.0.1:18081" in text and "server 127.0.0.1:18082" in text
    assert "proxy_next_upstream error timeout http_502 http_503;" in text
    assert "non_idempotent" not in text  # a POST a node already got is never sent twice


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for our purpose
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_stopping_kills_every_process_of_each_group_even_one_that_ignores_sigterm(tmp_path: Path) -> None:
    """A gunicorn master's workers, a worker's children: nothing the benchmark started outlives it."""
    processes = Processes(tmp_path)
    script = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = processes.start("stubborn", [sys.executable, "-c", script], dict(os.environ))
    deadline = time.monotonic() + 30
    while not processes.log("stubborn").strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(processes.log("stubborn").split()[0])
    assert _alive(parent.pid) and _alive(child)
    started = time.monotonic()
    processes.stop_all()
    assert time.monotonic() - started < 30
    time.sleep(0.2)
    assert not _alive(parent.pid) and not _alive(child)


def test_options_size_the_study_and_a_killed_worker_implies_an_import() -> None:
    args = parse_args(["--database-url", DATABASE, "--annotators", "128", "--seconds", "60"])
    # 128 annotators x 60 s / 2 s a cycle x 1.5 / overlap 3, and one item per annotator more
    assert args.items == int(128 * 60 / 2 * 1.5 / 3) + 128
    assert args.import_items == 0
    assert parse_args(["--database-url", DATABASE, "--kill-worker"]).import_items == 100_000
    with pytest.raises(SystemExit):
        parse_args(["--database-url", "sqlite:///x.db"])
    # Images load from the task's presigned URL unless the browser's path is asked for.
    assert args.image_via == "direct" and args.worker_nice == 0
    assert parse_args(["--database-url", DATABASE, "--image-via", "app"]).image_via == "app"
    with pytest.raises(SystemExit):
        parse_args(["--database-url", DATABASE, "--image-via", "proxy"])
