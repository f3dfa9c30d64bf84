"""Claim-and-submit throughput and latency over HTTP, with N concurrent simulated annotators.

Run (SQLite, a fresh database in a temporary folder):
    .venv/bin/python -m tests.benchmarks.bench_annotation
Run (PostgreSQL, the database DATABASE_URL names; a fresh study per run, nothing else is touched):
    DATABASE_URL=postgres://USER:PASS@127.0.0.1/DB .venv/bin/python -m tests.benchmarks.bench_annotation

For each N (default 1, 8, 32) the script creates a study (overlap 3, the test suite's example
protocol: one single-choice and one multi-choice answer per item, enough items that nobody runs
out), N annotator accounts with API tokens, starts gunicorn on 127.0.0.1 (gthread workers), and runs
N client threads for ``--seconds``: each loops POST /api/studies/ID/assignments/next/ then
POST /api/assignments/ID/submit/ (``--think S`` waits 0.5 S to 1.5 S between the two, as a person
would, after a random start; the default 0 runs them back to back, which measures saturation, not a
person's wait). It prints annotations (submitted items) per second and the p50/p95/p99 latency of
claims, submits and both together, and checks afterwards that no item got more than ``overlap``
judgements. A 3-second warm-up on its own study comes first. Clients and server share the machine's
cores, so the figures are a floor for a server with cores of its own.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _make_study(
    n_annotators: int, items: int, tag: str, refresh_statistics: bool = True
) -> tuple[int, list[str]]:
    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from annotations.models import Item, User
    from annotations.protocols.schema import load_protocol_text
    from annotations.services.studies import enrollment_add, study_create
    from common.planner_statistics import statistics_refresh
    from tests.factories import EXAMPLE_PROTOCOL

    with transaction.atomic():
        owner, _ = User.objects.get_or_create(username=f"bench-owner-{tag}", defaults={"role": "researcher"})
        study = study_create(
            owner=owner, name=f"bench {tag}", protocol=load_protocol_text(EXAMPLE_PROTOCOL), overlap=3
        )
        Item.objects.bulk_create(
            [Item(study=study, external_id=f"i{i}", kind="image", is_reference=True) for i in range(items)],
            batch_size=2000,
        )
        if refresh_statistics:  # as every import path does after adding many items (planner_statistics.py)
            statistics_refresh(Item, rows=items)
        tokens = []
        for index in range(n_annotators):
            user, _ = User.objects.get_or_create(
                username=f"bench-{tag}-{index}", defaults={"role": "annotator"}
            )
            enrollment_add(study=study, user=user)
            tokens.append(Token.objects.get_or_create(user=user)[0].key)
    return study.pk, tokens


def _start_server(env: dict[str, str], port: int, workers: int, threads: int) -> subprocess.Popen[bytes]:
    command = [
        str(ROOT / ".venv/bin/gunicorn"),
        "workbench.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--worker-class",
        "gthread",
        "--log-level",
        "warning",
        "--timeout",
        "60",
        "--keep-alive",
        "30",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **env})
    deadline = time.monotonic() + 30
    import requests

    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz/", timeout=1).ok:
                return server
        except requests.RequestException:
            time.sleep(0.2)
    server.terminate()
    raise RuntimeError("gunicorn did not start")


ANSWERS = {
    "answers": {
        "gender": {"value": "female"},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }
}


def _annotator(
    base: str,
    study_id: int,
    token: str,
    clock: dict[str, float],
    start: threading.Barrier,
    out: dict[str, list[float]],
    errors: list[str],
    think: float,
) -> None:
    import requests

    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    claims, submits, cycles = [], [], []
    jitter = random.Random(token)  # people do not move in step: random start and think times
    start.wait()
    stop_at = clock["stop"]
    if think:
        time.sleep(jitter.uniform(0, think))
    while time.monotonic() < stop_at:
        t0 = time.perf_counter()
        response = session.post(f"{base}/api/studies/{study_id}/assignments/next/", timeout=30)
        t1 = time.perf_counter()
        if response.status_code == 204:
            errors.append("ran out of items")
            break
        if response.status_code != 200:
            errors.append(f"claim {response.status_code}: {response.text[:200]}")
            break
        assignment = response.json()["id"]
        if think:
            time.sleep(jitter.uniform(0.5 * think, 1.5 * think))  # looking at the item; not counted
        t2 = time.perf_counter()
        response = session.post(f"{base}/api/assignments/{assignment}/submit/", json=ANSWERS, timeout=30)
        t3 = time.perf_counter()
        if response.status_code != 200:
            errors.append(f"submit {response.status_code}: {response.text[:200]}")
            break
        claims.append(t1 - t0)
        submits.append(t3 - t2)
        cycles.append((t1 - t0) + (t3 - t2))
    out.setdefault("claim", []).extend(claims)
    out.setdefault("submit", []).extend(submits)
    out.setdefault("cycle", []).extend(cycles)


def run_one(
    n: int,
    *,
    port: int,
    seconds: float,
    items: int,
    tag: str,
    think: float = 0.0,
    refresh_statistics: bool = True,
) -> dict[str, Any]:
    study_id, tokens = _make_study(n, items, tag, refresh_statistics)
    results: dict[str, list[float]] = {}
    errors: list[str] = []
    barrier = threading.Barrier(n + 1)
    clock: dict[str, float] = {}
    per_thread: list[dict[str, list[float]]] = [{} for _ in range(n)]
    threads = [
        threading.Thread(
            target=_annotator,
            args=(
                f"http://127.0.0.1:{port}",
                study_id,
                token,
                clock,
                barrier,
                per_thread[index],
                errors,
                think,
            ),
        )
        for index, token in enumerate(tokens)
    ]
    for thread in threads:
        thread.start()
    clock["stop"] = time.monotonic() + seconds
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for part in per_thread:
        for key, values in part.items():
            results.setdefault(key, []).extend(values)
    from django.db.models import Count

    from annotations.models import Assignment

    worst = (
        Assignment.objects.filter(study_id=study_id, status="submitted")
        .values("item_id")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("n", flat=True)
        .first()
    ) or 0
    submitted = len(results.get("cycle", []))
    return {
        "n": n,
        "annotations": submitted,
        "seconds": elapsed,
        "per_second": submitted / elapsed,
        "claim": results.get("claim", []),
        "submit": results.get("submit", []),
        "cycle": results.get("cycle", []),
        "errors": errors,
        "max_per_item": worst,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", default="1,8,32", help="comma-separated N values")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--items", type=int, default=6000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="seconds each simulated annotator waits between claim and submit (0: back to back)",
    )
    parser.add_argument(
        "--stale-statistics",
        action="store_true",
        help="skip the ANALYZE that item imports run after a bulk load (PostgreSQL; to see its effect)",
    )
    args = parser.parse_args(argv)
    env = {"WORKBENCH_THROTTLE_USER": "10000000/minute", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    temp = None
    if not os.environ.get("DATABASE_URL"):
        temp = tempfile.TemporaryDirectory(prefix="bench-annotation-")
        env["WORKBENCH_DATA_DIR"] = temp.name
    _setup_django(env)
    from django.db import connection

    port = _free_port()
    server = _start_server(env, port, args.workers, args.threads)
    vendor = connection.vendor
    print(
        f"database: {vendor}; server: gunicorn {args.workers} workers x {args.threads} threads; "
        f"{os.cpu_count()} cores; python {platform.python_version()}; {args.seconds:.0f} s per run; "
        f"think time {args.think:g} s"
    )
    print(
        f"{'N':>3} {'annot/s':>8} {'total':>6} {'claim p50/p95/p99 ms':>22} {'submit p50/p95/p99 ms':>23} "
        f"{'cycle p50/p95/p99 ms':>22} {'max/item':>8}"
    )
    tag = f"{int(time.time())}"
    try:
        # Warm-up, not reported: every gunicorn worker imports and connects on its first requests.
        run_one(min(8, args.workers * args.threads), port=port, seconds=3, items=200, tag=f"{tag}-warm")
        for n in [int(value) for value in args.annotators.split(",")]:
            result = run_one(
                n,
                port=port,
                seconds=args.seconds,
                items=args.items,
                tag=f"{tag}-{n}",
                think=args.think,
                refresh_statistics=not args.stale_statistics,
            )

            def fmt(values: list[float]) -> str:
                return "/".join(f"{_percentile(values, q) * 1000:.0f}" for q in (50, 95, 99))

            print(
                f"{n:>3} {result['per_second']:>8.1f} {result['annotations']:>6} {fmt(result['claim']):>22} "
                f"{fmt(result['submit']):>23} {fmt(result['cycle']):>22} {result['max_per_item']:>8}",
                flush=True,
            )
            if result["errors"]:
                print(f"    errors: {sorted(set(result['errors']))[:3]}")
            if result["cycle"]:
                mean = statistics.mean(result["cycle"]) * 1000
                requests_all = result["claim"] + result["submit"]
                print(
                    f"    mean cycle {mean:.1f} ms (without think time); all requests p50/p95/p99 "
                    f"{fmt(requests_all)} ms",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(timeout=30)
        connection.close()
        if temp is not None:
            temp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
