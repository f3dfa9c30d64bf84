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

The client is the one ``bench_vs_labelstudio.py`` drives both servers with: a keep-alive
``http.client`` connection per annotator (``requests``, used before 2026-11-24, took 0.8-0.9 ms of
the client's CPU per request against 0.15-0.17 ms for ``http.client``, measured against a bare WSGI
app; CPU the server then lacks on a shared machine). Also printed per N: the
CPU milliseconds per request of gunicorn's processes, of the PostgreSQL backends serving this
database and of the clients (from /proc: what bounds the throughput of a machine whose cores they
share). Options: ``--client-processes P`` spreads the annotators over P client processes (each its
own GIL); ``--server-timing`` adds gunicorn's own time per request (its access log's ``%(D)s``:
from the request parsed to the response written, without the wait for a worker thread);
``--workers``, ``--threads``, ``--worker-class`` and ``--keep-alive`` set gunicorn's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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
from concurrent.futures import ProcessPoolExecutor
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


def make_study(
    n_annotators: int, items: int, tag: str, refresh_statistics: bool = True, *, overlap: int = 3
) -> tuple[int, list[str]]:
    """A study of ``items`` reference items (the test suite's example protocol) with ``n_annotators``
    enrolled annotators and their API tokens (``bench_vs_labelstudio.py`` builds its study so too)."""
    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from annotations.models import Item, User
    from annotations.services.studies import enrollment_add, study_create
    from common.planner_statistics import statistics_refresh
    from protocols.schema import load_protocol_text
    from tests.factories import EXAMPLE_PROTOCOL

    with transaction.atomic():
        owner, _ = User.objects.get_or_create(username=f"bench-owner-{tag}", defaults={"role": "researcher"})
        study = study_create(
            owner=owner, name=f"bench {tag}", protocol=load_protocol_text(EXAMPLE_PROTOCOL), overlap=overlap
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


def _start_server(
    env: dict[str, str],
    port: int,
    workers: int,
    threads: int,
    access_log: Path | None = None,
    worker_class: str = "gthread",
    keep_alive: int = 30,
) -> subprocess.Popen[bytes]:
    from tests.benchmarks.bench_vs_labelstudio import gunicorn_flags, start_server

    logging = ["--access-logfile", str(access_log), "--access-logformat", "%(m)s %(U)s %(s)s %(D)s"]
    flags = gunicorn_flags(port, workers, threads, worker_class=worker_class, keep_alive=keep_alive)
    command = [str(ROOT / ".venv/bin/gunicorn"), "workbench.wsgi", *flags, *(logging if access_log else [])]
    return start_server(command, {**os.environ, **env}, ROOT, port, "/healthz/")


ANSWERS = {
    "answers": {
        "gender": {"value": "female"},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }
}


def _annotator(
    port: int,
    study_id: int,
    token: str,
    start_at: float,
    stop_at: float,
    out: dict[str, list[float]],
    errors: list[str],
    think: float,
) -> None:
    from tests.benchmarks.bench_vs_labelstudio import Client

    client = Client(port, token)
    claims, submits, cycles = [], [], []
    jitter = random.Random(token)  # people do not move in step: random start and think times
    time.sleep(max(0.0, start_at - time.time()))
    if think:
        time.sleep(jitter.uniform(0, think))
    while time.time() < stop_at:
        t0 = time.perf_counter()
        status, body = client.request("POST", f"/api/studies/{study_id}/assignments/next/")
        t1 = time.perf_counter()
        if status == 204:
            errors.append("ran out of items")
            break
        if status != 200:
            errors.append(f"claim {status}: {body[:200]!r}")
            break
        assignment = json.loads(body)["id"]
        if think:
            time.sleep(jitter.uniform(0.5 * think, 1.5 * think))  # looking at the item; not counted
        t2 = time.perf_counter()
        status, body = client.request("POST", f"/api/assignments/{assignment}/submit/", ANSWERS)
        t3 = time.perf_counter()
        if status != 200:
            errors.append(f"submit {status}: {body[:200]!r}")
            break
        claims.append(t1 - t0)
        submits.append(t3 - t2)
        cycles.append((t1 - t0) + (t3 - t2))
    client.close()
    out.setdefault("claim", []).extend(claims)
    out.setdefault("submit", []).extend(submits)
    out.setdefault("cycle", []).extend(cycles)


def _client_process(
    port: int, study_id: int, tokens: list[str], start_at: float, stop_at: float, think: float
) -> tuple[dict[str, list[float]], list[str], float]:
    """One client process: a thread per annotator token; (latencies, errors, CPU seconds it used)."""
    cpu_started = time.process_time()
    results: dict[str, list[float]] = {}
    errors: list[str] = []
    per_thread: list[dict[str, list[float]]] = [{} for _ in tokens]
    threads = [
        threading.Thread(
            target=_annotator,
            args=(port, study_id, token, start_at, stop_at, per_thread[index], errors, think),
        )
        for index, token in enumerate(tokens)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for part in per_thread:
        for key, values in part.items():
            results.setdefault(key, []).extend(values)
    return results, errors, time.process_time() - cpu_started


def _cpu_by_process(*, parent: int | None = None, command_has: str | None = None) -> dict[int, float]:
    """CPU seconds (utime + stime, all threads, from /proc) of this machine's processes that are
    ``parent`` or its children, or whose command line holds ``command_has``."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().decode(errors="replace") if command_has else ""
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if (parent is not None and parent in (pid, ppid)) or (command_has and command_has in command):
            found[pid] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two ``_cpu_by_process`` readings (a process started since counts whole)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def _database_backends() -> str:
    """What the command line of a PostgreSQL backend serving this database holds ("" on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return ""
    return f" {connection.settings_dict['USER']} {connection.settings_dict['NAME']} "


def _server_latencies(log: Path | None, offset: int) -> tuple[list[float], int]:
    """Seconds gunicorn took per API POST, from the access log lines written after ``offset``."""
    if log is None or not log.exists():
        return [], offset
    with log.open("rb") as handle:
        handle.seek(offset)
        text = handle.read().decode()
        offset = handle.tell()
    values = [int(line.split()[-1]) / 1e6 for line in text.splitlines() if line.startswith("POST /api/")]
    return values, offset


def run_one(
    n: int,
    *,
    port: int,
    seconds: float,
    items: int,
    tag: str,
    think: float = 0.0,
    refresh_statistics: bool = True,
    client_processes: int = 1,
    server_pid: int | None = None,
) -> dict[str, Any]:
    study_id, tokens = make_study(n, items, tag, refresh_statistics)
    results: dict[str, list[float]] = {}
    errors: list[str] = []
    processes = max(1, min(client_processes, n))
    shares = [tokens[index::processes] for index in range(processes)]
    start_at = time.time() + (1.0 if processes == 1 else 3.0)  # spawned clients import first
    stop_at = start_at + seconds
    backends = _database_backends()
    server_cpu = _cpu_by_process(parent=server_pid) if server_pid else {}
    database_cpu = _cpu_by_process(command_has=backends) if backends else {}
    if processes == 1:
        outcomes = [_client_process(port, study_id, tokens, start_at, stop_at, think)]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            futures = [
                pool.submit(_client_process, port, study_id, share, start_at, stop_at, think)
                for share in shares
            ]
            outcomes = [future.result() for future in futures]
    elapsed = time.time() - start_at
    server_seconds = _cpu_used(server_cpu, _cpu_by_process(parent=server_pid)) if server_pid else 0.0
    database_seconds = _cpu_used(database_cpu, _cpu_by_process(command_has=backends)) if backends else 0.0
    client_cpu = sum(outcome[2] for outcome in outcomes)
    for part, part_errors, _cpu in outcomes:
        errors.extend(part_errors)
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
    requests_made = 2 * submitted or 1
    return {
        "cpu_ms_per_request": {
            "web": 1000 * server_seconds / requests_made,
            "database": 1000 * database_seconds / requests_made,
            "clients": 1000 * client_cpu / requests_made,
        },
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
    parser.add_argument("--worker-class", default="gthread", help="gunicorn's: gthread or sync")
    parser.add_argument(
        "--keep-alive", type=int, default=30, help="gunicorn's keep-alive seconds (0: a connection a request)"
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="spread the simulated annotators over this many client processes (each its own GIL)",
    )
    parser.add_argument(
        "--server-timing",
        action="store_true",
        help="also print gunicorn's own time per API request (its access log's %%(D)s)",
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
    log_dir = tempfile.TemporaryDirectory(prefix="bench-annotation-log-")
    access_log = Path(log_dir.name) / "access.log" if args.server_timing else None
    server = _start_server(
        env, port, args.workers, args.threads, access_log, args.worker_class, args.keep_alive
    )
    log_offset = 0
    vendor = connection.vendor
    print(
        f"database: {vendor}; server: gunicorn {args.workers} {args.worker_class} workers x {args.threads} "
        f"threads, keep-alive {args.keep_alive} s; "
        f"{os.cpu_count()} cores; python {platform.python_version()}; {args.seconds:.0f} s per run; "
        f"think time {args.think:g} s; {args.client_processes} client process(es)"
    )
    print(
        f"{'N':>3} {'annot/s':>8} {'total':>6} {'claim p50/p95/p99 ms':>22} {'submit p50/p95/p99 ms':>23} "
        f"{'cycle p50/p95/p99 ms':>22} {'max/item':>8}"
    )
    tag = f"{int(time.time())}"
    try:
        # Warm-up, not reported: every gunicorn worker imports and connects on its first requests.
        run_one(min(8, args.workers * args.threads), port=port, seconds=3, items=200, tag=f"{tag}-warm")
        log_offset = _server_latencies(access_log, 0)[1]
        for n in [int(value) for value in args.annotators.split(",")]:
            result = run_one(
                n,
                port=port,
                seconds=args.seconds,
                items=args.items,
                tag=f"{tag}-{n}",
                think=args.think,
                refresh_statistics=not args.stale_statistics,
                client_processes=args.client_processes,
                server_pid=server.pid,
            )
            server_times, log_offset = _server_latencies(access_log, log_offset)

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
                cpu = result["cpu_ms_per_request"]
                database = (
                    f"PostgreSQL {cpu['database']:.2f} (the backends of this database)"
                    if vendor == "postgresql"
                    else "SQLite's inside the web figure"
                )
                print(
                    f"    CPU ms per request: web {cpu['web']:.2f} (gunicorn's processes), {database}, "
                    f"clients {cpu['clients']:.2f}",
                    flush=True,
                )
            if server_times:
                print(f"    gunicorn's own time per API request p50/p95/p99 {fmt(server_times)} ms")
    finally:
        server.terminate()
        server.wait(timeout=30)
        connection.close()
        log_dir.cleanup()
        if temp is not None:
            temp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
