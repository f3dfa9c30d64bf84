#!/usr/bin/env python3
"""Back up and restore what a workbench deployment cannot make again: the database, the stored files
(the bucket, or the media folder without one) and the secret key (docs/deploy.md, "Backup and restore").

    .venv/bin/python deploy/backup.py backup --out /srv/backups/workbench-2025-11-29
    .venv/bin/python deploy/backup.py restore /srv/backups/workbench-2025-11-29           # checks, says what
    .venv/bin/python deploy/backup.py restore /srv/backups/workbench-2025-11-29 --yes     # then does it

It reads the workbench's own variables (DATABASE_URL, WORKBENCH_S3_*, AWS_*, WORKBENCH_DATA_DIR,
WORKBENCH_MEDIA_ROOT, DJANGO_SECRET_KEY) from the environment, over those of ``--env-file`` (systemd's
EnvironmentFile, compose's .env), with the workbench's defaults. PostgreSQL goes through ``pg_dump`` /
``pg_restore`` (custom format; the client's major version at least the server's), SQLite through its
online backup; files through boto3 (what ``aws s3 sync`` would do) or a copy of the media folder, each
file's SHA-256 in ``manifest.json``, all checked before a restore writes anything. The manifest also
records the code (git commit, WORKBENCH_IMAGE_TAG, the installed packages in packages.txt) and each
app's last applied migration: what a rollback goes back to. A backup holds the secret key and every
annotation: keep it as private as the database (the folder is made 0700, its files 0600).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

APP_DIR = Path(__file__).resolve().parents[1]
PARTS = ("database", "files", "secret")
MANIFEST = "manifest.json"
FORMAT = 1
CHUNK = 1 << 20
# libpq's own variables for the connection options a DATABASE_URL may carry (?sslmode=require...).
LIBPQ_OPTIONS = {
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "application_name": "PGAPPNAME",
}
# What an object keeps besides its bytes (the app serves files with their content type).
OBJECT_HEADERS = ("ContentType", "ContentDisposition", "ContentEncoding", "CacheControl")


class BackupError(Exception):
    """A refusal or a failure, said to the operator without a traceback."""


# --- Settings --------------------------------------------------------------------------------------


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (systemd EnvironmentFile and compose .env alike): comments, blank lines and
    ``export`` dropped, one pair of surrounding quotes taken off."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


@dataclass(frozen=True)
class Settings:
    """The part of workbench/settings.py a backup needs, with the same defaults."""

    env: Mapping[str, str]

    def get(self, name: str, default: str = "") -> str:
        return self.env.get(name, "") or default

    @property
    def data_dir(self) -> Path:
        return Path(self.get("WORKBENCH_DATA_DIR", str(APP_DIR / "var"))).resolve()

    @property
    def media_root(self) -> Path:
        return Path(self.get("WORKBENCH_MEDIA_ROOT", str(self.data_dir / "media")))

    @property
    def database(self) -> dict[str, Any]:
        import dj_database_url

        url = self.get("DATABASE_URL", f"sqlite:///{self.data_dir / 'workbench.sqlite3'}")
        config: dict[str, Any] = dict(dj_database_url.parse(url))
        return config

    @property
    def bucket(self) -> str:
        return self.get("WORKBENCH_S3_BUCKET")

    def s3_client(self) -> Any:
        import boto3
        from botocore.config import Config

        style = self.get("WORKBENCH_S3_ADDRESSING_STYLE")
        return boto3.client(
            "s3",
            endpoint_url=self.get("WORKBENCH_S3_ENDPOINT_URL") or None,
            region_name=self.get("WORKBENCH_S3_REGION") or None,
            aws_access_key_id=self.get("AWS_ACCESS_KEY_ID") or None,
            aws_secret_access_key=self.get("AWS_SECRET_ACCESS_KEY") or None,
            config=Config(s3={"addressing_style": style}) if style else None,
        )


def load_settings(env_file: Path | None) -> Settings:
    values = read_env_file(env_file) if env_file else {}
    values.update(os.environ)  # as compose: what the shell exports wins over the file
    return Settings(env=values)


# --- Helpers ---------------------------------------------------------------------------------------


def say(message: str) -> None:
    print(message, flush=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def safe_name(name: str) -> PurePosixPath:
    """A stored file's name as a path inside the backup: relative, no ``..``, no empty part."""
    path = PurePosixPath(name)
    if not name or name.startswith("/") or any(part in ("", ".", "..") for part in name.split("/")):
        raise BackupError(f"refusing the stored name {name!r}: not a plain relative name")
    return path


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"


def installed_packages() -> str:
    """``pip freeze`` of this interpreter (what a rollback reinstalls: requirements.txt gives ranges)."""
    from importlib.metadata import distributions

    pins = {f"{dist.metadata['Name']}=={dist.version}" for dist in distributions() if dist.metadata["Name"]}
    return "\n".join(sorted(pins, key=str.lower)) + "\n"


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(APP_DIR), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


# --- Database --------------------------------------------------------------------------------------


def engine_of(config: Mapping[str, Any]) -> str:
    engine = str(config["ENGINE"])
    if engine.endswith(("postgresql", "postgis")):
        return "postgresql"
    if engine.endswith("sqlite3") or engine == "workbench.sqlite_backend":
        return "sqlite"
    raise BackupError(f"no backup for the database engine {engine}")


def libpq_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The connection as libpq's variables: the password never on a command line (``ps`` shows those)."""
    env = dict(os.environ)
    pairs = {
        "PGHOST": config.get("HOST"),
        "PGPORT": config.get("PORT"),
        "PGUSER": config.get("USER"),
        "PGPASSWORD": config.get("PASSWORD"),
        "PGDATABASE": config.get("NAME"),
    }
    for name, variable in LIBPQ_OPTIONS.items():
        pairs[variable] = (config.get("OPTIONS") or {}).get(name)
    env.update({key: str(value) for key, value in pairs.items() if value not in (None, "")})
    return env


def run_client(command: list[str], env: Mapping[str, str]) -> None:
    if shutil.which(command[0]) is None:
        raise BackupError(f"{command[0]} is not installed (Debian: apt-get install postgresql-client)")
    result = subprocess.run(command, env=dict(env), capture_output=True, text=True)
    if result.returncode != 0:
        raise BackupError(f"{command[0]} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")


def postgres_connect(config: Mapping[str, Any]) -> Any:
    import psycopg

    env = libpq_env(config)
    return psycopg.connect(
        host=env.get("PGHOST"),
        port=env.get("PGPORT"),
        user=env.get("PGUSER"),
        password=env.get("PGPASSWORD"),
        dbname=env.get("PGDATABASE"),
        sslmode=env.get("PGSSLMODE"),
        connect_timeout=int(env.get("PGCONNECT_TIMEOUT", "10")),
    )


def last_migrations(rows: list[tuple[str, str]]) -> dict[str, str]:
    """Each app's last applied migration (rows in the order they were applied)."""
    last: dict[str, str] = {}
    for app, name in rows:
        last[app] = name
    return dict(sorted(last.items()))


def database_migrations(engine: str, config: Mapping[str, Any], copy: Path) -> dict[str, str]:
    """The migrations the backup holds: read from the SQLite copy, or from PostgreSQL right after the dump."""
    query = "SELECT app, name FROM django_migrations ORDER BY id"
    if engine == "sqlite":
        connection = sqlite3.connect(copy)
        try:
            return last_migrations(connection.execute(query).fetchall())
        except sqlite3.OperationalError:  # no such table: a database never migrated
            return {}
        finally:
            connection.close()
    with postgres_connect(config) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('django_migrations') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return {}
        cursor.execute(query)
        return last_migrations(cursor.fetchall())


def postgres_tables(config: Mapping[str, Any]) -> list[str]:
    with postgres_connect(config) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
        return [row[0] for row in cursor.fetchall()]


def sqlite_tables(path: Path) -> list[str]:
    if not path.exists() or path.stat().st_size == 0:
        return []
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1").fetchall()
    return [row[0] for row in rows]


def sqlite_copy(source: Path, target: Path) -> None:
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def backup_database(settings: Settings, out: Path) -> dict[str, Any]:
    config = settings.database
    engine = engine_of(config)
    if engine == "sqlite":
        source = Path(config["NAME"])
        if not source.exists():
            raise BackupError(f"no SQLite database at {source}")
        target = out / "database.sqlite3"
        sqlite_copy(source, target)  # consistent while the workbench writes (SQLite's online backup)
    else:
        target = out / "database.dump"
        run_client(["pg_dump", "--format=custom", "--file", str(target)], libpq_env(config))
    entry: dict[str, Any] = {
        "engine": engine,
        "file": target.name,
        "size": target.stat().st_size,
        "sha256": sha256_file(target),
        "migrations": database_migrations(engine, config, target),
    }
    apps = len(entry["migrations"])
    say(f"database: {engine}, {human(entry['size'])} in {target.name}, {apps} apps migrated")
    return entry


def restore_database(settings: Settings, backup: Path, entry: Mapping[str, Any], clean: bool) -> None:
    config = settings.database
    engine = engine_of(config)
    if engine != entry["engine"]:
        raise BackupError(f"the backup holds a {entry['engine']} database, DATABASE_URL names {engine}")
    source = backup / entry["file"]
    if engine == "sqlite":
        target = Path(config["NAME"])
        if sqlite_tables(target) and not clean:
            raise BackupError(f"{target} holds tables: stop the workbench and pass --clean to replace it")
        target.parent.mkdir(parents=True, exist_ok=True)
        sqlite_copy(source, target)  # replaces every page of the target
    else:
        tables = postgres_tables(config)
        if tables and not clean:
            raise BackupError(
                f"database {config['NAME']} holds {len(tables)} tables: restore into an empty database "
                "(dropdb; createdb -O <user>) or stop the workbench and pass --clean"
            )
        if tables:
            # Everything goes, the tables of migrations newer than the backup too: what stays is the backup.
            with postgres_connect(config) as connection:
                connection.execute("DROP SCHEMA public CASCADE")
                connection.execute("CREATE SCHEMA public")
        run_client(
            [
                "pg_restore",
                "--no-owner",
                "--no-privileges",
                "--single-transaction",
                "--exit-on-error",
                "--dbname",
                str(config["NAME"]),
                str(source),
            ],
            libpq_env(config),
        )
    say(f"database: restored into {config['NAME']} ({engine})")


# --- Files: the bucket, or the media folder --------------------------------------------------------


def bucket_names(client: Any, bucket: str) -> Iterator[str]:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            yield str(item["Key"])


def backup_files(settings: Settings, out: Path) -> dict[str, Any]:
    folder = out / "files"
    folder.mkdir()
    objects: list[dict[str, Any]] = []
    if settings.bucket:
        client = settings.s3_client()
        for key in bucket_names(client, settings.bucket):
            path = folder / safe_name(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            answer = client.get_object(Bucket=settings.bucket, Key=key)
            digest = hashlib.sha256()
            with path.open("wb") as handle:
                for block in answer["Body"].iter_chunks(CHUNK):
                    digest.update(block)
                    handle.write(block)
            headers = {name: answer[name] for name in OBJECT_HEADERS if answer.get(name)}
            if answer.get("Metadata"):
                headers["Metadata"] = answer["Metadata"]
            objects.append(
                {"name": key, "size": path.stat().st_size, "sha256": digest.hexdigest(), **headers}
            )
        kind, where = "s3", f"bucket {settings.bucket}"
    else:
        root = settings.media_root
        for source in sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []:
            name = source.relative_to(root).as_posix()
            path = folder / safe_name(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, path)
            objects.append({"name": name, "size": path.stat().st_size, "sha256": sha256_file(path)})
        kind, where = "media", f"media folder {root}"
    total = sum(int(item["size"]) for item in objects)
    say(f"files: {len(objects)} from the {where}, {human(total)}")
    return {"kind": kind, "source": settings.bucket or str(settings.media_root), "objects": objects}


def check_files(backup: Path, entry: Mapping[str, Any]) -> None:
    for item in entry["objects"]:
        path = backup / "files" / safe_name(item["name"])
        if not path.is_file() or sha256_file(path) != item["sha256"]:
            raise BackupError(f"the backup's copy of {item['name']} is missing or altered")


def restore_files(settings: Settings, backup: Path, entry: Mapping[str, Any], prune: bool) -> None:
    objects = entry["objects"]
    names = {item["name"] for item in objects}
    if settings.bucket:
        client = settings.s3_client()
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client.head_bucket(Bucket=settings.bucket)
        except (BotoCoreError, ClientError) as exc:
            raise BackupError(f"bucket {settings.bucket} is not reachable ({exc}); make it first") from exc
        for item in objects:
            extra = {name: item[name] for name in (*OBJECT_HEADERS, "Metadata") if item.get(name)}
            path = backup / "files" / safe_name(item["name"])
            client.upload_file(str(path), settings.bucket, item["name"], ExtraArgs=extra)
        extra_names = [key for key in bucket_names(client, settings.bucket) if key not in names]
        if prune:
            for start in range(0, len(extra_names), 1000):
                batch = [{"Key": key} for key in extra_names[start : start + 1000]]
                client.delete_objects(Bucket=settings.bucket, Delete={"Objects": batch, "Quiet": True})
        where = f"bucket {settings.bucket}"
    else:
        root = settings.media_root
        for item in objects:
            target = root / safe_name(item["name"])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(backup / "files" / safe_name(item["name"]), target)
        extra_paths = [
            p for p in root.rglob("*") if p.is_file() and p.relative_to(root).as_posix() not in names
        ]
        extra_names = [p.relative_to(root).as_posix() for p in extra_paths]
        if prune:
            for path in extra_paths:
                path.unlink()
        where = f"media folder {root}"
    left = "removed" if prune else "left in place (--prune removes them)"
    say(f"files: {len(objects)} restored into the {where}; {len(extra_names)} not in the backup {left}")


# --- The secret key --------------------------------------------------------------------------------


def secret_key_file(settings: Settings, given: Path | None) -> Path:
    return given or settings.data_dir / "secret_key"


def backup_secret(settings: Settings, out: Path, key_file: Path | None) -> dict[str, Any]:
    key = settings.get("DJANGO_SECRET_KEY")
    source = "DJANGO_SECRET_KEY"
    if not key:
        path = secret_key_file(settings, key_file)
        if not path.is_file():
            raise BackupError(f"no DJANGO_SECRET_KEY and no key file at {path}")
        key, source = path.read_text().strip(), str(path)
    (out / "secret_key").write_text(key + "\n")
    say(f"secret key: from {source}")
    return {"file": "secret_key", "source": source, "sha256": hashlib.sha256(key.encode()).hexdigest()}


def restore_secret(
    settings: Settings, backup: Path, entry: Mapping[str, Any], key_file: Path | None, env_file: Path | None
) -> None:
    key = (backup / entry["file"]).read_text().strip()
    if env_file is not None:
        # The key lives in the service's environment file: its DJANGO_SECRET_KEY line is replaced.
        existed = env_file.exists()
        lines = env_file.read_text().splitlines() if existed else []
        kept = [
            line
            for line in lines
            if not line.strip().removeprefix("export ").startswith("DJANGO_SECRET_KEY=")
        ]
        env_file.write_text("\n".join([*kept, f"DJANGO_SECRET_KEY={key}"]) + "\n")  # keeps the file's mode
        if not existed:
            env_file.chmod(0o600)
        say(f"secret key: written into {env_file}")
        return
    path = secret_key_file(settings, key_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key)
    path.chmod(0o600)
    say(f"secret key: written to {path}")
    exported = os.environ.get("DJANGO_SECRET_KEY", "")
    if exported and exported != key:
        say("secret key: DJANGO_SECRET_KEY in this environment differs from the backup's; set it to the")
        say(f"            key in {backup / entry['file']} wherever the services read it")


# --- Commands --------------------------------------------------------------------------------------


def command_backup(args: argparse.Namespace) -> None:
    settings = load_settings(args.env_file)
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        raise BackupError(f"{out} exists and is not empty")
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    out.chmod(0o700)
    parts = [part for part in PARTS if part not in args.skip]
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "code": {
            "git_commit": git_commit(),
            "image_tag": settings.get("WORKBENCH_IMAGE_TAG"),
            "packages": "packages.txt",
        },
    }
    (out / "packages.txt").write_text(installed_packages())
    if "database" in parts:
        manifest["database"] = backup_database(settings, out)
    if "files" in parts:
        manifest["files"] = backup_files(settings, out)
    if "secret" in parts:
        manifest["secret"] = backup_secret(settings, out, args.secret_key_file)
    if args.env_file is not None:
        shutil.copyfile(args.env_file, out / "env")  # the service's settings, to set up a new host
        manifest["env_file"] = {"file": "env", "source": str(args.env_file)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    say(f"backup: {out} ({', '.join(parts)})")


def command_restore(args: argparse.Namespace) -> None:
    settings = load_settings(args.env_file)
    backup: Path = args.backup
    manifest = json.loads((backup / MANIFEST).read_text())
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{backup} is not a backup of this format ({manifest.get('format')})")
    parts = [part for part in PARTS if part not in args.skip and part in manifest]
    # Everything is checked before anything is written.
    if "database" in parts:
        entry = manifest["database"]
        if sha256_file(backup / entry["file"]) != entry["sha256"]:
            raise BackupError(f"{entry['file']} is altered: its SHA-256 is not the manifest's")
    if "files" in parts:
        check_files(backup, manifest["files"])
    say(f"backup {backup}: made {manifest['created_at']} from commit {manifest['code']['git_commit'] or '?'}")
    say(f"checked: {', '.join(parts) or 'nothing'}")
    if not args.yes:
        say("nothing written: stop the web nodes and workers, then run again with --yes")
        raise SystemExit(2)
    if "database" in parts:
        restore_database(settings, backup, manifest["database"], args.clean)
    if "files" in parts:
        restore_files(settings, backup, manifest["files"], args.prune)
    if "secret" in parts:
        restore_secret(settings, backup, manifest["secret"], args.secret_key_file, args.env_file)
    migrations = manifest.get("database", {}).get("migrations", {})
    if migrations:
        say("migrations of the backup: " + ", ".join(f"{app} {name}" for app, name in migrations.items()))


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = main.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--env-file", type=Path, help="KEY=VALUE file of the service (systemd, compose .env)"
        )
        sub.add_argument("--skip", action="append", choices=PARTS, default=[], help="leave a part out")
        sub.add_argument(
            "--secret-key-file",
            type=Path,
            help="the embedded default's key file (WORKBENCH_DATA_DIR/secret_key)",
        )

    backup = commands.add_parser("backup", help="database, files and secret key into a new folder")
    backup.add_argument("--out", type=Path, required=True, help="a new (or empty) folder")
    common(backup)
    backup.set_defaults(run=command_backup)

    restore = commands.add_parser("restore", help="check a backup, and with --yes put it back")
    restore.add_argument("backup", type=Path)
    restore.add_argument("--yes", action="store_true", help="write (without it: check and say what)")
    restore.add_argument("--clean", action="store_true", help="replace a database that holds tables")
    restore.add_argument("--prune", action="store_true", help="remove stored files that the backup lacks")
    common(restore)
    restore.set_defaults(run=command_restore)
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.umask(0o077)
    try:
        args.run(args)
    except BackupError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
