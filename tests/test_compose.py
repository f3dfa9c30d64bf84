"""compose.yaml and deploy/nginx.conf (issue 28, point 7), checked without Docker: the file parses,
every service has a health check, web nodes and workers share no folder (files go through the
bucket), the GPU worker reserves an NVIDIA GPU, nginx balances over both web nodes, every variable
given to the workbench is one the settings read, and those settings start in production mode.
``nginx -t`` checks the nginx file with Debian's nginx where it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose.yaml"
NGINX = ROOT / "deploy" / "nginx.conf"
WEB_NODES = {"web1", "web2"}
WORKERS = {"worker-cpu", "worker-gpu"}
# Read by boto3 itself (docs/deploy.md, "Object storage"), not by workbench/settings.py.
BOTO3_NAMES = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
REQUIRED = {
    "WORKBENCH_S3_BUCKET",
    "WORKBENCH_S3_ENDPOINT_URL",
    "WORKBENCH_S3_ADDRESSING_STYLE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "WORKBENCH_CACHE_URL",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "DJANGO_SECRET_KEY",
    "WORKBENCH_ENV",
}


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load(COMPOSE.read_text())
    return dict(compose["services"])


def settings_names() -> set[str]:
    text = (ROOT / "workbench" / "settings.py").read_text()
    return set(re.findall(r"env_(?:str|bool|int|list)\(\s*\"([A-Z0-9_]+)\"", text))


def workbench_services(services: dict[str, Any]) -> dict[str, Any]:
    return {name: s for name, s in services.items() if s.get("image", "").startswith("stereotype-audit")}


def test_every_service_has_a_health_check(services) -> None:
    expected = {"nginx", "postgres", "redis", "minio", "minio-init", "migrate"} | WEB_NODES | WORKERS
    assert expected <= set(services)
    for name, service in services.items():
        check = service.get("healthcheck") or {}
        assert check.get("test"), f"{name} has no health check"


def test_web_nodes_and_workers_share_no_folder(services) -> None:
    mounts: dict[str, str] = {}
    for name in WEB_NODES | WORKERS | {"migrate"}:
        for volume in services[name].get("volumes", []):
            # Only the GPU worker mounts anything: its model folders, read-only, never media.
            assert name == "worker-gpu" and isinstance(volume, dict), (name, volume)
            assert (volume["target"], volume["read_only"]) == ("/models", True)
            source = volume["source"]
            assert source not in mounts, f"{name} shares {source} with {mounts[source]}"
            mounts[source] = name
        assert "WORKBENCH_MEDIA_ROOT" not in services[name]["environment"]


def test_the_gpu_worker_reserves_an_nvidia_gpu_and_takes_the_gpu_queue(services) -> None:
    gpu = services["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert gpu["command"][gpu["command"].index("-Q") + 1] == "gpu"
    cpu = services["worker-cpu"]
    assert cpu["command"][cpu["command"].index("-Q") + 1] == "celery" and "deploy" not in cpu


def test_nginx_balances_over_both_web_nodes(services) -> None:
    conf = NGINX.read_text()
    upstream = re.search(r"upstream\s+workbench\s*\{(.*?)\}", conf, re.S)
    assert upstream is not None and "proxy_pass http://workbench;" in conf
    named = set(re.findall(r"server\s+([\w-]+):8000", upstream.group(1)))
    assert named == WEB_NODES
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in services["nginx"]["volumes"]
    for node in WEB_NODES:
        assert services["nginx"]["depends_on"][node]["condition"] == "service_healthy"


def test_every_variable_given_to_the_workbench_is_one_it_reads(services) -> None:
    known = settings_names() | BOTO3_NAMES
    for name, service in workbench_services(services).items():
        env = service["environment"]
        assert REQUIRED <= set(env), f"{name} lacks {REQUIRED - set(env)}"
        assert set(env) <= known, f"{name}: settings.py reads no {set(env) - known}"
        assert env["WORKBENCH_S3_ADDRESSING_STYLE"] == "path" and env["WORKBENCH_ENV"] == "production"
        assert env["WORKBENCH_CACHE_URL"].startswith("redis://redis:")
        assert env["CELERY_BROKER_URL"].startswith("redis://redis:")


PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({"production": settings.PRODUCTION, "cache": settings.CACHES["default"]["BACKEND"],
                  "mail": settings.EMAIL_BACKEND, "bucket": settings.S3_BUCKET,
                  "model_dirs": settings.WORKBENCH_MODEL_DIRS}))
"""


def test_the_compose_environment_starts_the_settings_in_production(services, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "DJANGO_", "CELERY_"))}
    env.pop("DATABASE_URL", None)
    given = services["worker-gpu"]["environment"]
    for key, value in given.items():  # ${NAME:-default} and ${NAME:?message} as compose fills them
        filled = re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(value))
        env[key] = re.sub(r"\$\{[A-Z0-9_]+:\?[^}]*\}", "secret-" + "x" * 50, filled)
    env |= {"DJANGO_SETTINGS_MODULE": "workbench.settings", "WORKBENCH_DATA_DIR": str(tmp_path / "absent")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "production": True,
        "cache": "common.redis_cache.RedisCache",
        "mail": "django.core.mail.backends.smtp.EmailBackend",
        "bucket": "workbench",
        "model_dirs": ["/models"],
    }
    # Settings and start-up made no folder (no SQLite, no embedded broker, no secret-key file).
    assert not (tmp_path / "absent").exists()


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (Debian: apt install nginx)"
)
def test_nginx_accepts_the_configuration(tmp_path) -> None:
    conf = NGINX.read_text().replace("web1:8000", "127.0.0.1:18001").replace("web2:8000", "127.0.0.1:18002")
    path = tmp_path / "nginx.conf"
    path.write_text(conf)
    result = subprocess.run(
        ["nginx", "-t", "-c", str(path), "-p", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr and "test is successful" in result.stderr
