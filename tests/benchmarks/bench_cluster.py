"""The workbench across processes, measured together (issue 28, point 8): nginx in front of two
gunicorn web nodes, PostgreSQL, Redis, an S3 server and Celery workers on one machine, driven by N
simulated annotators.

Run (PostgreSQL and Redis already running; the database is migrated, a fresh study made per run):
    DATABASE_URL=postgres://USER:PASS@127.0.0.1:5432/DB REDIS_URL=redis://127.0.0.1:6379/3 \\
        .venv/bin/python -m tests.benchmarks.bench_cluster [--annotators 128] [--seconds 60] \\
        [--kill-node] [--kill-worker] [--import-items 100000]

What it starts, each in its own process group (all stopped on exit, Ctrl-C or SIGTERM):
- moto's standalone S3 server (``moto_server``, from ``moto[server]``) on a free port, one bucket;
- two gunicorn web nodes (``workbench.wsgi``, gthread), each with its own ``WORKBENCH_DATA_DIR`` and
  no shared folder: only PostgreSQL (``DATABASE_URL``), Redis (``WORKBENCH_CACHE_URL``, the broker)
  and the bucket (``WORKBENCH_S3_BUCKET``, presigned redirects) in common, ``WORKBENCH_ENV=production``;
- nginx (Debian's ``/usr/sbin/nginx``) with a generated configuration in a temporary folder: one
  upstream of the two nodes, ``proxy_next_upstream error timeout http_502 http_503`` as in
  ``deploy/nginx.conf`` (a node that refuses or resets the connection is skipped; a POST a node
  already got is not re-sent);
- two Celery workers (``--pool solo``, queue ``celery``) with a short stale time
  (``WORKBENCH_JOB_STALE_SECONDS``, ``WORKBENCH_JOB_SWEEP_SECONDS``) so a killed worker's job is taken
  over in seconds.

The study: ``--items`` image items (overlap 3, the test suite's example protocol), each with one
JPEG in the bucket (32 distinct files, shared by name; written as rows, not imported, to keep the
set-up short), N annotators each with an API token (claim and submit) and a signed-in session (the
image page is a page, not an API). Each simulated annotator, after a random start, loops: claim
(``POST /api/studies/ID/assignments/next/``), load the item's image through its presigned URL (by
default the ``direct_url`` the claimed task carries, fetched from the S3 server; ``--image-via app``:
``GET /items/ID/images/0/``, where the app checks access and answers 302 to a presigned URL, as a
browser's ``<img>`` does), think ``--think-min`` to ``--think-max`` seconds (default 1-3), submit.
A request that gets 502/503 or a broken connection (a node killed under it) is sent again (claim
returns the lease you hold; submit changes your own answer), counted as a retry, and its latency
includes the retries.
Afterwards the database is checked: every assignment whose submit got a 2xx must be submitted with
its answer stored ("lost" otherwise), and no item may have more submitted judgements than its
overlap ("over-filled").

Scenarios:
- ``--kill-node``: half-way through, SIGKILL the whole process group (master and workers) of web node 1;
  nginx sends the rest to node 2. Latencies before and after the kill are printed apart.
- ``--import-items N``: an N-row CSV manifest of reference items (as ``bench_scale.py import``) is put
  in the bucket before the run and imported as a job (``POST /api/studies/ID/items/import/`` with the
  bucket address, through nginx) a few seconds into the run, while the annotators work; the import's
  time (request to done, and the job's own started-to-finished) is printed.
- ``--kill-worker``: SIGKILL the Celery worker that runs the import job ``--kill-after`` seconds after
  it started (implies an import: 100,000 rows unless ``--import-items`` says otherwise); the other
  worker's sweep takes the stale job over and runs it again from the start.

Printed: claim, submit and image (redirect + S3 fetch) p50/p95/p99, retries, errors, lost and
over-filled counts, and the CPU seconds of each kind of process per API request. Clients, servers,
PostgreSQL and the S3 server share the machine's cores, so on a small machine the figures are a
floor; results and the commands that gave them: docs/benchmarks.md, "Across machines (issue 28)".
"""

from __future__ import annotations

import argparse
import atexit
import http.client
import io
import json
import multiprocessing
import os
import platform
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NGINX = "/usr/sbin/nginx"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench-key", "AWS_SECRET_ACCESS_KEY": "bench-secret"}
REGION = "us-east-1"
ANSWERS = {
    "answers": {
        "gender": {"value": "female"},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }
}
RETRY_STATUSES = (502, 503, 504)
# A Celery worker's log lines when it gets and ends the task (its start-up banner lists the name bare).
RECEIVED = "run_import_job_task["
SUCCEEDED = "] succeeded in"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def fmt_ms(values: list[float]) -> str:
    return "/".join(f"{percentile(values, q) * 1000:.0f}" for q in (50, 95, 99))


# ---------------------------------------------------------------- processes


class Processes:
    """Every process the benchmark starts, each in its own session (process group), so one signal
    stops a gunicorn master with its workers; :meth:`stop_all` runs on exit, Ctrl-C and SIGTERM."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: dict[str, subprocess.Popen[bytes]] = {}
        self.before_kill: Callable[[], None] | None = None  # the CPU meter's last look

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("ab")
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.started[name] = process
        return process

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        process = self.started[name]
        if self.before_kill is not None:
            self.before_kill()
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)

    def stop_all(self) -> None:
        for process in self.started.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for process in self.started.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in self.started.values():  # whatever is left of a group, the workers included
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if process.poll() is None:
                process.wait(timeout=10)
        self.started.clear()


def wait_http(
    port: int, path: str, process: subprocess.Popen[bytes], what: str, seconds: float = 180
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", path)
            status = connection.getresponse().status
            connection.close()
            if status < 500:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer on port {port} within {seconds:.0f} s")


def nginx_config(folder: Path, port: int, upstreams: list[int]) -> Path:
    """nginx's configuration: ``deploy/nginx.conf``'s proxy settings, the two nodes on loopback ports,
    every path in ``folder``."""
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=10s;" for p in upstreams)
    user = "user root;" if os.geteuid() == 0 else ""  # the workers write their temp files in ``folder``
    text = f"""{user}
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format timed '$status $request_method $uri $upstream_addr $upstream_status $request_time';
    access_log {folder}/nginx-access.log timed;
    client_body_temp_path {folder}/nginx-body;
    proxy_temp_path {folder}/nginx-proxy;
    fastcgi_temp_path {folder}/nginx-fastcgi;
    uwsgi_temp_path {folder}/nginx-uwsgi;
    scgi_temp_path {folder}/nginx-scgi;
    keepalive_timeout 65;
    keepalive_requests 100000;
    upstream workbench {{
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 201m;
        location / {{
            proxy_pass http://workbench;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_request_buffering off;
            proxy_read_timeout 120s;
            proxy_next_upstream error timeout http_502 http_503;
            proxy_next_upstream_tries 2;
        }}
    }}
}}
"""
    path = folder / "nginx.conf"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- the environment of every process


@dataclass
class Stack:
    database_url: str
    redis_url: str
    bucket: str
    s3_endpoint: str
    secret_key: str
    temp: Path
    stale_seconds: int

    def env(self, data_dir: str) -> dict[str, str]:
        folder = self.temp / data_dir
        folder.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "CELERY_"))}
        env.update(CREDENTIALS)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "workbench.settings",
                "DJANGO_SECRET_KEY": self.secret_key,
                "WORKBENCH_ENV": "production",
                "WORKBENCH_EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
                "WORKBENCH_DATA_DIR": str(folder),
                "DATABASE_URL": self.database_url,
                "CELERY_BROKER_URL": self.redis_url,
                "WORKBENCH_CACHE_URL": self.redis_url,
                "WORKBENCH_S3_BUCKET": self.bucket,
                "WORKBENCH_S3_IMPORT_BUCKETS": f"{self.bucket}/manifests/",  # the bench's manifests
                "WORKBENCH_S3_ENDPOINT_URL": self.s3_endpoint,
                "WORKBENCH_S3_REGION": REGION,
                "WORKBENCH_S3_ADDRESSING_STYLE": "path",
                "AWS_DEFAULT_REGION": REGION,
                "WORKBENCH_TRUSTED_PROXIES": "1",
                "WORKBENCH_THROTTLE_USER": "10000000/minute",
                "WORKBENCH_LOG_LEVEL": "WARNING",
                "WORKBENCH_JOB_STALE_SECONDS": str(self.stale_seconds),
                "WORKBENCH_JOB_SWEEP_SECONDS": str(max(1, self.stale_seconds // 3)),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "PYTHONHASHSEED": "0",
            }
        )
        return env


def start_s3(processes: Processes) -> str:
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    process = processes.start("moto", [str(moto), "-H", "127.0.0.1", "-p", str(port)], dict(os.environ))
    wait_http(port, "/moto-api/", process, "moto_server", 60)
    return f"http://127.0.0.1:{port}"


def start_node(processes: Processes, stack: Stack, name: str, args: argparse.Namespace) -> int:
    port = free_port()
    argv = [
        str(ROOT / ".venv/bin/gunicorn"),
        "workbench.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(args.workers),
        "--threads",
        str(args.threads),
        "--worker-class",
        args.worker_class,
        "--timeout",
        "120",
        "--keep-alive",
        "75",  # longer than nginx's, so nginx closes its idle upstream connections first
        "--log-level",
        "warning",
        *args.gunicorn_extra.split(),
    ]
    process = processes.start(name, argv, stack.env(name))
    wait_http(port, "/healthz/", process, name)
    return port


def start_worker(processes: Processes, stack: Stack, name: str, nice: int = 0) -> None:
    argv = [
        *(["nice", "-n", str(nice)] if nice else []),
        str(ROOT / ".venv/bin/celery"),
        "-A",
        "workbench",
        "worker",
        "--pool",
        "solo",
        "-Q",
        "celery",
        "--hostname",
        f"{name}@%h",
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    processes.start(name, argv, stack.env(name))


def wait_workers_ready(processes: Processes, names: list[str], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(" ready." in processes.log(name) for name in names):
            return
        for name in names:
            if processes.started[name].poll() is not None:
                raise RuntimeError(f"{name} exited: {processes.log(name)[-2000:]}")
        time.sleep(0.5)
    raise RuntimeError(f"workers not ready within {seconds:.0f} s")


# ---------------------------------------------------------------- set-up (Django in this process)


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_images(count: int) -> list[tuple[bytes, int, int]]:
    """``count`` distinct 512x512 JPEGs (a gradient and noise, about 30-60 KiB each)."""
    from PIL import Image

    made = []
    for index in range(count):
        rng = random.Random(index)
        image = Image.effect_noise((512, 512), 40 + index).convert("RGB")
        tint = Image.new("RGB", (512, 512), (rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        image = Image.blend(image, tint, 0.5)
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=80)
        made.append((buffer.getvalue(), 512, 512))
    return made


@dataclass
class Setup:
    study_id: int
    annotators: list[tuple[str, str]]  # (API token, session cookie value)
    owner_token: str
    import_study_id: int
    manifest_address: str
    overlap: int


def prepare(stack: Stack, args: argparse.Namespace, tag: str) -> Setup:
    """The bucket's images, the study and its items (rows pointing at them), the annotators with
    tokens and sessions, the import's study and manifest."""
    import hashlib

    import boto3
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from annotations.models import Item, ItemImage, User
    from annotations.services.studies import study_create
    from common.planner_statistics import statistics_refresh
    from protocols.schema import load_protocol_text
    from tests.benchmarks.bench_annotation import make_study
    from tests.factories import EXAMPLE_PROTOCOL

    s3 = boto3.client("s3", endpoint_url=stack.s3_endpoint, region_name=REGION)
    s3.create_bucket(Bucket=stack.bucket)
    names = []
    for index, (data, _w, _h) in enumerate(make_images(32)):
        name = f"items/bench-{tag}/{index:02d}.jpg"
        s3.put_object(Bucket=stack.bucket, Key=name, Body=data, ContentType="image/jpeg")
        names.append((name, hashlib.sha256(data).hexdigest()))

    study_id, tokens = make_study(args.annotators, 0, tag, overlap=args.overlap)
    with transaction.atomic():
        items = Item.objects.bulk_create(
            [
                Item(study_id=study_id, external_id=f"img-{i}", kind="image", prompt=f"a photo {i}")
                for i in range(args.items)
            ],
            batch_size=2000,
        )
        ItemImage.objects.bulk_create(
            [
                ItemImage(
                    item=item,
                    position=0,
                    file=names[i % len(names)][0],
                    original_name=f"{i}.jpg",
                    sha256=names[i % len(names)][1],
                    width=512,
                    height=512,
                    content_type="image/jpeg",
                    is_blank=False,
                )
                for i, item in enumerate(items)
            ],
            batch_size=2000,
        )
    statistics_refresh(Item, ItemImage, rows=args.items)

    backend = next(name for name in settings.AUTHENTICATION_BACKENDS if "axes" not in name.lower())
    annotators = []
    for token in tokens:
        user = Token.objects.select_related("user").get(key=token).user
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = backend
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        annotators.append((token, str(session.session_key)))

    owner = User.objects.get(username=f"bench-owner-{tag}")
    owner_token = Token.objects.get_or_create(user=owner)[0].key
    import_study = study_create(
        owner=owner, name=f"bench import {tag}", protocol=load_protocol_text(EXAMPLE_PROTOCOL), overlap=1
    )
    address = ""
    if args.import_items:
        key = f"manifests/bench-{tag}/manifest-{args.import_items}.csv"
        lines = ["external_id,prompt,model,condition,seed,source"]
        lines += [
            f"ref-{n},a photo of a person number {n},model-x,gender:{'fm'[n % 2]},{n},web"
            for n in range(args.import_items)
        ]
        body = ("\n".join(lines) + "\n").encode()
        s3.put_object(Bucket=stack.bucket, Key=key, Body=body, ContentType="text/csv")
        address = f"s3://{stack.bucket}/{key}"
        print(f"manifest {address}: {args.import_items} rows, {len(body) / 2**20:.1f} MiB", flush=True)
    return Setup(study_id, annotators, owner_token, import_study.pk, address, args.overlap)


# ---------------------------------------------------------------- the simulated annotators


@dataclass
class Outcome:
    claims: list[tuple[float, float]] = field(default_factory=list)  # (wall clock at start, seconds)
    submits: list[tuple[float, float]] = field(default_factory=list)
    images: list[tuple[float, float]] = field(default_factory=list)
    submitted: list[int] = field(default_factory=list)  # assignments whose submit got a 2xx
    retries: int = 0
    errors: list[str] = field(default_factory=list)


class Session:
    """One annotator's keep-alive connections: to nginx (token for the API, session cookie for
    pages) and to the S3 server (presigned URLs)."""

    def __init__(self, port: int, token: str, cookie: str) -> None:
        self.port = port
        self.api_headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.page_headers = {"Cookie": f"sessionid={cookie}"}
        self.web = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.s3: http.client.HTTPConnection | None = None
        self.retries = 0

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes, dict[str, str]]:
        """One request through nginx; sent again (up to 20 times, 0.25 s apart) on 502/503/504 or a
        broken connection, as an annotator's page would."""
        payload = None if body is None else json.dumps(body).encode()
        for attempt in range(20):
            try:
                self.web.request(method, path, body=payload, headers=headers or self.api_headers)
                response = self.web.getresponse()
                data = response.read()
                if response.status not in RETRY_STATUSES:
                    return response.status, data, dict(response.getheaders())
            except (OSError, http.client.HTTPException):
                self.web.close()
                self.web = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.retries += 1
            if attempt:
                time.sleep(0.25)
        raise RuntimeError(f"{method} {path}: no answer after 20 tries")

    def fetch(self, url: str) -> int:
        """GET a presigned URL on the S3 server; the number of bytes."""
        parts = urllib.parse.urlsplit(url)
        if self.s3 is None or self.s3.host != parts.hostname or self.s3.port != parts.port:
            self.s3 = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        for attempt in (1, 2):
            try:
                self.s3.request("GET", path)
                response = self.s3.getresponse()
                data = response.read()
                if response.status != 200:
                    raise RuntimeError(f"S3 GET {response.status}: {data[:200]!r}")
                return len(data)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.s3.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.web.close()
        if self.s3 is not None:
            self.s3.close()


def annotator(
    port: int,
    study_id: int,
    token: str,
    cookie: str,
    start_at: float,
    stop_at: float,
    think: tuple[float, float],
    out: Outcome,
    via_app: bool = False,
) -> None:
    session = Session(port, token, cookie)
    jitter = random.Random(token)
    time.sleep(max(0.0, start_at - time.time()) + jitter.uniform(0, think[1]))
    try:
        while time.time() < stop_at:
            t0 = time.time()
            status, body, _ = session.request("POST", f"/api/studies/{study_id}/assignments/next/")
            out.claims.append((t0, time.time() - t0))
            if status == 204:
                out.errors.append("ran out of items")
                return
            if status != 200:
                out.errors.append(f"claim {status}: {body[:200]!r}")
                return
            task = json.loads(body)
            images = task["task"]["item"]["images"]
            if images and not via_app and images[0]["direct_url"]:
                # The task's presigned URL: the image straight from the bucket, no web request.
                t0 = time.time()
                session.fetch(images[0]["direct_url"])
                out.images.append((t0, time.time() - t0))
            elif images:
                t0 = time.time()
                status, body, headers = session.request("GET", images[0]["url"], headers=session.page_headers)
                if status != 302:
                    out.errors.append(f"image {status}: {body[:200]!r}")
                    return
                session.fetch(headers["Location"])
                out.images.append((t0, time.time() - t0))
            else:
                out.errors.append("an item without an image")
            time.sleep(jitter.uniform(*think))
            t0 = time.time()
            status, body, _ = session.request("POST", f"/api/assignments/{task['id']}/submit/", ANSWERS)
            out.submits.append((t0, time.time() - t0))
            if status != 200:
                out.errors.append(f"submit {status}: {body[:200]!r}")
                return
            out.submitted.append(int(task["id"]))
    except (OSError, RuntimeError, http.client.HTTPException, ValueError, KeyError) as error:
        out.errors.append(f"{type(error).__name__}: {error}")
    finally:
        out.retries += session.retries
        session.close()


def client_process(
    port: int,
    study_id: int,
    annotators: list[tuple[str, str]],
    start_at: float,
    stop_at: float,
    think: tuple[float, float],
    via_app: bool = False,
) -> tuple[Outcome, float]:
    """A thread per annotator; the merged outcome and the CPU seconds this process used."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops everything
    cpu = time.process_time()
    outcomes = [Outcome() for _ in annotators]
    threads = [
        threading.Thread(
            target=annotator,
            args=(port, study_id, token, cookie, start_at, stop_at, think, outcomes[i], via_app),
        )
        for i, (token, cookie) in enumerate(annotators)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    merged = Outcome()
    for part in outcomes:
        merged.claims += part.claims
        merged.submits += part.submits
        merged.images += part.images
        merged.submitted += part.submitted
        merged.retries += part.retries
        merged.errors += part.errors
    return merged, time.process_time() - cpu


# ---------------------------------------------------------------- the import job (and the killed worker)


@dataclass
class ImportResult:
    status: str = "not started"
    seconds: float = float("nan")  # request to done, as the researcher waits
    job_seconds: float = float("nan")  # the job's started_at to finished_at (the last run's)
    resumed: int = 0
    killed: str = ""
    killed_after: float = float("nan")
    finished_by: str = ""
    error: str = ""
    report: dict[str, Any] = field(default_factory=dict)


def api(port: int, token: str, method: str, path: str, form: dict[str, str] | None = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Token {token}"}
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, (json.loads(data) if data else None)


def run_import(
    port: int,
    setup: Setup,
    processes: Processes,
    workers: list[str],
    start_in: float,
    kill_worker: bool,
    kill_after: float,
    result: ImportResult,
    timeout: float = 900,
) -> None:
    """Queue the bucket manifest's import through the API, then poll the job until it ends; with
    ``kill_worker`` SIGKILL the worker that received the task ``kill_after`` s after the job started."""
    time.sleep(start_in)
    started = time.time()
    status, body = api(
        port,
        setup.owner_token,
        "POST",
        f"/api/studies/{setup.import_study_id}/items/import/",
        {"address": setup.manifest_address},
    )
    if status != 202:
        result.status, result.error = "refused", f"{status}: {body}"
        return
    job_id = body["id"]
    running_since = None
    while time.time() - started < timeout:
        time.sleep(0.5)
        status, job = api(port, setup.owner_token, "GET", f"/api/imports/{job_id}/")
        if status != 200:
            continue
        if job["status"] == "running" and running_since is None:
            running_since = time.time()
        if kill_worker and not result.killed and running_since and time.time() - running_since >= kill_after:
            holder = [name for name in workers if RECEIVED in processes.log(name)]
            if holder:
                processes.kill(holder[0])
                result.killed, result.killed_after = holder[0], time.time() - running_since
                print(f"  SIGKILL {holder[0]} {result.killed_after:.1f} s into the import job", flush=True)
        if job["status"] in ("done", "failed", "cancelled"):
            result.seconds = time.time() - started
            result.status, result.error = job["status"], job.get("error", "")
            result.resumed = int(job.get("resumed_count", 0) or 0)
            result.report = job.get("report") or {}
            break
    else:
        result.status = "still running at the timeout"
    from annotations.models import ImportJob

    row = ImportJob.objects.get(pk=job_id)
    result.resumed = row.resumed_count
    if row.started_at and row.finished_at:
        result.job_seconds = (row.finished_at - row.started_at).total_seconds()
    finished = [name for name in workers if name != result.killed and SUCCEEDED in processes.log(name)]
    result.finished_by = ",".join(finished)


# ---------------------------------------------------------------- checks and CPU


def in_process_cpu(study_id: int, tokens: list[str], cycles: int) -> tuple[float, int]:
    """The same claim and submit in this process, through Django's test client (every middleware and
    DRF, no socket, no WSGI server), on the same database, cache, bucket and settings as the web
    nodes: the CPU milliseconds per API request (the mean, as the nodes' figure is) and how many
    requests that is. The annotators take turns; 10 cycles of warm-up first (imports, connections,
    each thread's S3 client)."""
    from django.test import Client

    clients = [Client(HTTP_AUTHORIZATION=f"Token {token}") for token in tokens]
    spent, requests = 0.0, 0
    for n in range(cycles + 10):
        client = clients[n % len(clients)]
        started = time.process_time()
        claimed = client.post(f"/api/studies/{study_id}/assignments/next/")
        if claimed.status_code != 200:
            break  # nothing left for this annotator
        done = client.post(
            f"/api/assignments/{claimed.json()['id']}/submit/", ANSWERS, content_type="application/json"
        )
        if done.status_code != 200:
            raise RuntimeError(f"in-process submit answered {done.status_code}: {done.content[:200]!r}")
        if n >= 10:
            spent += time.process_time() - started
            requests += 2
    return 1000 * spent / max(1, requests), requests


def database_checks(study_id: int, submitted: list[int], overlap: int) -> tuple[int, int, int]:
    """(lost: 2xx submits whose assignment is not submitted with its answer stored, over-filled
    items, submitted judgements in the study)."""
    from django.db.models import Count, Exists, OuterRef

    from annotations.models import Annotation, Assignment

    ids = set(submitted)
    stored = 0
    chunk = sorted(ids)
    for start in range(0, len(chunk), 5000):
        stored += (
            Assignment.objects.filter(pk__in=chunk[start : start + 5000], status="submitted")
            .filter(
                Exists(
                    Annotation.objects.filter(
                        study_id=study_id, item_id=OuterRef("item_id"), annotator_id=OuterRef("annotator_id")
                    )
                )
            )
            .count()
        )
    over = (
        Assignment.objects.filter(study_id=study_id, status="submitted")
        .values("item_id")
        .annotate(n=Count("id"))
        .filter(n__gt=overlap)
        .count()
    )
    total = Assignment.objects.filter(study_id=study_id, status="submitted").count()
    return len(ids) - stored, over, total


class CpuMeter(threading.Thread):
    """CPU seconds (utime + stime, from /proc) of kinds of processes, sampled every ``interval``: a
    process that ends (a killed node, a closed database connection) keeps what it had used when last
    seen. Kinds: process groups (the ones this script started) or a command-line substring."""

    def __init__(
        self, groups: dict[str, list[int]], commands: dict[str, str], begin_at: float, interval: float = 0.5
    ) -> None:
        super().__init__(name="cpu-meter", daemon=True)
        self.groups, self.commands, self.interval, self.begin_at = groups, commands, interval, begin_at
        self.first: dict[tuple[str, int], float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.started_pids: set[int] = set()
        self.begun = False
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def sample(self) -> None:
        with self._lock:
            if self.begun:
                self._sample()

    def _sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        by_group = {pid: kind for kind, pids in self.groups.items() for pid in pids}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                kind = by_group.get(int(fields[2]))  # the process group
                if kind is None and self.commands:
                    command = (entry / "cmdline").read_bytes().decode(errors="replace")
                    kind = next(
                        (k for k, needle in self.commands.items() if needle and needle in command), None
                    )
            except OSError:
                continue
            if kind is None:
                continue
            key = (kind, int(entry.name))
            cpu = (int(fields[11]) + int(fields[12])) / tick
            # a process first seen after the start counts whole; one there at the start from then on
            self.first.setdefault(key, cpu if not self.started_pids or key[1] in self.started_pids else 0.0)
            self.last[key] = cpu

    def run(self) -> None:
        """Wait for ``begin_at`` (the end of the warm-up), then sample until :meth:`stop`."""
        if self._stop_event.wait(max(0.0, self.begin_at - time.time())):
            return
        with self._lock:
            self._sample()
            self.started_pids = {pid for _, pid in self.first}
            self.begun = True
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> dict[str, float]:
        self._stop_event.set()
        self.join(timeout=10)
        self.sample()
        used: dict[str, float] = {kind: 0.0 for kind in [*self.groups, *self.commands]}
        for key, cpu in self.last.items():
            used[key[0]] += cpu - self.first[key]
        return used


# ---------------------------------------------------------------- main


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} cores ({model}); python {platform.python_version()}; "
        f"load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--annotators", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the annotators work (measured)")
    parser.add_argument(
        "--warm-up",
        type=float,
        default=10.0,
        help="seconds of work before the measured part (not counted: each gunicorn thread imports, "
        "connects and makes its S3 client on its first requests)",
    )
    parser.add_argument("--think-min", type=float, default=1.0)
    parser.add_argument("--think-max", type=float, default=3.0)
    parser.add_argument("--items", type=int, default=0, help="items of the study (0: enough for the run)")
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per web node")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--worker-class", default="gthread")
    parser.add_argument("--gunicorn-extra", default="", help="more gunicorn flags, space-separated")
    parser.add_argument("--client-processes", type=int, default=2)
    parser.add_argument(
        "--image-via",
        choices=("direct", "app"),
        default="direct",
        help="direct: the presigned URL the claim's task carries (direct_url); app: the item's image "
        "page, which checks access and answers 302 to a presigned URL (a browser's <img>)",
    )
    parser.add_argument("--kill-node", action="store_true", help="SIGKILL web node 1 half-way through")
    parser.add_argument("--kill-worker", action="store_true", help="SIGKILL the worker running the import")
    parser.add_argument("--kill-after", type=float, default=3.0, help="seconds into the import job")
    parser.add_argument("--import-items", type=int, default=0, help="rows of a manifest imported as a job")
    parser.add_argument("--import-start", type=float, default=5.0, help="seconds into the run")
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        help="run the Celery workers under nice -n N (a worker sharing cores with the web nodes)",
    )
    parser.add_argument("--stale-seconds", type=int, default=6, help="WORKBENCH_JOB_STALE_SECONDS")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL")
        or os.environ.get("WORKBENCH_TEST_REDIS_URL")
        or "redis://127.0.0.1:6379/0",
    )
    parser.add_argument(
        "--in-process",
        type=int,
        default=200,
        help="claim + submit cycles run afterwards in this process through Django's test client, to "
        "compare the web nodes' CPU per request with the same work in process (0: skip)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs)")
    args = parser.parse_args(argv)
    if not args.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("needs PostgreSQL: DATABASE_URL=postgres://... or --database-url")
    if args.kill_worker and not args.import_items:
        args.import_items = 100_000
    if not args.items:  # every annotator can claim each cycle; overlap x the submits the run can make
        cycles = args.annotators * args.seconds / max(0.5, (args.think_min + args.think_max) / 2)
        args.items = max(500, int(cycles * 1.5 / args.overlap) + args.annotators)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    temp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    os.chmod(temp, 0o755)
    processes = Processes(temp)
    atexit.register(processes.stop_all)

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    tag = f"{int(time.time())}"
    try:
        return run(args, temp, processes, tag)
    except KeyboardInterrupt:
        print("interrupted: stopping every process", file=sys.stderr)
        return 130
    finally:
        processes.stop_all()
        if args.keep:
            print(f"logs kept in {temp}")
        else:
            import shutil

            shutil.rmtree(temp, ignore_errors=True)


def run(args: argparse.Namespace, temp: Path, processes: Processes, tag: str) -> int:
    print(
        f"bench_cluster {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {machine()}\n"
        f"  {args.annotators} annotators, {args.seconds:.0f} s, "
        f"think {args.think_min:g}-{args.think_max:g} s, {args.items} items (overlap {args.overlap}); "
        f"2 web nodes x gunicorn {args.workers} {args.worker_class} workers x {args.threads} threads; "
        f"{'2' if args.import_items else 'no'} Celery workers; {args.client_processes} client processes; "
        f"images via {args.image_via}",
        flush=True,
    )
    stack = Stack(
        database_url=args.database_url,
        redis_url=args.redis_url,
        bucket=f"bench-cluster-{tag}",
        s3_endpoint=start_s3(processes),
        secret_key=secrets.token_urlsafe(50),
        temp=temp,
        stale_seconds=args.stale_seconds,
    )
    django_setup(stack.env("bench"))
    from django.db import connection

    from tests.benchmarks.bench_annotation import _database_backends

    started = time.time()
    setup = prepare(stack, args, tag)
    print(f"  set-up {time.time() - started:.1f} s (study {setup.study_id})", flush=True)
    nodes = ["web1", "web2"]
    node_ports = [start_node(processes, stack, name, args) for name in nodes]
    workers = ["worker1", "worker2"] if (args.import_items or args.kill_worker) else []
    for name in workers:
        start_worker(processes, stack, name, nice=args.worker_nice)
    port = free_port()
    config = nginx_config(temp, port, node_ports)
    check = subprocess.run([NGINX, "-t", "-p", str(temp), "-c", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"nginx -t: {check.stderr}")
    nginx = processes.start("nginx", [NGINX, "-p", str(temp), "-c", str(config)], dict(os.environ))
    wait_http(port, "/healthz/", nginx, "nginx", 30)
    if workers:
        wait_workers_ready(processes, workers)
    # warm-up: each gunicorn worker imports and connects on its first requests
    warm = [api(port, setup.owner_token, "GET", "/api/studies/") for _ in range(4 * args.workers)]
    if any(status != 200 for status, _ in warm):
        raise RuntimeError(f"warm-up failed: {[status for status, _ in warm]}")

    processes_n = max(1, min(args.client_processes, args.annotators))
    shares = [setup.annotators[i::processes_n] for i in range(processes_n)]
    start_at = time.time() + 3.0  # spawned clients import first
    measured_from = start_at + args.warm_up  # every gunicorn thread has made its S3 client by then
    stop_at = measured_from + args.seconds
    backends = _database_backends()
    node_pids = [processes.started[name].pid for name in nodes]
    worker_pids = [processes.started[name].pid for name in workers]
    meter = CpuMeter(
        {
            "web": node_pids,
            "workers": worker_pids,
            "nginx": [processes.started["nginx"].pid],
            "s3": [processes.started["moto"].pid],
        },
        {"database": backends},
        begin_at=measured_from,
    )
    meter.start()
    processes.before_kill = meter.sample
    killed_at = [float("nan")]
    helpers: list[threading.Thread] = []
    if args.kill_node:

        def kill_node() -> None:
            time.sleep(max(0.0, measured_from + args.seconds / 2 - time.time()))
            processes.kill("web1")
            killed_at[0] = time.time()
            print(
                f"  SIGKILL web1 (gunicorn master and workers) at {killed_at[0] - measured_from:.1f} s",
                flush=True,
            )

        helpers.append(threading.Thread(target=kill_node, daemon=True))
    imported = ImportResult()
    if args.import_items:
        helpers.append(
            threading.Thread(
                target=run_import,
                args=(
                    port,
                    setup,
                    processes,
                    workers,
                    measured_from + args.import_start - time.time(),
                    args.kill_worker,
                    args.kill_after,
                    imported,
                ),
                daemon=True,
            )
        )
    for helper in helpers:
        helper.start()
    context = multiprocessing.get_context("spawn")
    think = (args.think_min, args.think_max)
    with ProcessPoolExecutor(processes_n, mp_context=context) as pool:
        futures = [
            pool.submit(
                client_process, port, setup.study_id, share, start_at, stop_at, think, args.image_via == "app"
            )
            for share in shares
        ]
        results = [future.result() for future in futures]
    elapsed = time.time() - measured_from
    used = meter.stop()
    for helper in helpers:
        helper.join(timeout=900)
    outcome = Outcome()  # the measured part only; ``submitted`` holds every 2xx submit, for the checks
    client_cpu = 0.0
    for part, cpu in results:
        client_cpu += cpu
        outcome.claims += [entry for entry in part.claims if entry[0] >= measured_from]
        outcome.submits += [entry for entry in part.submits if entry[0] >= measured_from]
        outcome.images += [entry for entry in part.images if entry[0] >= measured_from]
        outcome.submitted += part.submitted
        outcome.retries += part.retries
        outcome.errors += part.errors
    lost, over, total = database_checks(setup.study_id, outcome.submitted, setup.overlap)
    requests_made = max(1, len(outcome.claims) + len(outcome.submits))
    claims = [seconds for _, seconds in outcome.claims]
    submits = [seconds for _, seconds in outcome.submits]
    images = [seconds for _, seconds in outcome.images]
    print(
        f"  {len(submits)} submits in the measured {elapsed:.1f} s ({len(submits) / elapsed:.1f}/s; "
        f"{args.warm_up:g} s warm-up before); "
        f"{len(claims)} claims, {len(images)} image loads\n"
        f"  claim  p50/p95/p99 {fmt_ms(claims)} ms\n"
        f"  submit p50/p95/p99 {fmt_ms(submits)} ms\n"
        f"  image  p50/p95/p99 {fmt_ms(images)} ms ("
        + (
            "the app's 302, then the presigned GET on the S3 server"
            if args.image_via == "app"
            else "the task's presigned URL, fetched from the S3 server"
        )
        + ")\n"
        f"  all API p99 {percentile(claims + submits, 99) * 1000:.0f} ms; "
        f"retries {outcome.retries}; errors {len(outcome.errors)}"
        + (f" {sorted(set(outcome.errors))[:3]}" if outcome.errors else "")
        + f"\n  lost {lost} (of {len(set(outcome.submitted))} 2xx submits); over-filled {over} items; "
        f"{total} submitted judgements in the database",
        flush=True,
    )
    if args.kill_node and killed_at[0] == killed_at[0]:
        for label, keep in (
            ("before the kill", lambda t: t < killed_at[0]),
            ("after", lambda t: t >= killed_at[0]),
        ):
            window = [s for t, s in outcome.claims + outcome.submits if keep(t)]
            print(f"  {label}: {len(window)} API requests, p50/p95/p99 {fmt_ms(window)} ms", flush=True)
    print(
        "  CPU ms per API request: "
        + ", ".join(f"{key} {1000 * value / requests_made:.2f}" for key, value in used.items())
        + f", clients {1000 * client_cpu / requests_made:.2f} (web: both gunicorn nodes; database: "
        f"the PostgreSQL backends of this database; each includes its share of image and import work)",
        flush=True,
    )
    if args.in_process:
        # After the nodes' figures: this process's work would count as nothing of theirs anyway.
        here, counted = in_process_cpu(
            setup.study_id, [token for token, _ in setup.annotators[:6]], args.in_process
        )
        web = 1000 * used["web"] / requests_made
        print(
            f"  in process (Django's test client here, same settings, {counted} requests): CPU ms per API "
            f"request {here:.2f}; web over HTTP / in process {web / here:.2f}",
            flush=True,
        )
    if args.import_items:
        print(
            f"  import of {args.import_items} rows from {setup.manifest_address}: {imported.status} in "
            f"{imported.seconds:.1f} s from the request (the job's last run {imported.job_seconds:.1f} s); "
            f"resumed {imported.resumed} time(s)"
            + (
                f"; killed {imported.killed}, finished by {imported.finished_by or '?'}"
                if imported.killed
                else ""
            )
            + (f"; error {imported.error}" if imported.error else "")
            + (f"; created {imported.report.get('created')}" if imported.report else ""),
            flush=True,
        )
    connection.close()
    failed = bool(lost or over or (args.import_items and imported.status != "done"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
