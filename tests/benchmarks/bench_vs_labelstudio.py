"""The workbench against Label Studio: claim-and-submit cycles per second, one client, back to back.

Run (one command; the first run installs Label Studio into its own virtualenv, minutes):
    .venv/bin/python -m tests.benchmarks.bench_vs_labelstudio --seconds 20
With DATABASE_URL=postgres://... set, the workbench on PostgreSQL runs too (a fresh study per round in
that database; nothing else is touched).

Label Studio (``--ls-version``, default 1.23.2) is installed with pip into ``var/bench/ls-venv``, never
into the project's environment, and that virtualenv is reused when it already has that version. Each
server runs on gunicorn with the same flags (``--workers`` x ``--threads``, gthread) on 127.0.0.1:

- Label Studio on SQLite in a fresh data folder under ``var/bench/`` (its own ``migrate``; a migrated
  database is cached in ``var/bench/ls-migrated.sqlite3`` for the next run), DEBUG off, an owner and
  ``--annotators`` annotator accounts with API tokens in one organisation; per round a project with
  the workbench's example questions (one single choice, one multi choice), ``--items`` tasks,
  ``maximum_annotations = --overlap`` and sequential sampling, created and imported through its API;
- the workbench as docs/deploy.md starts it (``workbench.wsgi``), on the embedded SQLite default in a
  fresh data folder, and on PostgreSQL when DATABASE_URL is set; per round a study with the same
  questions, items and overlap, and the same number of annotator accounts with tokens.

Every client thread is one annotator with its own keep-alive HTTP connection (``http.client``, the
same code for both servers) and loops: claim the next item (Label Studio: ``GET
/api/projects/ID/next/``; workbench: ``POST /api/studies/ID/assignments/next/``), then submit an
answer to it (``POST /api/tasks/ID/annotations/``; ``POST /api/assignments/ID/submit/``), with no
think time. For each N in ``--annotators`` the servers run one after another (alternating, so a
change in the machine's load hits all of them alike), ``--rounds`` times. Afterwards each
application's own database says how many answers every item got: an item with more than the overlap
is over-filled. The table gives cycles per second, p50/p95/p99 of every request (claims and submits
together), errors, over-filled items, and the workbench's ratio to Label Studio at each N.
Clients and servers share the machine's cores: report the load average beside the figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "var" / "bench"
LS_VERSION = "1.23.2"

LS_LABEL_CONFIG = """<View>
  <Image name="image" value="$image"/>
  <Choices name="gender" toName="image" choice="single" showInline="true" required="true">
    <Choice value="male"/><Choice value="female"/>
  </Choices>
  <Choices name="attributes" toName="image" choice="multiple" showInline="true">
    <Choice value="hat"/><Choice value="glasses"/><Choice value="beard"/><Choice value="none_of_the_above"/>
  </Choices>
</View>"""
LS_RESULT = [
    {"from_name": "gender", "to_name": "image", "type": "choices", "value": {"choices": ["female"]}},
    {"from_name": "attributes", "to_name": "image", "type": "choices", "value": {"choices": ["hat"]}},
]
WORKBENCH_ANSWERS = {
    "answers": {
        "gender": {"value": "female"},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }
}

# Run inside Label Studio's own virtualenv (its Django project): the owner, the annotators and tokens.
LS_ACCOUNTS_SCRIPT = """
import json, os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from organizations.functions import create_organization
from organizations.models import OrganizationMember
from rest_framework.authtoken.models import Token
from users.models import User

count = int(sys.argv[1])
PASSWORD = "bench-pass-123"
owner = User.objects.create_user(email="owner@bench.invalid", username="bench-owner", password=PASSWORD)
org = create_organization(title="bench", created_by=owner, legacy_api_tokens_enabled=True)
owner.active_organization = org
owner.save(update_fields=["active_organization"])
tokens = []
for index in range(count):
    user = User.objects.create_user(
        email=f"annotator{index}@bench.invalid", username=f"bench-annotator-{index}", password=PASSWORD
    )
    OrganizationMember.objects.create(user=user, organization=org)
    user.active_organization = org
    user.save(update_fields=["active_organization"])
    tokens.append(Token.objects.get_or_create(user=user)[0].key)
owner_token = Token.objects.get_or_create(user=owner)[0].key
print("ACCOUNTS " + json.dumps({"owner": owner_token, "annotators": tokens}))
"""


# ---------------------------------------------------------------- pure helpers (tests/benchmarks/...)


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0-100) of ``values``; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def over_filled(counts: dict[Any, int], overlap: int) -> int:
    """How many items got more answers than the overlap allows."""
    return sum(1 for count in counts.values() if count > overlap)


@dataclass
class Result:
    server: str
    n: int
    seconds: float
    cycles: int
    latencies: list[float] = field(default_factory=list)  # every request, claims and submits
    errors: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.cycles / self.seconds if self.seconds > 0 else 0.0


def format_table(results: list[Result], baseline: str, filling: dict[str, tuple[int, int]]) -> str:
    """One line per server and N (rounds pooled: cycles over seconds, the spread of the rounds, request
    percentiles over every request), the ratio of every other server to ``baseline`` at each N, and per
    server the over-filled items and the most answers one item got (``filling``: server -> both)."""
    pooled: dict[tuple[str, int], list[Result]] = {}
    for result in results:
        pooled.setdefault((result.server, result.n), []).append(result)
    lines = [
        f"{'server':<24} {'N':>3} {'cycles/s':>9} {'(min-max)':>13} {'p50/p95/p99 ms':>16} {'p99/p50':>7} "
        f"{'errors':>6}"
    ]
    rates: dict[tuple[str, int], float] = {}
    for (server, n), runs in pooled.items():
        seconds = sum(run.seconds for run in runs)
        rates[server, n] = sum(run.cycles for run in runs) / seconds if seconds > 0 else 0.0
        latencies = [value for run in runs for value in run.latencies]
        spread = f"{min(run.per_second for run in runs):.1f}-{max(run.per_second for run in runs):.1f}"
        quantiles = "/".join(f"{percentile(latencies, q) * 1000:.0f}" for q in (50, 95, 99))
        errors = sum(len(run.errors) for run in runs)
        tail = percentile(latencies, 99) / percentile(latencies, 50) if latencies else float("nan")
        lines.append(
            f"{server:<24} {n:>3} {rates[server, n]:>9.1f} {spread:>13} {quantiles:>16} {tail:>7.1f} "
            f"{errors:>6}"
        )
    for (server, n), rate in rates.items():
        base = rates.get((baseline, n))
        if server != baseline and base:
            lines.append(f"ratio {server} / {baseline} at N={n}: {rate / base:.1f}x")
    for server, (filled, most) in filling.items():
        lines.append(f"{server}: over-filled items {filled}, most answers on one item {most}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the client (the same for both servers)


class Client:
    """One annotator's keep-alive HTTP connection; reconnects once when the server closed it."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        payload = None if body is None else json.dumps(body).encode()
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=payload, headers=self.headers)
                response = self.connection.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.connection.close()


@dataclass
class Target:
    """A running server and how to claim and submit on it."""

    name: str
    port: int
    claim: Callable[[Client], tuple[int, int | None, bytes]]  # status, id to submit (None: nothing), body
    submit: Callable[[Client, int], tuple[int, bytes]]
    ok_submit: int


def labelstudio_target(name: str, port: int, project: int) -> Target:
    def claim(client: Client) -> tuple[int, int | None, bytes]:
        status, body = client.request("GET", f"/api/projects/{project}/next/")
        return status, (json.loads(body)["id"] if status == 200 else None), body

    def submit(client: Client, task: int) -> tuple[int, bytes]:
        payload = {"result": LS_RESULT, "lead_time": 1.0, "project": project}
        return client.request("POST", f"/api/tasks/{task}/annotations/?project={project}", payload)

    return Target(name, port, claim, submit, ok_submit=201)


def workbench_target(name: str, port: int, study: int) -> Target:
    def claim(client: Client) -> tuple[int, int | None, bytes]:
        status, body = client.request("POST", f"/api/studies/{study}/assignments/next/")
        return status, (json.loads(body)["id"] if status == 200 else None), body

    def submit(client: Client, assignment: int) -> tuple[int, bytes]:
        return client.request("POST", f"/api/assignments/{assignment}/submit/", WORKBENCH_ANSWERS)

    return Target(name, port, claim, submit, ok_submit=200)


def drive(target: Target, tokens: list[str], seconds: float) -> Result:
    """``len(tokens)`` annotators claim and submit back to back on ``target`` for ``seconds``."""
    n = len(tokens)
    latencies: list[list[float]] = [[] for _ in range(n)]
    cycles = [0] * n
    errors: list[str] = []
    barrier = threading.Barrier(n + 1)
    stop = [0.0]

    def annotator(index: int) -> None:
        client = Client(target.port, tokens[index])
        mine = latencies[index]
        barrier.wait()
        try:
            while time.monotonic() < stop[0]:
                t0 = time.perf_counter()
                status, claimed, body = target.claim(client)
                t1 = time.perf_counter()
                if claimed is None:
                    errors.append(f"claim {status}: {body[:160]!r}")
                    return
                status, body = target.submit(client, claimed)
                t2 = time.perf_counter()
                if status != target.ok_submit:
                    errors.append(f"submit {status}: {body[:160]!r}")
                    return
                mine += [t1 - t0, t2 - t1]
                cycles[index] += 1
        except (OSError, http.client.HTTPException, ValueError) as error:
            errors.append(f"{type(error).__name__}: {error}")
        finally:
            client.close()

    threads = [threading.Thread(target=annotator, args=(index,)) for index in range(n)]
    for thread in threads:
        thread.start()
    stop[0] = time.monotonic() + seconds
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return Result(
        target.name, n, elapsed, sum(cycles), [value for part in latencies for value in part], errors
    )


# ---------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gunicorn_flags(
    port: int, workers: int, threads: int, *, worker_class: str = "gthread", keep_alive: int = 30
) -> list[str]:
    """gunicorn's flags for every benchmark that starts the workbench (or Label Studio) on gunicorn."""
    return [
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--worker-class",
        worker_class,
        "--timeout",
        "120",
        "--keep-alive",
        str(keep_alive),
        "--log-level",
        "warning",
    ]


def start_server(
    command: list[str], env: dict[str, str], cwd: Path, port: int, health: str
) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(command, cwd=cwd, env=env)
    deadline = time.monotonic() + 180  # a loaded machine takes a while to import Django four times
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"{command[0]} exited with {server.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", health)
            if connection.getresponse().status < 500:
                return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError(f"{command[0]} did not answer on port {port}")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


# ---------------------------------------------------------------- Label Studio


def labelstudio_python(venv: Path, version: str) -> Path:
    """Label Studio's own virtualenv: reused when it has ``version``, otherwise made with pip."""
    python = venv / "bin" / "python"
    if python.exists():
        check = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('label-studio'))"],
            capture_output=True,
            text=True,
        )
        if check.returncode == 0 and check.stdout.strip() == version:
            return python
    print(f"installing label-studio=={version} and gunicorn into {venv} (minutes) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"label-studio=={version}", "gunicorn"], check=True
    )
    return python


def labelstudio_env(python: Path, data_dir: Path) -> tuple[dict[str, str], Path]:
    site = subprocess.run(
        [str(python), "-c", "import label_studio, os; print(os.path.dirname(label_studio.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO", "DATABASE", "WORKBENCH", "CELERY", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "core.settings.label_studio",
            "DJANGO_DB": "sqlite",
            "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
            "DATABASE_NAME": str(data_dir / "label_studio.sqlite3"),
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "COLLECT_ANALYTICS": "false",
            "LATEST_VERSION_CHECK": "false",
        }
    )
    return env, Path(site)


def labelstudio_prepare(
    python: Path, data_dir: Path, annotators: int
) -> tuple[dict[str, str], Path, dict[str, Any]]:
    data_dir.mkdir(parents=True, exist_ok=True)
    env, site = labelstudio_env(python, data_dir)
    cached = BENCH_DIR / "ls-migrated.sqlite3"
    if cached.exists():
        shutil.copy(cached, data_dir / "label_studio.sqlite3")
    subprocess.run(
        [str(python), "manage.py", "migrate", "--noinput", "-v", "0"], cwd=site, env=env, check=True
    )
    if not cached.exists():
        shutil.copy(data_dir / "label_studio.sqlite3", cached)
    out = subprocess.run(
        [str(python), "-c", LS_ACCOUNTS_SCRIPT, str(annotators)],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    accounts = json.loads(next(line for line in out.splitlines() if line.startswith("ACCOUNTS "))[9:])
    return env, site, accounts


def labelstudio_project(port: int, owner_token: str, items: int, overlap: int, title: str) -> int:
    client = Client(port, owner_token)
    status, body = client.request(
        "POST",
        "/api/projects/",
        {
            "title": title,
            "label_config": LS_LABEL_CONFIG,
            "maximum_annotations": overlap,
            "sampling": "Sequential sampling",
            "show_skip_button": False,
        },
    )
    if status != 201:
        raise RuntimeError(f"Label Studio refused the project: {status} {body[:300]!r}")
    project = int(json.loads(body)["id"])
    tasks = [{"image": f"https://example.invalid/{title}/{index}.png"} for index in range(items)]
    status, body = client.request("POST", f"/api/projects/{project}/import", tasks)
    if status != 201:
        raise RuntimeError(f"Label Studio refused the import: {status} {body[:300]!r}")
    client.close()
    return project


def labelstudio_counts(database: Path, project: int) -> dict[int, int]:
    with sqlite3.connect(database, timeout=60) as connection:
        rows = connection.execute(
            "SELECT task_id, COUNT(*) FROM task_completion WHERE project_id = ? AND was_cancelled = 0 "
            "GROUP BY task_id",
            (project,),
        ).fetchall()
    return {int(task): int(count) for task, count in rows}


# ---------------------------------------------------------------- the workbench (set up in a child process)


def workbench_env(database_url: str | None, data_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(
        {
            "WORKBENCH_DATA_DIR": str(data_dir),
            "WORKBENCH_THROTTLE_USER": "10000000/minute",
            "DJANGO_SETTINGS_MODULE": "workbench.settings",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def workbench_call(env: dict[str, str], *args: str) -> Any:
    """Runs this module's ``_workbench`` command with ``env`` (its own Django set-up) and reads its JSON."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.bench_vs_labelstudio", "_workbench", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def _workbench_command(argv: list[str]) -> int:
    import django

    sys.path.insert(0, str(ROOT))
    django.setup()
    from django.core.management import call_command
    from django.db.models import Count

    from annotations.models import Assignment
    from tests.benchmarks.bench_annotation import make_study

    action, *rest = argv
    if action == "migrate":
        call_command("migrate", verbosity=0)
        result: Any = "ok"
    elif action == "study":
        items, annotators, overlap, tag = int(rest[0]), int(rest[1]), int(rest[2]), rest[3]
        study_id, tokens = make_study(annotators, items, f"vs-{tag}", overlap=overlap)
        result = {"study": study_id, "tokens": tokens}
    elif action == "counts":
        rows = (
            Assignment.objects.filter(study_id=int(rest[0]), status="submitted")
            .values("item_id")
            .annotate(n=Count("id"))
            .values_list("item_id", "n")
        )
        result = {str(item): n for item, n in rows}
    else:
        raise SystemExit(f"unknown action {action}")
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- main


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    make_round: Callable[[str], tuple[Target, list[str], Callable[[], dict[Any, int]]]]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_workbench"]:
        return _workbench_command(argv[1:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--annotators", default="1,8,32", help="comma-separated N values")
    parser.add_argument("--seconds", type=float, default=20.0, help="per server and N")
    parser.add_argument(
        "--rounds", type=int, default=1, help="times each N runs on each server (alternating)"
    )
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--ls-version", default=LS_VERSION)
    parser.add_argument("--ls-venv", type=Path, default=BENCH_DIR / "ls-venv")
    parser.add_argument(
        "--servers",
        default="labelstudio,workbench-sqlite,workbench-postgres",
        help="which to run, in this order: labelstudio, workbench-sqlite, workbench-sqlite-noqueue "
        "(SQLite without the write queue), workbench-postgres (only with DATABASE_URL=postgres://...)",
    )
    args = parser.parse_args(argv)
    levels = [int(value) for value in args.annotators.split(",")]
    most = max(levels)
    wanted = args.servers.split(",")
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith("postgres"):
        wanted = [name for name in wanted if name != "workbench-postgres"]
    session = BENCH_DIR / f"vs-{time.strftime('%Y%m%d-%H%M%S')}"
    servers: list[Server] = []
    flags = lambda port: gunicorn_flags(port, args.workers, args.threads)  # noqa: E731

    try:
        if "labelstudio" in wanted:
            python = labelstudio_python(args.ls_venv, args.ls_version)
            ls_env, site, accounts = labelstudio_prepare(python, session / "labelstudio", most)
            port = free_port()
            gunicorn = str(python.parent / "gunicorn")
            process = start_server(
                [gunicorn, "core.wsgi:application", *flags(port)], ls_env, site, port, "/health"
            )
            database = Path(ls_env["DATABASE_NAME"])

            def ls_round(tag: str, port: int = port, accounts: dict[str, Any] = accounts) -> Any:
                project = labelstudio_project(
                    port, accounts["owner"], args.items, args.overlap, f"bench {tag}"
                )
                return (
                    labelstudio_target("labelstudio", port, project),
                    accounts["annotators"],
                    lambda: labelstudio_counts(database, project),
                )

            servers.append(Server("labelstudio", process, port, ls_round))
        workbenches = (
            ("workbench-sqlite", None),
            ("workbench-sqlite-noqueue", None),  # the write queue off (docs/deploy.md), to compare
            ("workbench-postgres", database_url),
        )
        for name, url in workbenches:
            if name not in wanted:
                continue
            env = workbench_env(url, session / name)
            env["WORKBENCH_SQLITE_WRITE_QUEUE"] = "false" if name.endswith("-noqueue") else "true"
            (session / name).mkdir(parents=True, exist_ok=True)
            workbench_call(env, "migrate")
            port = free_port()
            command = [str(ROOT / ".venv/bin/gunicorn"), "workbench.wsgi", *flags(port)]
            process = start_server(command, env, ROOT, port, "/healthz/")

            def wb_round(tag: str, port: int = port, env: dict[str, str] = env, name: str = name) -> Any:
                made = workbench_call(env, "study", str(args.items), str(most), str(args.overlap), tag)
                study = made["study"]
                return (
                    workbench_target(name, port, study),
                    made["tokens"],
                    lambda: workbench_call(env, "counts", str(study)),
                )

            servers.append(Server(name, process, port, wb_round))

        print(
            f"{platform.node()}: {os.cpu_count()} cores, python {platform.python_version()}, "
            f"Label Studio {args.ls_version}; gunicorn {args.workers} workers x {args.threads} threads "
            "(gthread) "
            f"for every server; {args.items} items, overlap {args.overlap}, {args.seconds:g} s per run, "
            f"{args.rounds} round(s); load average at start {os.getloadavg()}",
            flush=True,
        )
        results: list[Result] = []
        filling: dict[str, tuple[int, int]] = {}
        for round_index in range(args.rounds):
            rounds = {server.name: server.make_round(f"{session.name}-{round_index}") for server in servers}
            for server in servers:  # warm-up, not reported: each worker imports and connects first
                target, tokens, _ = rounds[server.name]
                drive(target, tokens[: min(8, len(tokens))], 3)
            for n in levels:
                for server in servers:
                    target, tokens, _ = rounds[server.name]
                    result = drive(target, tokens[:n], args.seconds)
                    print(
                        f"  round {round_index + 1} {server.name:<24} N={n:>2}: "
                        f"{result.per_second:6.1f} cycles/s, "
                        f"p99 {percentile(result.latencies, 99) * 1000:.0f} ms, errors {len(result.errors)}, "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    if result.errors:
                        print(f"    first errors: {sorted(set(result.errors))[:3]}", flush=True)
                    results.append(result)
            for server in servers:  # every answer of the round, all levels: was any item over-filled?
                per_item = rounds[server.name][2]()
                filled, fullest = filling.get(server.name, (0, 0))
                filling[server.name] = (
                    filled + over_filled(per_item, args.overlap),
                    max(fullest, *per_item.values(), 0),
                )
        print()
        print(format_table(results, "labelstudio", filling))
        print(f"load average at the end {os.getloadavg()}")
    finally:
        for server in servers:
            stop_server(server.process)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
