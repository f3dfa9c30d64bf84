"""Server time and SQL statements of the claim + submit hot path, in process (no network, no gunicorn).

Run (SQLite, a fresh database in a temporary folder):
    .venv/bin/python -m tests.benchmarks.bench_hot_path
Run (PostgreSQL, the database DATABASE_URL names; a fresh study per run, nothing else is touched):
    DATABASE_URL=postgres://USER:PASS@127.0.0.1/DB .venv/bin/python -m tests.benchmarks.bench_hot_path
Options: ``--cycles 200`` claim + submit cycles; ``--items 1000`` items of the cycle study;
``--profile`` the top functions of the cycles (cProfile; ``--profile-sort tottime``, ``--profile-cpu``);
``--sizes 1000,1000000`` the studies the task page GET and the claim are timed on (flatness with size;
0 or empty skips it);
``--policy fixed:3`` the cycle study's overlap policy (``agree:2/3``; ``posterior:0.95/3`` with a stored
model of its 6 annotators and 500 others, about 40 kB of JSON, as a crowd study's); ``--no-throttle``
throttling off (by default the configured throttle classes run, with rates no benchmark reaches).

Besides the cycles, as many ``GET /api/me/`` (the account, one serializer, no query: a trivial
authenticated API call through the same stack) are timed, and the cycle's CPU is printed as a multiple
of that GET's (issue 38, point 4: at most 3.5).

The cycles go through Django's test ``Client`` with the ``Authorization: Token KEY`` header, i.e. the
whole middleware stack, DRF's authentication, throttling, parsing and rendering: what a request
costs the server, less the socket and the WSGI server. A cycle is POST /api/studies/ID/assignments/next/
then POST /api/assignments/ID/submit/ with the answers of ``bench_annotation.py``, the annotators taking
turns (overlap 3, 6 annotators: items fill up as they would). Every tenth request of each kind is run
for its SQL only (``CaptureQueriesContext``; not timed, since logging statements is work a production
server does not do) and its statements counted apart from the transaction statements (BEGIN, COMMIT,
SAVEPOINT, RELEASE; Django issues SQLite's BEGIN itself, PostgreSQL's is implicit in psycopg).

The size part bulk-inserts N items with raw ``executemany`` (1,000,000 on SQLite in well under a
minute here), then times 30 claims (each followed by a release, so the next claim is a new lease) and
30 GETs of the annotator's HTML task page (session login), and prints the medians per size.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tests.benchmarks.backend_cpu import backend_cpu

ROOT = Path(__file__).resolve().parents[2]
ANSWERS = {
    "answers": {
        "gender": {"value": "female"},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }
}
TRANSACTION_WORDS = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _setup_django(throttle: bool) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # The throttle's counter lives in the cache; a benchmark sends more than a person's minute allows:
    # the throttle runs (its cost is counted) at a rate no run reaches, or not at all (--no-throttle).
    rates = {"anon": "1000000/minute", "user": "1000000/minute"} if throttle else {"anon": None, "user": None}
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    call_command("migrate", verbosity=0)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0


def _make_study(
    tag: str, items: int, annotators: int, policy: str = "fixed:3"
) -> tuple[Any, list[Any], list[str]]:
    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from annotations.models import User
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import EXAMPLE_PROTOCOL

    with transaction.atomic():
        owner, _ = User.objects.get_or_create(username=f"hot-owner-{tag}", defaults={"role": "researcher"})
        study = study_create(
            owner=owner, name=f"hot {tag}", protocol=load_protocol_text(EXAMPLE_PROTOCOL), overlap=3
        )
        users, tokens = [], []
        for index in range(annotators):
            user, _ = User.objects.get_or_create(
                username=f"hot-{tag}-{index}", defaults={"role": "annotator"}
            )
            enrollment_add(study=study, user=user)
            users.append(user)
            tokens.append(Token.objects.get_or_create(user=user)[0].key)
    _insert_items(study.pk, items)
    if policy != "fixed:3":
        _set_policy(study, users, policy)
    return study, users, tokens


def _set_policy(study: Any, users: list[Any], policy: str) -> None:
    """The study under ``policy``; a posterior one with a stored model of its annotators and 500
    others (every submit reads and decodes it, as on a crowd study)."""
    from django.db import transaction

    from annotations.models import Study
    from annotations.services.studies import study_overlap_recount, study_overlap_set

    with transaction.atomic():
        study_overlap_set(study=study, policy=policy)
        if policy.startswith("posterior"):
            ids = [str(user.annotator.pk) for user in users] + [str(10**9 + n) for n in range(500)]
            model = {
                "classes": ["female", "male"],
                "prior": [0.5, 0.5],
                "fallback": [[0.8, 0.2], [0.2, 0.8]],
                "confusion": {key: [[0.85, 0.15], [0.15, 0.85]] for key in ids},
                "kind": "per-annotator",
                "iterations": 10,
                "converged": True,
                "judgements": 3000,
                "gold_items": 0,
                "fitted_at": "2026-11-29T00:00:00+00:00",
            }
            Study.objects.filter(pk=study.pk).update(overlap_model=model)
            study.refresh_from_db()
            study_overlap_recount(study=study, every=True)


def _insert_items(study_id: int, n: int) -> None:
    """N image items (references, no files) through one executemany per 20,000 rows."""
    from django.db import connection, transaction

    from annotations.models import Item
    from common.planner_statistics import statistics_refresh

    fields = [f for f in Item._meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(Item._meta.db_table)} ({', '.join(quote(str(f.column)) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    template = Item(study_id=study_id, kind="image", is_reference=True)
    values = {}
    for f in fields:
        if f.attname == "study_id":
            values[f.attname] = study_id
        else:
            value = f.pre_save(template, add=True) if f.attname != "shuffle_key" else None
            values[f.attname] = f.get_db_prep_save(value, connection)
    import random

    shuffle = random.Random(study_id)
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, n, 20000):
            rows = []
            for i in range(start, min(n, start + 20000)):
                row: list[Any] = []
                for f in fields:
                    if f.attname == "external_id":
                        row.append(f"i{i}")
                    elif f.attname == "shuffle_key":
                        row.append(shuffle.randrange(2**31))
                    else:
                        row.append(values[f.attname])
                rows.append(tuple(row))
            cursor.executemany(sql, rows)
    statistics_refresh(Item, rows=n)


class Meter:
    """Times requests and keeps their SQL statements, split into work and transaction control.

    Every ``CAPTURE_EVERY``-th request of a kind is run under ``CaptureQueriesContext`` for its statements
    and left out of the timings: capturing makes Django log every statement with its values (on
    PostgreSQL's prepared statements, composing the text on the client), which a production server
    does not do."""

    CAPTURE_EVERY = 10

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.sql: dict[str, list[int]] = {}
        self.tx: dict[str, list[int]] = {}
        self.example: dict[str, list[str]] = {}
        self.calls: dict[str, int] = {}

    def __call__(self, name: str, call: Callable[[], Any]) -> Any:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.calls[name] = self.calls.get(name, 0) + 1
        if self.calls[name] % self.CAPTURE_EVERY == 0:
            with CaptureQueriesContext(connection) as captured:
                result = call()
            statements = [q["sql"] for q in captured.captured_queries]
            tx = [s for s in statements if s.lstrip().upper().startswith(TRANSACTION_WORDS)]
            self.sql.setdefault(name, []).append(len(statements) - len(tx))
            self.tx.setdefault(name, []).append(len(tx))
            self.example[name] = statements
            return result
        t0, c0 = time.perf_counter(), time.process_time()
        result = call()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        self.times.setdefault(name, []).append(elapsed * 1000)
        self.cpu.setdefault(name, []).append(cpu * 1000)
        return result


def _cycles(study: Any, tokens: list[str], cycles: int, meter: Meter | None) -> None:
    from django.test import Client

    clients = [Client(HTTP_AUTHORIZATION=f"Token {token}") for token in tokens]
    for n in range(cycles):
        client = clients[n % len(clients)]

        def claim(client: Client = client) -> Any:
            return client.post(f"/api/studies/{study.pk}/assignments/next/")

        response = meter("claim", claim) if meter else claim()
        assert response.status_code == 200, (response.status_code, response.content[:300])
        assignment = response.json()["id"]

        def submit(client: Client = client, assignment: int = assignment) -> Any:
            return client.post(
                f"/api/assignments/{assignment}/submit/", ANSWERS, content_type="application/json"
            )

        response = meter("submit", submit) if meter else submit()
        assert response.status_code == 200, (response.status_code, response.content[:300])


def _gets(tokens: list[str], n: int, meter: Meter | None) -> None:
    """``GET /api/me/`` by the annotators in turn: a trivial authenticated API call."""
    from django.test import Client

    clients = [Client(HTTP_AUTHORIZATION=f"Token {token}") for token in tokens]
    for index in range(n):
        client = clients[index % len(clients)]
        response = meter("get", partial(client.get, "/api/me/")) if meter else client.get("/api/me/")
        assert response.status_code == 200, (response.status_code, response.content[:300])


def run_cycles(args: argparse.Namespace) -> None:
    study, _users, tokens = _make_study("cycle", args.items, 6, args.policy)
    _cycles(study, tokens, 20, None)  # warm-up: imports, caches, connection
    _gets(tokens, 20, None)
    meter = Meter()
    # --profile-cpu: CPU time, not elapsed (waiting for the database is not this process's work; the
    # timer costs more per call, so small functions look larger).
    profiler = (
        (cProfile.Profile(time.process_time) if args.profile_cpu else cProfile.Profile())
        if args.profile
        else None
    )
    if profiler:
        profiler.enable()
    database_before = backend_cpu()
    _cycles(study, tokens, args.cycles, meter)
    database_after = backend_cpu()
    _gets(tokens, args.cycles, meter)
    if profiler:
        profiler.disable()
    for table in (meter.times, meter.cpu):
        table["cycle"] = [c + s for c, s in zip(table["claim"], table["submit"], strict=True)]
    print(
        f"\n{args.cycles} cycles, {args.items} items, {args.policy}, 6 annotators taking turns; "
        f"throttle {'off' if args.no_throttle else 'on'}; then {args.cycles} GET /api/me/"
    )
    print("wall: elapsed time; CPU: this process's CPU time (less sensitive to a loaded machine)")
    print(
        f"{'':8} {'p50 ms':>8} {'p95 ms':>8} {'min ms':>8} {'CPU p50':>8} {'CPU min':>8} {'SQL':>5} {'tx':>4}"
    )
    for name in ("claim", "submit", "cycle", "get"):
        values, cpu = meter.times[name], meter.cpu[name]
        sql = statistics.median(meter.sql[name]) if name in meter.sql else ""
        tx = statistics.median(meter.tx[name]) if name in meter.tx else ""
        print(
            f"{name:8} {statistics.median(values):8.2f} {_percentile(values, 95):8.2f} "
            f"{min(values):8.2f} {statistics.median(cpu):8.2f} {min(cpu):8.2f} {sql!s:>5} {tx!s:>4}"
        )
    ratio = statistics.median(meter.cpu["cycle"]) / statistics.median(meter.cpu["get"])
    lowest = min(meter.cpu["cycle"]) / min(meter.cpu["get"])
    print(f"cycle CPU / GET CPU: {ratio:.2f} (medians), {lowest:.2f} (minima)")
    if database_before is not None and database_after is not None:
        spent = 1000 * (database_after - database_before) / (2 * args.cycles)
        print(f"PostgreSQL backend CPU per claim or submit (mean): {spent:.2f} ms")
    if args.show_sql:
        for name in ("claim", "submit"):
            print(f"\n-- {name}: the last request's statements")
            for statement in meter.example[name]:
                print("  ", statement[:300])
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(args.profile_sort).print_stats(args.profile_top)
        print(out.getvalue())


def run_sizes(sizes: list[int], repeats: int) -> None:
    from django.test import Client

    from annotations.models import Assignment

    print(f"\nFlatness with size: median of {repeats} (ms)")
    print(
        f"{'items':>10} {'insert s':>9} {'claim':>8} {'CPU':>6} {'SQL':>4} "
        f"{'task page':>10} {'CPU':>6} {'SQL':>4}"
    )
    for size in sizes:
        t0 = time.perf_counter()
        study, users, tokens = _make_study(f"size{size}", size, 2)
        inserted = time.perf_counter() - t0
        api = Client(HTTP_AUTHORIZATION=f"Token {tokens[0]}")
        page = Client()
        page.force_login(users[1])
        meter = Meter()
        for _ in range(repeats):
            response = meter("claim", partial(api.post, f"/api/studies/{study.pk}/assignments/next/"))
            assert response.status_code == 200, response.content[:300]
            assert api.post(f"/api/assignments/{response.json()['id']}/release/").status_code == 200
        held = page.get(f"/annotate/studies/{study.pk}/next/")
        assert held.status_code == 302, held.status_code
        url = held["Location"]
        for _ in range(repeats):
            response = meter("page", partial(page.get, url))
            assert response.status_code == 200, response.status_code
            # The page leases one item ahead; hand it back so every GET does the same work.
            Assignment.objects.filter(study=study, annotator__user=users[1], status="leased").exclude(
                pk=int(url.rstrip("/").rsplit("/", 1)[1])
            ).update(status="expired")
        print(
            f"{size:>10} {inserted:>9.1f} {statistics.median(meter.times['claim']):>8.2f} "
            f"{statistics.median(meter.cpu['claim']):>6.2f} {statistics.median(meter.sql['claim']):>4} "
            f"{statistics.median(meter.times['page']):>10.2f} {statistics.median(meter.cpu['page']):>6.2f} "
            f"{statistics.median(meter.sql['page']):>4}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--sizes", default="1000,1000000")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-top", type=int, default=40)
    parser.add_argument("--profile-cpu", action="store_true", help="profile CPU time, not elapsed")
    parser.add_argument("--profile-sort", default="cumulative", help="pstats' key: cumulative, tottime")
    parser.add_argument("--show-sql", action="store_true")
    parser.add_argument("--policy", default="fixed:3", help="fixed:3, agree:2/3 or posterior:0.95/3")
    parser.add_argument("--no-throttle", action="store_true", help="throttling off (as before issue 38)")
    args = parser.parse_args()
    temporary = None
    if "DATABASE_URL" not in os.environ:
        temporary = tempfile.TemporaryDirectory(prefix="bench-hot-")
        os.environ["WORKBENCH_DATA_DIR"] = temporary.name
    _setup_django(throttle=not args.no_throttle)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT sqlite_version()" if connection.vendor == "sqlite" else "SHOW server_version")
        version = cursor.fetchone()[0]
    print(
        f"database: {connection.vendor} {version}"
        f"; python {platform.python_version()}; {os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}"
    )
    if args.cycles:
        run_cycles(args)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip() and int(s)]
    if sizes:
        run_sizes(sizes, args.repeats)
    if temporary is not None:
        temporary.cleanup()


if __name__ == "__main__":
    main()
