"""Deploying across hosts (docs/deploy.md, "Separate hosts", "Backup and restore", "Upgrade and
rollback"), checked without Docker or systemd running anything:

- the Makefile installs apart: ``make run`` only requirements.txt (torch pinned first), ``make test``
  the development tools on top; the runtime requirements and the app's code need no development tool;
- the systemd units (web node, CPU worker, GPU worker per GPU) take the queues the settings route to,
  run as the service account with the shared environment file, and pass ``systemd-analyze verify``
  where it is installed;
- deploy/backup.py's round trip puts back the stored files (a bucket on moto's S3 server, or the
  media folder), the secret key (its file, or the service's environment file) and the database
  (SQLite always; PostgreSQL when DATABASE_URL names one), checks every file before writing, and
  writes nothing without --yes;
- deploy/workbench.env.example starts the settings in production with ``check --deploy`` clean.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.s3_server import CREDENTIALS, REGION, S3Bucket, S3Server

ROOT = Path(__file__).resolve().parents[1]
BACKUP = ROOT / "deploy" / "backup.py"
UNITS = ROOT / "deploy" / "systemd"
ENV_EXAMPLE = ROOT / "deploy" / "workbench.env.example"
OWN_PREFIXES = ("DJANGO_", "WORKBENCH_", "DATABASE_URL", "CELERY_", "AWS_", "PG")
DEV_TOOLS = {"pytest", "pytest-django", "mypy", "playwright", "moto", "ruff", "factory-boy", "pre-commit"}
PROJECT_CODE = ["workbench", "common", "metrics", "annotations", "findings", "generation", "labelling"]
PROJECT_CODE += ["mitigation", "reports", "manage.py", "deploy"]


# --- The Makefile: runtime and development installed apart -----------------------------------------


def make_plan(target: str, tmp_path: Path) -> list[str]:
    """The commands ``make TARGET`` runs from a fresh clone (a venv that does not exist yet)."""
    # Run under `make test` (CI), the outer make's MAKEFLAGS/MAKELEVEL would make this one print
    # "Entering/Leaving directory" lines: a clean environment and --no-print-directory keep the plan.
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", target, f"VENV={tmp_path / 'fresh-venv'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return [line.strip() for line in result.stdout.splitlines() if line.strip()]


def pip_installs(plan: list[str]) -> list[str]:
    return [line for line in plan if re.search(r"/pip install ", line)]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_installs_what_serving_needs_only(tmp_path) -> None:
    plan = make_plan("run", tmp_path)
    installs = pip_installs(plan)
    torch = next(i for i, line in enumerate(installs) if "torch==2.13.0" in line)
    runtime = next(i for i, line in enumerate(installs) if "-r requirements.txt" in line)
    assert torch < runtime, "torch 2.13.0 (the local CPU build) must come before the requirements"
    assert not any("requirements-dev" in line for line in plan), plan
    assert plan[-1] == "scripts/run.sh"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_adds_the_development_tools_after_the_runtime(tmp_path) -> None:
    for target, last in (("test", "scripts/test.sh"), ("lint", None), ("typecheck", None)):
        plan = make_plan(target, tmp_path)
        installs = pip_installs(plan)
        assert "torch==2.13.0" in installs[1], (target, installs)  # after pip itself, before the rest
        dev = next(i for i, line in enumerate(installs) if "-r requirements-dev.txt" in line)
        runtime = next(i for i, line in enumerate(installs) if "-r requirements.txt" in line)
        assert runtime < dev and "-r requirements.txt -r requirements-dev.txt" in installs[dev], installs
        if last:
            assert plan[-1] == last


def requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[\[<>=!~ ;]", line, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_the_runtime_needs_no_development_tool() -> None:
    runtime = requirement_names(ROOT / "requirements.txt")
    dev = requirement_names(ROOT / "requirements-dev.txt")
    assert DEV_TOOLS <= dev and not (DEV_TOOLS & runtime), DEV_TOOLS & runtime
    assert "requirements-dev" not in (ROOT / "Dockerfile").read_text()  # images carry the runtime only
    imports = re.compile(r"^\s*(?:import|from)\s+(pytest|mypy|playwright|moto|factory|ruff)\b", re.M)
    for top in PROJECT_CODE:
        paths = [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))
        for path in paths:
            found = imports.search(path.read_text())
            assert found is None, f"{path.relative_to(ROOT)} imports {found.group(1) if found else ''}"


# --- systemd units ---------------------------------------------------------------------------------


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys keep their case
    parser.read_string((UNITS / name).read_text())
    return parser


def settings_queues() -> set[str]:
    text = (ROOT / "workbench" / "settings.py").read_text()
    default = re.search(r'^CELERY_TASK_DEFAULT_QUEUE = "(\w+)"', text, re.M)
    assert default is not None
    return {default.group(1), *re.findall(r'\{"queue": "(\w+)"\}', text)}


def test_the_units_are_the_web_node_and_the_two_kinds_of_worker() -> None:
    names = sorted(path.name for path in UNITS.glob("*.service"))
    assert names == ["workbench-web.service", "workbench-worker-cpu.service", "workbench-worker-gpu@.service"]
    queues: set[str] = set()
    for name in names:
        parsed = unit(name)
        assert set(parsed.sections()) == {"Unit", "Service", "Install"}, name
        service = parsed["Service"]
        assert service["User"] == "workbench" and service["Group"] == "workbench", name
        assert service["EnvironmentFile"] == "/etc/workbench/workbench.env", name
        assert service["WorkingDirectory"] == "/srv/workbench/app", name
        assert service["UMask"] == "0077" and service["Restart"] == "on-failure", name
        assert service["ReadWritePaths"] == "/srv/workbench/var" and service["ProtectSystem"] == "strict"
        assert parsed["Install"]["WantedBy"] == "multi-user.target", name
        command = service["ExecStart"].split()
        assert command[0].startswith("/srv/workbench/app/.venv/bin/"), name
        if "celery" in command[0]:
            assert command[1:4] == ["-A", "workbench", "worker"], name
            queues |= set(command[command.index("-Q") + 1].split(","))
    assert queues == settings_queues()

    web = unit("workbench-web.service")["Service"]
    command = web["ExecStart"].split()
    assert command[1] == "workbench.wsgi" and command[command.index("--bind") + 1] == "127.0.0.1:8000"
    run_sh = (ROOT / "scripts" / "run.sh").read_text()
    for flag in (
        "--limit-request-line 8190",
        "--limit-request-fields 100",
        "--limit-request-field_size 8190",
    ):
        assert flag in web["ExecStart"] and flag in run_sh, flag  # the limits of docs/security.md
    assert web["Type"] == "notify"  # gunicorn tells systemd when it is up

    cpu = unit("workbench-worker-cpu.service")["Service"]["ExecStart"].split()
    assert cpu[cpu.index("-Q") + 1] == "celery"
    gpu = unit("workbench-worker-gpu@.service")["Service"]
    command = gpu["ExecStart"].split()
    assert command[command.index("-Q") + 1] == "gpu"
    assert (
        command[command.index("--pool") + 1] == "solo" and command[command.index("--concurrency") + 1] == "1"
    )
    assert "CUDA_VISIBLE_DEVICES=%i" in gpu["Environment"].split()  # one unit per GPU: @0, @1...
    assert "%i" in command[command.index("--hostname") + 1]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_units(tmp_path) -> None:
    """The units as installed on a host whose app lies at this checkout (its .venv has the programs)."""
    env_file = tmp_path / "workbench.env"
    env_file.write_text(ENV_EXAMPLE.read_text())
    copies = []
    for path in sorted(UNITS.glob("*.service")):
        text = path.read_text().replace("/srv/workbench/app", str(ROOT))
        text = text.replace("/etc/workbench/workbench.env", str(env_file))
        copy = tmp_path / path.name.replace("@.service", "@0.service")
        copy.write_text(text)
        copies.append(str(copy))
    for program in ("gunicorn", "celery"):
        if not (ROOT / ".venv" / "bin" / program).exists():
            pytest.skip(f".venv/bin/{program} is not installed")
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *copies], capture_output=True, text=True, timeout=120
    )
    said = [line for line in (result.stdout + result.stderr).splitlines() if "workbench-" in line]
    assert result.returncode == 0 and said == [], result.stdout + result.stderr


# --- deploy/backup.py ------------------------------------------------------------------------------


def clean_env(**values: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(OWN_PREFIXES)}
    env.update(values)
    return env


def run_backup(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BACKUP), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def new_bucket(server: S3Server) -> S3Bucket:
    bucket = S3Bucket(name=f"wb-backup-{uuid.uuid4().hex[:12]}", endpoint_url=server.endpoint_url)
    bucket.client().create_bucket(Bucket=bucket.name)
    return bucket


def bucket_env(bucket: S3Bucket) -> dict[str, str]:
    return {
        "WORKBENCH_S3_BUCKET": bucket.name,
        "WORKBENCH_S3_ENDPOINT_URL": bucket.endpoint_url,
        "WORKBENCH_S3_REGION": REGION,
        "WORKBENCH_S3_ADDRESSING_STYLE": "path",
        **CREDENTIALS,
    }


# Names as the workbench stores them (item images, display versions, exports), binary and empty.
OBJECTS = {
    "items/3/9f2c/image-0.png": (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, "image/png"),
    "items/3/9f2c/display/image-0.webp": (b"RIFF\x00\x00WEBP" + secrets.token_bytes(5000), "image/webp"),
    "exports/study-3/job-7.zip": (secrets.token_bytes(70_000), "application/zip"),
    "exports/empty.jsonl": (b"", "application/jsonl"),
}


def stored(bucket: S3Bucket) -> dict[str, tuple[bytes, str]]:
    client = bucket.client()
    out = {}
    for key in bucket.keys():
        answer = client.get_object(Bucket=bucket.name, Key=key)
        out[key] = (answer["Body"].read(), answer["ContentType"])
    return out


def sqlite_database(path: Path, rows: list[tuple[int, str]]) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE django_migrations (id INTEGER PRIMARY KEY, app TEXT, name TEXT)")
        connection.executemany(
            "INSERT INTO django_migrations (app, name) VALUES (?, ?)",
            [("annotations", "0001_initial"), ("labelling", "0001_initial"), ("annotations", "0002_more")],
        )
        connection.execute("CREATE TABLE judgement (id INTEGER PRIMARY KEY, answer TEXT)")
        connection.executemany("INSERT INTO judgement VALUES (?, ?)", rows)
    connection.close()


def sqlite_rows(path: Path) -> list[tuple[int, str]]:
    connection = sqlite3.connect(path)
    try:
        return [tuple(row) for row in connection.execute("SELECT id, answer FROM judgement ORDER BY id")]
    finally:
        connection.close()


@pytest.fixture
def host(tmp_path) -> dict[str, Any]:
    """An embedded-style host: its data folder with the secret-key file and a SQLite database."""
    data = tmp_path / "var"
    data.mkdir()
    key = secrets.token_urlsafe(50)
    (data / "secret_key").write_text(key)
    database = data / "workbench.sqlite3"
    rows = [(1, "yes"), (2, "no"), (3, "unsure")]
    sqlite_database(database, rows)
    return {"data": data, "key": key, "database": database, "rows": rows}


def test_backup_and_restore_bring_back_the_bucket_the_secret_key_and_sqlite(
    s3_server: S3Server, host: dict[str, Any], tmp_path
) -> None:
    bucket = new_bucket(s3_server)
    for key, (body, content_type) in OBJECTS.items():
        bucket.client().put_object(Bucket=bucket.name, Key=key, Body=body, ContentType=content_type)
    env = clean_env(WORKBENCH_DATA_DIR=str(host["data"]), **bucket_env(bucket))
    out = tmp_path / "backup"
    made = run_backup("backup", "--out", str(out), env=env)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["database"]["engine"] == "sqlite"
    assert manifest["database"]["migrations"] == {"annotations": "0002_more", "labelling": "0001_initial"}
    assert {item["name"] for item in manifest["files"]["objects"]} == set(OBJECTS)
    assert (out / "secret_key").read_text().strip() == host["key"]
    assert f"boto3=={version('boto3')}" in (out / "packages.txt").read_text().splitlines()  # for a rollback
    assert out.stat().st_mode & 0o777 == 0o700 and (out / "secret_key").stat().st_mode & 0o777 == 0o600

    # The host loses everything: objects deleted, one replaced, a new key, rows changed.
    client = bucket.client()
    for key in list(OBJECTS)[:3]:
        client.delete_object(Bucket=bucket.name, Key=key)
    client.put_object(
        Bucket=bucket.name, Key="exports/empty.jsonl", Body=b"changed", ContentType="text/plain"
    )
    client.put_object(Bucket=bucket.name, Key="items/4/new.png", Body=b"after the backup")
    (host["data"] / "secret_key").write_text("another key")
    with sqlite3.connect(host["database"]) as connection:
        connection.execute("DELETE FROM judgement WHERE id = 1")
        connection.execute("UPDATE judgement SET answer = 'changed' WHERE id = 2")
    connection.close()

    # Without --yes: checked, said, nothing written.
    dry = run_backup("restore", str(out), env=env)
    assert dry.returncode == 2 and "nothing written" in dry.stdout, dry.stdout + dry.stderr
    assert (host["data"] / "secret_key").read_text() == "another key"
    # A database that holds tables is replaced only with --clean.
    refused = run_backup("restore", str(out), "--yes", env=env)
    assert refused.returncode == 1 and "--clean" in refused.stderr, refused.stdout + refused.stderr

    restored = run_backup("restore", str(out), "--yes", "--clean", env=env)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    now = stored(bucket)
    assert {key: now[key] for key in OBJECTS} == OBJECTS  # bytes and content types
    assert "items/4/new.png" in now and "1 not in the backup left in place" in restored.stdout
    assert (host["data"] / "secret_key").read_text() == host["key"]
    assert (host["data"] / "secret_key").stat().st_mode & 0o777 == 0o600
    assert sqlite_rows(host["database"]) == host["rows"]
    assert "annotations 0002_more" in restored.stdout  # what a rollback's `migrate` goes back to

    # --prune removes what the backup lacks.
    pruned = run_backup("restore", str(out), "--yes", "--clean", "--prune", "--skip", "database", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert stored(bucket) == OBJECTS


def test_a_backup_restores_onto_a_new_host_with_an_empty_bucket(
    s3_server: S3Server, host: dict[str, Any], tmp_path
) -> None:
    """Another machine: a new bucket, no database file yet, the key in its environment file."""
    old = new_bucket(s3_server)
    for key, (body, content_type) in OBJECTS.items():
        old.client().put_object(Bucket=old.name, Key=key, Body=body, ContentType=content_type)
    service_env = tmp_path / "workbench.env"
    service_env.write_text(f"WORKBENCH_ENV=production\nDJANGO_SECRET_KEY={host['key']}\n")
    env = clean_env(WORKBENCH_DATA_DIR=str(host["data"]), **bucket_env(old))
    out = tmp_path / "backup"
    made = run_backup("backup", "--out", str(out), "--env-file", str(service_env), env=env)
    assert made.returncode == 0, made.stderr
    assert json.loads((out / "manifest.json").read_text())["secret"]["source"] == "DJANGO_SECRET_KEY"
    assert (out / "env").read_text() == service_env.read_text()  # the service's settings come along

    new = new_bucket(s3_server)
    new_data = tmp_path / "new-host"
    new_env_file = tmp_path / "new-host.env"
    new_env_file.write_text("WORKBENCH_ENV=production\nDJANGO_SECRET_KEY=not-the-old-one\nEMAIL_PORT=587\n")
    new_env_file.chmod(0o640)
    env = clean_env(WORKBENCH_DATA_DIR=str(new_data), **bucket_env(new))
    restored = run_backup("restore", str(out), "--yes", "--env-file", str(new_env_file), env=env)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert stored(new) == OBJECTS
    assert sqlite_rows(new_data / "workbench.sqlite3") == host["rows"]
    lines = new_env_file.read_text().splitlines()
    assert lines == ["WORKBENCH_ENV=production", "EMAIL_PORT=587", f"DJANGO_SECRET_KEY={host['key']}"]
    assert new_env_file.stat().st_mode & 0o777 == 0o640


def test_a_media_folder_backup_restores_into_a_bucket_and_altered_files_are_refused(
    s3_server: S3Server, host: dict[str, Any], tmp_path
) -> None:
    media = host["data"] / "media"
    for key, (body, _) in OBJECTS.items():
        (media / key).parent.mkdir(parents=True, exist_ok=True)
        (media / key).write_bytes(body)
    env = clean_env(WORKBENCH_DATA_DIR=str(host["data"]))
    out = tmp_path / "backup"
    made = run_backup("backup", "--out", str(out), "--skip", "database", env=env)
    assert made.returncode == 0, made.stderr
    assert json.loads((out / "manifest.json").read_text())["files"]["kind"] == "media"

    bucket = new_bucket(s3_server)
    env = clean_env(WORKBENCH_DATA_DIR=str(tmp_path / "elsewhere"), **bucket_env(bucket))
    (out / "files" / "exports" / "study-3" / "job-7.zip").write_bytes(b"altered")
    altered = run_backup("restore", str(out), "--yes", env=env)
    assert altered.returncode == 1 and "exports/study-3/job-7.zip" in altered.stderr, altered.stderr
    assert bucket.keys() == [] and not (tmp_path / "elsewhere").exists()  # nothing written

    (out / "files" / "exports" / "study-3" / "job-7.zip").write_bytes(OBJECTS["exports/study-3/job-7.zip"][0])
    moved = run_backup("restore", str(out), "--yes", env=env)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert {key: body for key, (body, _) in stored(bucket).items()} == {k: b for k, (b, _) in OBJECTS.items()}


# --- PostgreSQL (when DATABASE_URL names one) --------------------------------------------------------


def postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else ""


@pytest.fixture
def scratch_databases() -> Iterator[list[str]]:
    """Databases made for this test on DATABASE_URL's server, dropped afterwards: the backup never
    touches the database the test run itself uses."""
    if not postgres_url():
        pytest.skip("DATABASE_URL names no PostgreSQL (CI's second pass sets it): SQLite round trip only")
    for program in ("pg_dump", "pg_restore"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (Debian: apt-get install postgresql-client)")
    import psycopg

    names: list[str] = []
    with psycopg.connect(postgres_url(), autocommit=True) as admin:
        try:
            for _ in range(2):
                names.append(f"wb_backup_{uuid.uuid4().hex[:10]}")
                admin.execute(f'CREATE DATABASE "{names[-1]}"')
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the DATABASE_URL role may not create databases (CREATEDB)")
        yield names
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def database_url(database: str) -> str:
    base, _, rest = postgres_url().rpartition("/")
    query = rest.partition("?")[2]
    return f"{base}/{database}" + (f"?{query}" if query else "")


def postgres_state(url: str) -> tuple[list[tuple[int, str]], list[str]]:
    import psycopg

    with psycopg.connect(url) as connection:
        rows = connection.execute("SELECT id, answer FROM judgement ORDER BY id").fetchall()
        tables = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
    return [tuple(row) for row in rows], [row[0] for row in tables]


def test_backup_and_restore_bring_back_a_postgresql_database(
    scratch_databases: list[str], s3_server: S3Server, host: dict[str, Any], tmp_path
) -> None:
    import psycopg

    live, fresh = (database_url(name) for name in scratch_databases)
    with psycopg.connect(live) as connection:
        connection.execute("CREATE TABLE django_migrations (id serial PRIMARY KEY, app text, name text)")
        connection.execute(
            "INSERT INTO django_migrations (app, name) VALUES ('annotations', '0001_initial'), "
            "('annotations', '0002_more'), ('generation', '0001_initial')"
        )
        connection.execute("CREATE TABLE judgement (id integer PRIMARY KEY, answer text NOT NULL)")
        connection.execute("INSERT INTO judgement VALUES (1, 'yes'), (2, 'no'), (3, 'unsure')")
    before = postgres_state(live)
    bucket = new_bucket(s3_server)
    env = clean_env(WORKBENCH_DATA_DIR=str(host["data"]), DATABASE_URL=live, **bucket_env(bucket))
    out = tmp_path / "backup"
    made = run_backup("backup", "--out", str(out), env=env)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["database"]["engine"] == "postgresql" and (out / "database.dump").stat().st_size > 0
    assert manifest["database"]["migrations"] == {"annotations": "0002_more", "generation": "0001_initial"}

    # An upgrade's migration adds a table and the rows change; the rollback brings back the backup.
    with psycopg.connect(live) as connection:
        connection.execute("CREATE TABLE from_a_newer_migration (id integer)")
        connection.execute("DELETE FROM judgement WHERE id = 3")
    refused = run_backup("restore", str(out), "--yes", env=env)
    assert refused.returncode == 1 and "--clean" in refused.stderr, refused.stderr
    restored = run_backup("restore", str(out), "--yes", "--clean", env=env)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert postgres_state(live) == before  # the newer table is gone too

    # A new host: an empty database.
    env["DATABASE_URL"] = fresh
    onto_new = run_backup("restore", str(out), "--yes", "--skip", "files", "--skip", "secret", env=env)
    assert onto_new.returncode == 0, onto_new.stdout + onto_new.stderr
    assert postgres_state(fresh) == before


# --- The environment file of separate hosts --------------------------------------------------------


def env_example_values() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            assert " #" not in value, f"{key}: systemd would keep the comment in the value"
            values[key] = value
    return values


def test_the_env_example_starts_production_with_check_deploy_clean(tmp_path) -> None:
    values = env_example_values()
    for needed in ("DATABASE_URL", "CELERY_BROKER_URL", "WORKBENCH_CACHE_URL", "WORKBENCH_S3_BUCKET"):
        assert values.get(needed), needed
    values["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)  # the placeholder is refused
    values["WORKBENCH_DATA_DIR"] = str(tmp_path / "var")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean_env(**values),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert not (tmp_path / "var").exists()  # production writes nothing of its own
