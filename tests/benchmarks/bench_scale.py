"""Flat pages at any size (issue 17): a 1M-item import, 1M-annotation exports, a 5M-answer agreement report.

    .venv/bin/python tests/benchmarks/bench_scale.py import [--items 1000000] [--manifest csv|jsonl]
    .venv/bin/python tests/benchmarks/bench_scale.py export [--annotations 1000000] [--formats jsonl csv]
    .venv/bin/python tests/benchmarks/bench_scale.py agreement [--items 100000] [--questions 10]
    DATABASE_URL=postgres://USER:PASS@127.0.0.1/DB .venv/bin/python tests/benchmarks/bench_scale.py ...

Common options: ``--keep DIR`` (the SQLite database and files live there and a fixture already built
there is reused; with ``DATABASE_URL`` the fixture study is reused by name), ``--profile`` (cProfile's
25 costliest functions of the measured run; its time is then not the operation's).

Each measurement runs in a child process of its own (this script with ``--child``) that does only
the measured operation, so its peak resident size (``getrusage(RUSAGE_SELF).ru_maxrss``) is the
operation's plus Django's start-up, not the fixture's. What each one runs is the code path a user's
request takes:

- ``import``: writes a manifest of N reference items (no files; id, prompt, model, condition, seed,
  one metadata column) and imports it with ``items_import`` (the import page, the API and
  ``manage.py import_items`` call it) into a fresh study of a single-image protocol. The imported
  study is deleted afterwards.
- ``export``: a study of N/10 items x 5 annotators x 2 questions (N annotations, inserted with
  ``COPY`` on PostgreSQL and ``executemany`` on SQLite, not through the services: a fixture), a
  stored consensus label per item and question, and a revision on every 100th annotation; then each
  format through ``export_job_run`` (the background job a page or API request for a study this size
  queues: the file is written and stored) and again through the streaming response the page
  answers with for smaller studies (``annotations.downloads.streaming_export``, consumed).
- ``agreement``: the study of ``bench_agreement.py`` (3 humans + 2 machine labellers x Q
  single-choice questions x N items), inserted the same way, then ``agreement_report`` (the
  agreement page's, the API's and ``manage.py agreement``'s report) with a 1000-resample bootstrap.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
_KEEP = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
DATA = _KEEP or os.environ.get("BENCH_SCALE_DIR") or tempfile.mkdtemp(prefix="bench-scale-")
os.makedirs(DATA, exist_ok=True)
os.environ["BENCH_SCALE_DIR"] = DATA  # the child processes use the same folder and database
os.environ.setdefault("WORKBENCH_DATA_DIR", DATA)
os.environ.setdefault("DATABASE_URL", f"sqlite:///{DATA}/bench.sqlite3")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Model  # noqa: E402

from annotations.models import (  # noqa: E402
    Annotation,
    AnnotationRevision,
    Annotator,
    ConsensusLabel,
    Item,
    Study,
    User,
)
from common.planner_statistics import statistics_refresh  # noqa: E402
from protocols.schema import protocol_from_dict  # noqa: E402
from tests.benchmarks.backend_cpu import backend_cpu  # noqa: E402

OPTIONS = ["a", "b", "c", "d", "e"]


# ---------------------------------------------------------------- fixtures (not the measured code)


def _insert(model: type[Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Raw multi-row insert of a fixture: COPY on PostgreSQL, executemany on SQLite."""
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    count = 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
        else:
            sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
            batch: list[Sequence[Any]] = []
            for row in rows:
                batch.append(row)
                if len(batch) >= 50_000:
                    cursor.executemany(sql, batch)
                    count += len(batch)
                    batch = []
            cursor.executemany(sql, batch)
            count += len(batch)
    return count


def _now() -> Any:
    return connection.ops.adapt_datetimefield_value(dt.datetime.now(dt.UTC))


def _owner() -> User:
    owner, _ = User.objects.get_or_create(username="bench-scale", defaults={"role": User.Role.RESEARCHER})
    return owner


def _study(name: str, questions: int) -> Study:
    protocol = protocol_from_dict(
        {
            "name": name,
            "unit": "image",
            "questions": [
                {"key": f"q{i}", "kind": "single", "prompt": f"question {i}", "options": OPTIONS}
                for i in range(questions)
            ],
        }
    )
    return Study.objects.create(owner=_owner(), name=name, protocol=protocol.to_dict())


def _items(study: Study, count: int) -> list[int]:
    Item.objects.bulk_create(
        (
            Item(
                study=study,
                external_id=f"i{n}",
                kind="image",
                is_reference=True,
                prompt=f"a photo of a person number {n}",
                model_name="bench-model",
                condition=f"gender:{'fm'[n % 2]}",
                seed=n,
            )
            for n in range(count)
        ),
        batch_size=5000,
    )
    return list(Item.objects.filter(study=study).order_by("id").values_list("id", flat=True))


def _annotations(study: Study, item_ids: list[int], annotators: list[Annotator], questions: int) -> int:
    """Every annotator answers every question of every item; humans copy a hidden truth 70% of the time."""
    rng = random.Random(0)
    now = _now()

    def rows() -> Iterable[Sequence[Any]]:
        for question in range(questions):
            key = f"q{question}"
            for item_id in item_ids:
                truth = rng.choice(OPTIONS)
                for annotator in annotators:
                    value = truth if rng.random() < 0.7 else rng.choice(OPTIONS)
                    yield (study.pk, item_id, annotator.pk, key, json.dumps(value), "", 1200, "api", now, now)

    columns = ["study_id", "item_id", "annotator_id", "question_key", "value", "reason", "time_spent_ms"]
    return _insert(Annotation, [*columns, "source", "created_at", "updated_at"], rows())


def _fixture_study(name: str, items: int, questions: int, humans: int, machines: int) -> tuple[Study, bool]:
    existing = Study.objects.filter(name=name).first()
    if existing is not None:
        return existing, False
    study = _study(name, questions)
    item_ids = _items(study, items)
    annotators = [
        Annotator.objects.create(kind="human", study=study, name=f"h{i}") for i in range(humans)
    ] + [Annotator.objects.create(kind="machine", name=f"{name}-m{i}", version="1") for i in range(machines)]
    count = _annotations(study, item_ids, annotators, questions)
    # As every import path does after a bulk load (common.planner_statistics): without it PostgreSQL
    # plans the report's annotator probe for a never-analysed annotator table (1-2 s more server CPU).
    statistics_refresh(Item, Annotation, Annotator, rows=count)
    return study, True


def _export_extras(study: Study) -> None:
    """A consensus label per item and question (the annotations that agree with the plurality as its
    support) and a revision on every 100th annotation: the parts of an export besides annotations."""
    now = _now()
    votes: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for pk, item_id, key, value in (
        Annotation.objects.filter(study=study)
        .values_list("id", "item_id", "question_key", "value")
        .iterator()
    ):
        votes.setdefault((item_id, key), []).append((pk, value))

    def labels() -> Iterable[Sequence[Any]]:
        for (item_id, key), answers in votes.items():
            values = [value for _pk, value in answers]
            top = max(set(values), key=values.count)
            support = [pk for pk, value in answers if value == top]
            yield (
                study.pk, item_id, key, json.dumps(top), True, "majority", "{}", json.dumps(support),
                len(support) / len(answers), "", len(answers), "", now,
            )  # fmt: skip

    columns = ["study_id", "item_id", "question_key", "value", "resolved", "rule", "params", "support"]
    _insert(ConsensusLabel, [*columns, "confidence", "reason", "n_votes", "note", "computed_at"], labels())
    # Read before the COPY starts: a query on the connection that is in COPY waits for it forever.
    ids = list(Annotation.objects.filter(study=study).order_by("id").values_list("id", flat=True))
    revisions = ((pk, json.dumps("e"), "", now) for n, pk in enumerate(ids) if n % 100 == 0)
    _insert(AnnotationRevision, ["annotation_id", "value", "reason", "replaced_at"], revisions)
    statistics_refresh(ConsensusLabel, AnnotationRevision, rows=len(votes))


def _delete_study(study: Study) -> None:
    """Delete a benchmark study without Django's collector loading a million rows."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM annotations_item WHERE study_id = %s", [study.pk])
    study.delete()


# ---------------------------------------------------------------- the measured runs (child processes)


def _server_cpu() -> float:
    """CPU seconds the PostgreSQL backend serving this connection has used (it runs on this machine);
    0 on SQLite, whose work is the process's own."""
    if connection.vendor != "postgresql":
        return 0.0
    cpu = backend_cpu()
    return float("nan") if cpu is None else cpu


def _measure(run: Callable[[], str], profile: bool) -> dict[str, Any]:
    server_started = _server_cpu()
    started, cpu_started = time.perf_counter(), time.process_time()
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        summary = profiler.runcall(run)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    else:
        summary = run()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "seconds": seconds,
        "cpu": cpu,
        "server_cpu": _server_cpu() - server_started,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "summary": summary,
    }


def _child_import(args: argparse.Namespace) -> dict[str, Any]:
    from annotations.interchange.item_import import items_import

    study = Study.objects.get(pk=args.study)

    def run() -> str:
        report = items_import(study=study, address=Path(args.path))
        return f"{report.created} items created, {report.references} references"

    return _measure(run, args.profile)


def _child_export(args: argparse.Namespace) -> dict[str, Any]:
    from django.core.files.storage import default_storage

    from annotations.downloads import streaming_export
    from annotations.interchange.exports import export_job_run
    from annotations.models import ExportJob

    study = Study.objects.get(pk=args.study)
    if args.how[0] == "job":

        def run() -> str:
            job = ExportJob.objects.create(study=study, requested_by=study.owner, format=args.format)
            job = export_job_run(job_id=job.pk)
            size = default_storage.size(job.file.name) if job.file else 0
            if job.file:
                default_storage.delete(job.file.name)
            return f"job {job.status}, {size / 2**20:.0f} MiB file {job.error}"

    else:

        def run() -> str:
            response = streaming_export(study, args.format)
            size = lines = 0
            for chunk in response:
                size += len(chunk)
                lines += 1
            return f"{type(response).__name__}, {lines} chunks, {size / 2**20:.0f} MiB"

    return _measure(run, args.profile)


def _child_agreement(args: argparse.Namespace) -> dict[str, Any]:
    from annotations.selectors.agreement import agreement_report

    study = Study.objects.get(pk=args.study)

    def run() -> str:
        report = agreement_report(study=study, n_resamples=1000)
        first = report["questions"][0]["humans"][0]
        return f"q0 alpha {first['value']:.3f} [{first['ci_low']:.3f}, {first['ci_high']:.3f}]"

    return _measure(run, args.profile)


def _child(args: argparse.Namespace) -> None:
    runner = {"import": _child_import, "export": _child_export, "agreement": _child_agreement}[args.command]
    print("RESULT " + json.dumps(runner(args)), flush=True)


def _spawn(command: str, extra: list[str], profile: bool) -> dict[str, Any]:
    connection.close()  # nothing of this process's stays open while the child works
    argv = [sys.executable, str(Path(__file__).resolve()), command, "--child", *extra]
    if profile:
        argv.append("--profile")
    result = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy(), check=False)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"the measured run failed ({result.returncode})")
    lines = result.stdout.splitlines()
    if profile:
        print("\n".join(line for line in lines if not line.startswith("RESULT ")))
    return dict(json.loads(next(line for line in lines if line.startswith("RESULT "))[7:]))


def _line(label: str, measured: dict[str, Any]) -> None:
    print(
        f"{label}: {measured['seconds']:.1f} s ({measured['cpu']:.1f} s CPU"
        + (f" + {measured['server_cpu']:.1f} s PostgreSQL CPU" if measured["server_cpu"] else "")
        + "), "
        f"peak RSS {measured['peak_rss_mib']:.0f} MiB; {measured['summary']}",
        flush=True,
    )


# ---------------------------------------------------------------- the commands


def bench_import(args: argparse.Namespace) -> None:
    path = Path(DATA) / f"manifest-{args.items}.{args.manifest}"
    if not path.exists():
        with path.open("w", encoding="utf-8", newline="") as handle:
            if args.manifest == "csv":
                handle.write("external_id,prompt,model,condition,seed,source\n")
                for n in range(args.items):
                    handle.write(
                        f"ref-{n},a photo of a person number {n},model-x,gender:{'fm'[n % 2]},{n},web\n"
                    )
            else:
                for n in range(args.items):
                    record = {
                        "external_id": f"ref-{n}",
                        "prompt": f"a photo of a person number {n}",
                        "model": "model-x",
                        "condition": f"gender:{'fm'[n % 2]}",
                        "seed": n,
                        "source": "web",
                    }
                    handle.write(json.dumps(record) + "\n")
    print(f"manifest {path.name}: {args.items} rows, {path.stat().st_size / 2**20:.0f} MiB")
    study = _study(f"bench-import-{time.time_ns()}", 1)
    try:
        measured = _spawn("import", ["--study", str(study.pk), "--path", str(path)], args.profile)
        _line(f"import {args.items} reference items from {args.manifest}", measured)
    finally:
        _delete_study(study)


def bench_export(args: argparse.Namespace) -> None:
    items = args.annotations // 10
    started = time.perf_counter()
    study, built = _fixture_study(f"bench-export-{args.annotations}", items, 2, 5, 0)
    if built:
        _export_extras(study)
    count = Annotation.objects.filter(study=study).count()
    print(f"study {study.pk}: {count} annotations ({'built' if built else 'reused'} in "
          f"{time.perf_counter() - started:.0f} s)")  # fmt: skip
    for fmt in args.formats:
        for how in args.how:
            measured = _spawn(
                "export", ["--study", str(study.pk), "--format", fmt, "--how", how], args.profile
            )
            _line(f"export {fmt} via {how}", measured)


def bench_agreement(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    study, built = _fixture_study(
        f"bench-agreement-{args.items}x{args.questions}", args.items, args.questions, 3, 2
    )
    count = Annotation.objects.filter(study=study).count()
    print(f"study {study.pk}: {count} annotations ({'built' if built else 'reused'} in "
          f"{time.perf_counter() - started:.0f} s)")  # fmt: skip
    for _ in range(args.repeats):
        _line("agreement report", _spawn("agreement", ["--study", str(study.pk)], args.profile))


def _db_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sqlite_version()" if connection.vendor == "sqlite" else "SHOW server_version")
        return str(cursor.fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {
        "import": sub.add_parser("import"),
        "export": sub.add_parser("export"),
        "agreement": sub.add_parser("agreement"),
    }
    for command in commands.values():
        command.add_argument("--keep", help="a folder for the database and files; a fixture there is reused")
        command.add_argument("--profile", action="store_true", help="print the 25 costliest functions")
        command.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
        command.add_argument("--study", type=int, help=argparse.SUPPRESS)
    commands["import"].add_argument("--items", type=int, default=1_000_000)
    commands["import"].add_argument("--manifest", choices=["csv", "jsonl"], default="csv")
    commands["import"].add_argument("--path", help=argparse.SUPPRESS)
    commands["export"].add_argument("--annotations", type=int, default=1_000_000)
    commands["export"].add_argument(
        "--formats", nargs="+", choices=["jsonl", "csv"], default=["jsonl", "csv"]
    )
    commands["export"].add_argument("--how", nargs="+", choices=["job", "stream"], default=["job", "stream"])
    commands["export"].add_argument("--format", help=argparse.SUPPRESS)
    commands["agreement"].add_argument("--items", type=int, default=100_000)
    commands["agreement"].add_argument("--questions", type=int, default=10)
    commands["agreement"].add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    call_command("migrate", verbosity=0)
    load = os.getloadavg()
    print(
        f"$ {' '.join([Path(sys.executable).name, *sys.argv])}\n"
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {connection.vendor} {_db_version()}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )
    {"import": bench_import, "export": bench_export, "agreement": bench_agreement}[args.command](args)
    load = os.getloadavg()
    print(f"load average afterwards {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
