"""SQLite writers with and without the write queue (workbench/sqlite_backend; docs/deploy.md, "SQLite").

Run:
    .venv/bin/python -m tests.benchmarks.bench_sqlite_write_queue --processes 4 --threads 8 --seconds 8

``--processes`` processes (as gunicorn workers) of ``--threads`` threads each write to one SQLite file
in a temporary folder for ``--seconds``, with the project's options (WAL, ``BEGIN IMMEDIATE``, a 30 s
busy timeout). Each transaction is a claim's shape: a read, an insert and a little Python work
inside ``transaction.atomic``. Django's plain SQLite backend and the project's backend take turns
(``--rounds`` times each), and the script prints transactions per second and the p50/p99/max of a
transaction's time, waiting included. No HTTP and no views: this is the lock alone.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ENGINES = {"django-sqlite3": "django.db.backends.sqlite3", "write-queue": "workbench.sqlite_backend"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0


def _process(engine: str, database: str, threads: int, seconds: float, out: Any) -> None:
    sys.path.insert(0, str(ROOT))
    import django
    from django.conf import settings

    options = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    settings.configure(
        DATABASES={"default": {"ENGINE": engine, "NAME": database, "CONN_MAX_AGE": 0, "OPTIONS": options}}
    )
    django.setup()
    from django.db import connection, transaction

    times: list[float] = []
    errors: list[str] = []

    def loop() -> None:
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SELECT COUNT(*) FROM claim WHERE item < 100")
                    cursor.execute("INSERT INTO claim (item) VALUES (%s)", [len(times) % 1000])
                    sum(range(20_000))  # a request's Python work inside the transaction
            except Exception as error:  # noqa: BLE001 (counted and reported)
                errors.append(str(error))
            finally:
                connection.close()
            times.append(time.perf_counter() - started)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put((times, errors))


def run(engine: str, processes: int, threads: int, seconds: float) -> tuple[list[float], list[str]]:
    with tempfile.TemporaryDirectory(prefix="bench-write-queue-") as folder:
        database = str(Path(folder) / "db.sqlite3")
        with sqlite3.connect(database) as setup:
            setup.execute("PRAGMA journal_mode=WAL")
            setup.execute("CREATE TABLE claim (id INTEGER PRIMARY KEY, item INTEGER NOT NULL)")
        context = multiprocessing.get_context("spawn")
        out = context.Queue()
        children = [
            context.Process(target=_process, args=(engine, database, threads, seconds, out))
            for _ in range(processes)
        ]
        for child in children:
            child.start()
        times: list[float] = []
        errors: list[str] = []
        for _ in children:
            part_times, part_errors = out.get()
            times += part_times
            errors += part_errors
        for child in children:
            child.join()
    return times, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(
        f"{args.processes} processes x {args.threads} threads, {args.seconds:g} s per run, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'backend':<16} {'tx/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'errors':>6}")
    for _ in range(args.rounds):
        for name, engine in ENGINES.items():
            times, errors = run(engine, args.processes, args.threads, args.seconds)
            print(
                f"{name:<16} {len(times) / args.seconds:>7.0f} {_percentile(times, 50) * 1000:>7.1f} "
                f"{_percentile(times, 99) * 1000:>7.1f} {max(times, default=0) * 1000:>7.0f} "
                f"{len(errors):>6}",
                flush=True,
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
