"""compose.yaml and deploy/nginx.conf (issue 28, point 7), checked without Docker: the file parses,
every service has a health check, web nodes and workers share no folder (files go through the
bucket), the GPU worker reserves an NVIDIA GPU, nginx balances over both web nodes, every variable
given to the workbench is one the settings read, and those settings start in production mode.
``nginx -t`` checks the nginx file with Debian's nginx where it is installed.

Its defaults are safe (third hardening round, docs/deploy.md "Docker Compose"): MinIO's root account
reaches only the minio and minio-init services, the app signs in as the user deploy/minio-init.sh
makes (run here with a stand-in ``mc``: its policy names the bucket only, the one docs/deploy.md
gives), files reach browsers through the app (MinIO is published nowhere), every image names a
version, Redis asks for a password that every redis:// URL gives, nginx listens on 127.0.0.1 and ends
TLS, and ``manage.py check --deploy`` is clean with the environment the web nodes get.

Across hosts (docs/deploy.md, "Separate hosts"): every address the workbench gets (database, broker,
cache, bucket) is ``${VAR:-service default}``, so .env points it at another host; compose.worker.yaml
runs workers only (no web node, database, broker or bucket, every address required) and starts the
settings in production; compose.private.yaml publishes the three services on a private address only."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose.yaml"
WORKER_COMPOSE = ROOT / "compose.worker.yaml"
PRIVATE_COMPOSE = ROOT / "compose.private.yaml"
NGINX = ROOT / "deploy" / "nginx.conf"
MINIO_INIT = ROOT / "deploy" / "minio-init.sh"
DOCKERFILE = ROOT / "Dockerfile"
DEPLOY_DOCS = ROOT / "docs" / "deploy.md"
MINIO_SERVICES = {"minio", "minio-init"}
REDIS_PASSWORD = "${REDIS_PASSWORD:?set REDIS_PASSWORD in .env}"
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


def closing_brace(text: str, start: int) -> int:
    """The index of the ``}`` that closes the ``${`` at ``start`` (defaults may hold ``${...}`` too)."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("${", i):
            depth, i = depth + 1, i + 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unclosed ${{ in {text!r}")


def interpolate(text: str, env: Mapping[str, str], missing: Callable[[str], str]) -> str:
    """Compose's interpolation (compose-go's template package): ``$$``, ``${NAME}``, ``${NAME:-default}``,
    ``${NAME-default}``, ``${NAME:?message}``, ``${NAME?message}``, defaults nested and, as in compose,
    worked out even when the variable is set. ``missing(name)`` answers for a required one that is not."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            end = closing_brace(text, i)
            found = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])(.*))?", text[i + 2 : end], re.S)
            assert found, text
            name, operator, rest = found.groups()
            value = env.get(name)
            if operator in (":-", "-"):
                default = interpolate(rest, env, missing)
                usable = bool(value) if operator == ":-" else value is not None
                out.append(value if usable and value is not None else default)
            elif operator in (":?", "?"):
                usable = bool(value) if operator == ":?" else value is not None
                out.append(value if usable and value is not None else missing(name))
            else:
                out.append(value or "")
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def filled(value: Any, required: dict[str, str] | None = None) -> str:
    """A compose value as compose fills it from a .env holding ``required``: ``${NAME:-default}`` gives
    the default unless .env sets NAME, ``${NAME:?message}`` the value in ``required`` (else a
    placeholder secret)."""
    return interpolate(str(value), required or {}, lambda _name: "secret-" + "x" * 50)


def refused(name: str) -> str:
    raise LookupError(name)


def compose_env(service: dict[str, Any], required: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a workbench process of that service starts with (nothing of the caller's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "DJANGO_", "CELERY_"))}
    env.pop("DATABASE_URL", None)
    env.update({key: filled(value, required) for key, value in service["environment"].items()})
    env["DJANGO_SETTINGS_MODULE"] = "workbench.settings"
    return env


def strings(node: Any) -> list[str]:
    """Every string in a parsed YAML tree (keys and values)."""
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in strings(key) + strings(value)]
    if isinstance(node, list):
        return [s for item in node for s in strings(item)]
    return [node] if isinstance(node, str) else []


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
        assert filled(env["WORKBENCH_S3_ADDRESSING_STYLE"]) == "path" and env["WORKBENCH_ENV"] == "production"
        assert filled(env["WORKBENCH_CACHE_URL"], {"REDIS_PASSWORD": "pw"}).startswith("redis://:pw@redis:")
        assert filled(env["CELERY_BROKER_URL"], {"REDIS_PASSWORD": "pw"}).startswith("redis://:pw@redis:")


PROBE = """
import json, django
django.setup()
from django.conf import settings
print(json.dumps({"production": settings.PRODUCTION, "cache": settings.CACHES["default"]["BACKEND"],
                  "mail": settings.EMAIL_BACKEND, "bucket": settings.S3_BUCKET,
                  "model_dirs": settings.WORKBENCH_MODEL_DIRS, "serve": settings.S3_SERVE}))
"""


def test_the_compose_environment_starts_the_settings_in_production(services, tmp_path) -> None:
    env = compose_env(services["worker-gpu"])
    env["WORKBENCH_DATA_DIR"] = str(tmp_path / "absent")
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
        "serve": "proxy",
    }
    # Settings and start-up made no folder (no SQLite, no embedded broker, no secret-key file).
    assert not (tmp_path / "absent").exists()


def throwaway_certificate(folder: Path) -> None:
    """A self-signed fullchain.pem and privkey.pem for ``nginx -t`` (cryptography: moto brings it)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir()
    (folder / "fullchain.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "privkey.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (Debian: apt install nginx)"
)
def test_nginx_accepts_the_configuration(tmp_path) -> None:
    conf = NGINX.read_text().replace("web1:8000", "127.0.0.1:18001").replace("web2:8000", "127.0.0.1:18002")
    throwaway_certificate(tmp_path / "tls")
    conf = conf.replace("/etc/nginx/tls/", f"{tmp_path / 'tls'}/")
    path = tmp_path / "nginx.conf"
    path.write_text(conf)
    result = subprocess.run(
        ["nginx", "-t", "-c", str(path), "-p", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr and "test is successful" in result.stderr


# --- Safe defaults (third hardening round) ---------------------------------------------------------


def test_minio_root_credentials_reach_only_minio_and_minio_init(services) -> None:
    for name, service in services.items():
        seen = [s for s in strings(service) if "MINIO_ROOT_" in s]
        if name in MINIO_SERVICES:
            assert seen, f"{name} should hold MinIO's root account"
        else:
            assert not seen, f"{name} sees MinIO's root account: {seen}"


def test_the_app_signs_in_to_minio_as_the_bucket_user_minio_init_makes(services) -> None:
    init = services["minio-init"]
    assert "./deploy/minio-init.sh:/minio-init.sh:ro" in init["volumes"]
    assert init["entrypoint"] == ["/bin/sh", "/minio-init.sh"] and "command" not in init
    user = init["environment"]["MINIO_WORKBENCH_USER"]
    password = init["environment"]["MINIO_WORKBENCH_PASSWORD"]
    assert re.fullmatch(r"\$\{MINIO_WORKBENCH_PASSWORD:\?[^}]+\}", password)  # required, no default
    assert filled(user) != filled(services["minio"]["environment"]["MINIO_ROOT_USER"])
    for name, service in workbench_services(services).items():
        env = service["environment"]
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (user, password), name
        assert env["WORKBENCH_S3_BUCKET"] == init["environment"]["WORKBENCH_S3_BUCKET"], name


FAKE_MC = """#!/bin/sh
printf '%s\\n' "$*" >>"$MC_LOG"
case "$1 $2 $3" in
    "admin policy create") cp "$6" "$MC_POLICY" ;;
    "admin policy attach")
        if [ -n "${MC_ATTACH_ERROR:-}" ]; then printf '%s\\n' "$MC_ATTACH_ERROR" >&2; exit 1; fi ;;
esac
"""


def run_minio_init(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """deploy/minio-init.sh with a stand-in ``mc`` that logs its arguments and keeps the policy file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "mc").write_text(FAKE_MC)
    (bin_dir / "mc").chmod(0o755)
    log = tmp_path / "mc.log"
    log.unlink(missing_ok=True)
    given = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        "MC_LOG": str(log),
        "MC_POLICY": str(tmp_path / "policy.json"),
        "MINIO_ROOT_USER": "root-user",
        "MINIO_ROOT_PASSWORD": "root-password",
        "MINIO_WORKBENCH_USER": "workbench-app",
        "MINIO_WORKBENCH_PASSWORD": "app-password",
        "WORKBENCH_S3_BUCKET": "audit-files",
    } | env
    result = subprocess.run(["sh", str(MINIO_INIT)], env=given, capture_output=True, text=True, timeout=60)
    return result, log.read_text().splitlines() if log.exists() else []


def documented_bucket_policy(bucket: str) -> Any:
    """The policy of docs/deploy.md ("Object storage"), for ``bucket``."""
    block = re.search(r"```json\n(.*?)```", DEPLOY_DOCS.read_text(), re.S)
    assert block is not None, "docs/deploy.md gives no bucket policy"
    return json.loads(block.group(1).replace("lab-audit-files", bucket))


def test_minio_init_makes_a_user_whose_policy_names_the_bucket_only(tmp_path) -> None:
    result, calls = run_minio_init(tmp_path)
    assert result.returncode == 0, result.stderr
    assert calls == [
        "alias set local http://minio:9000 root-user root-password",
        "mb --ignore-existing local/audit-files",
        "anonymous set none local/audit-files",
        f"admin policy create local workbench-bucket {tmp_path}/workbench-bucket-policy.json",
        "admin user add local workbench-app app-password",
        "admin policy attach local workbench-bucket --user workbench-app",
    ]
    policy = json.loads((tmp_path / "policy.json").read_text())
    assert policy == documented_bucket_policy("audit-files")
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        assert statement["Resource"] in ("arn:aws:s3:::audit-files", "arn:aws:s3:::audit-files/*")
        for action in statement["Action"]:
            assert action in {
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListBucket",
            }, action


def test_minio_init_runs_again_and_refuses_what_would_widen_the_policy(tmp_path) -> None:
    again, _ = run_minio_init(
        tmp_path, MC_ATTACH_ERROR="mc: <ERROR> The specified policy change is already in effect."
    )
    assert again.returncode == 0, again.stderr
    failed, _ = run_minio_init(tmp_path, MC_ATTACH_ERROR="mc: <ERROR> Unable to connect")
    assert failed.returncode != 0 and "Unable to connect" in failed.stderr
    for bucket in ("*", "audit*", 'a"b', "audit-files/x", "Audit", "ab"):
        refused, calls = run_minio_init(tmp_path, WORKBENCH_S3_BUCKET=bucket)
        assert refused.returncode != 0 and calls == [], bucket
    as_root, calls = run_minio_init(tmp_path, MINIO_WORKBENCH_USER="root-user")
    assert as_root.returncode != 0 and calls == [] and "root" in as_root.stderr


def test_every_image_names_a_version(services) -> None:
    for name, service in services.items():
        image = filled(service["image"])  # the app's own: ${WORKBENCH_IMAGE_TAG:-local}
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest" and "/" not in tag, f"{name}: {image} names no version"
        if "build" in service:  # built here from this checkout
            assert repository.startswith("stereotype-audit-workbench"), name
        elif repository.startswith("minio/"):
            assert re.fullmatch(r"RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z", tag), f"{name}: {image}"
        else:
            assert re.fullmatch(r"\d+\.\d+(\.\d+)?(-[a-z0-9]+)?", tag), f"{name}: {image}"
    bases = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), re.M)
    assert bases and all(re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*", base) for base in bases), bases


def test_redis_asks_for_a_password_and_every_redis_url_gives_it(services) -> None:
    redis = services["redis"]
    command = redis["command"]
    assert command[command.index("--requirepass") + 1] == REDIS_PASSWORD
    assert redis["environment"]["REDISCLI_AUTH"] == REDIS_PASSWORD  # the health check's redis-cli
    urls = [s for s in strings(services) if "redis://" in s or "rediss://" in s]
    assert urls
    for url in urls:
        # The default (Redis of this file) carries the password; .env may name another Redis instead.
        assert REDIS_PASSWORD in url, url
        assert filled(url, {"REDIS_PASSWORD": "pw"}).startswith("redis://:pw@redis:6379/"), url


def published_ports(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host address, host port, container port) of each published port, defaults filled."""
    ports = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports.append((filled(entry.get("host_ip", "")), filled(entry["published"]), str(entry["target"])))
            continue
        *address, port, target = filled(entry).split(":")  # [address:]port:target
        ports.append((":".join(address), port, target))
    return ports


def test_nothing_is_published_beyond_this_machine_by_default(services) -> None:
    nginx = published_ports(services["nginx"])
    assert {(port, target) for _, port, target in nginx} == {("8443", "443"), ("8080", "80")}
    for name, service in services.items():
        for address, _, target in published_ports(service):
            assert address == "127.0.0.1", f"{name} publishes port {target} on {address or 'every address'}"
            assert target != "9000", f"{name} publishes MinIO's API"
    for entry in services["nginx"]["ports"]:
        assert entry.startswith("${WORKBENCH_BIND:-127.0.0.1}:"), entry  # .env widens it on purpose


def test_nginx_ends_tls_with_the_mounted_certificate(services) -> None:
    conf = NGINX.read_text()
    assert re.search(r"listen 443 ssl;", conf)
    assert "ssl_certificate /etc/nginx/tls/fullchain.pem;" in conf
    assert "ssl_certificate_key /etc/nginx/tls/privkey.pem;" in conf
    assert re.search(r"ssl_protocols TLSv1\.2 TLSv1\.3;", conf)
    assert "return 301 https://$host$request_uri;" in conf
    assert "${WORKBENCH_TLS_DIR:-./deploy/tls}:/etc/nginx/tls:ro" in services["nginx"]["volumes"]
    # The key never goes into the app's image (COPY . .) nor into git.
    assert "deploy/tls" in (ROOT / ".dockerignore").read_text().split()
    assert (ROOT / "deploy" / "tls" / ".gitignore").read_text().splitlines()[1:] == ["*", "!.gitignore"]


def test_files_reach_browsers_through_the_app_by_default(services) -> None:
    for name, service in workbench_services(services).items():
        env = service["environment"]
        # The endpoint is a name only the containers resolve: a redirect there would fail in browsers.
        assert filled(env["WORKBENCH_S3_ENDPOINT_URL"]) == "http://minio:9000", name
        assert filled(env.get("WORKBENCH_S3_SERVE", "redirect")) == "proxy", name  # settings: redirect


def test_check_deploy_is_clean_with_the_environment_the_web_nodes_get(services, tmp_path) -> None:
    assert services["web1"]["environment"] == services["web2"]["environment"]
    env = compose_env(services["web1"], {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)})
    env["WORKBENCH_DATA_DIR"] = str(tmp_path / "absent")
    assert env.get("DJANGO_SILENCED_SYSTEM_CHECKS", "") == ""  # nothing silenced by default
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout, result.stdout + result.stderr
    assert not (tmp_path / "absent").exists()


# --- Across hosts (docs/deploy.md, "Separate hosts") -----------------------------------------------

# What the workbench reaches over the network: each comes from .env under its own name.
ADDRESSES = {
    "DATABASE_URL": "postgres://workbench:pw@db.example.org:5432/workbench",
    "CELERY_BROKER_URL": "redis://:pw@redis.example.org:6379/0",
    "WORKBENCH_CACHE_URL": "redis://:pw@redis.example.org:6379/1",
    "WORKBENCH_S3_ENDPOINT_URL": "https://s3.example.org",
    "WORKBENCH_S3_BUCKET": "lab-audit-files",
    "WORKBENCH_S3_REGION": "eu-west-1",
    "WORKBENCH_S3_ADDRESSING_STYLE": "virtual",
    "EMAIL_HOST": "smtp.example.org",
}
# The default host of each service address in compose.yaml: a service of the same file.
DEFAULT_HOSTS = {
    "DATABASE_URL": "postgres",
    "CELERY_BROKER_URL": "redis",
    "WORKBENCH_CACHE_URL": "redis",
    "WORKBENCH_S3_ENDPOINT_URL": "minio",
}
SECRETS = {
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "POSTGRES_PASSWORD": "pg-pw",
    "REDIS_PASSWORD": "redis-pw",
    "MINIO_WORKBENCH_PASSWORD": "minio-pw",
    "AWS_ACCESS_KEY_ID": "bucket-user",
    "AWS_SECRET_ACCESS_KEY": "bucket-user-pw",
}


@pytest.fixture(scope="module")
def worker_services() -> dict[str, Any]:
    return dict(yaml.safe_load(WORKER_COMPOSE.read_text())["services"])


def own_expression(name: str, value: Any) -> re.Match[str] | None:
    """``${NAME<op>rest}`` taking up the whole value, NAME the variable the value is given as."""
    return re.fullmatch(rf"\$\{{{name}(:?[-?])(.*)\}}", str(value), re.S)


def test_every_service_address_comes_from_env_with_this_file_as_default(services) -> None:
    for name, service in workbench_services(services).items():
        env = service["environment"]
        for variable, elsewhere in ADDRESSES.items():
            expression = own_expression(variable, env[variable])
            assert expression and expression.group(1) == ":-", f"{name}: {variable} is fixed: {env[variable]}"
            assert filled(env[variable], SECRETS | {variable: elsewhere}) == elsewhere, (name, variable)
        for variable, host in DEFAULT_HOSTS.items():
            default = urlsplit(filled(env[variable], SECRETS))
            assert default.hostname == host and host in services, (name, variable, default)
        # No other value names a service of this file by itself: every URL is one .env may replace.
        for variable, value in env.items():
            if "://" in str(value):
                expression = own_expression(variable, value)
                assert expression and expression.group(1) == ":-", f"{name}: {variable}={value}"


def test_the_default_addresses_are_the_single_host_ones(services) -> None:
    env = compose_env(services["web1"], SECRETS)
    assert env["DATABASE_URL"] == "postgres://workbench:pg-pw@postgres:5432/workbench"
    assert env["CELERY_BROKER_URL"] == "redis://:redis-pw@redis:6379/0"
    assert env["WORKBENCH_CACHE_URL"] == "redis://:redis-pw@redis:6379/1"
    assert env["WORKBENCH_S3_ENDPOINT_URL"] == "http://minio:9000"
    # As compose: a required variable inside a default is still required (compose works defaults out).
    with pytest.raises(LookupError):
        interpolate(services["web1"]["environment"]["DATABASE_URL"], {"DATABASE_URL": "x"}, refused)


def test_the_app_images_name_their_tag_from_env(services, worker_services) -> None:
    for name, service in {**services, **worker_services}.items():
        if "build" in service:
            assert service["image"].endswith(":${WORKBENCH_IMAGE_TAG:-local}"), name
            assert filled(service["image"], {"WORKBENCH_IMAGE_TAG": "v1.4.2"}).endswith(":v1.4.2"), name
    for name, service in worker_services.items():
        assert service["image"] == services[name]["image"], f"{name}: another image than compose.yaml's"


def settings_queues() -> set[str]:
    text = (ROOT / "workbench" / "settings.py").read_text()
    default = re.search(r'^CELERY_TASK_DEFAULT_QUEUE = "(\w+)"', text, re.M)
    assert default is not None
    return {default.group(1), *re.findall(r'\{"queue": "(\w+)"\}', text)}


def queues_of(command: list[str]) -> set[str]:
    return set(command[command.index("-Q") + 1].split(","))


def test_the_worker_file_runs_workers_only(worker_services) -> None:
    assert set(worker_services) == {"worker-cpu", "worker-gpu"}
    assert worker_services["worker-gpu"]["profiles"] == ["gpu-worker"]
    assert worker_services["worker-cpu"]["profiles"] == ["cpu-worker"]
    for name, service in worker_services.items():
        assert service["command"][:4] == ["celery", "-A", "workbench", "worker"], name
        assert "ports" not in service and "depends_on" not in service, name
        assert service.get("healthcheck", {}).get("test"), name
        for volume in service.get("volumes", []):
            assert name == "worker-gpu" and (volume["target"], volume["read_only"]) == ("/models", True)
    gpu, cpu = worker_services["worker-gpu"], worker_services["worker-cpu"]
    assert queues_of(gpu["command"]) == {"gpu"} and queues_of(cpu["command"]) == {"celery"}
    assert queues_of(gpu["command"]) | queues_of(cpu["command"]) == settings_queues()
    assert gpu["command"][gpu["command"].index("--pool") + 1] == "solo"
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert gpu["build"] == {
        "context": ".",
        "args": {"TORCH_INDEX_URL": "${GPU_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu128}"},
    }


def test_the_worker_file_names_no_service_of_the_main_host_and_requires_every_address(
    worker_services,
) -> None:
    text = WORKER_COMPOSE.read_text()
    for host in ("@postgres:", "@redis:", "//minio:", "minio-init", "web1", "nginx"):
        assert host not in text.split("services:", 1)[1], host
    for name, service in worker_services.items():
        env = service["environment"]
        for variable in (
            "DJANGO_SECRET_KEY",
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "WORKBENCH_CACHE_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
        ):
            expression = own_expression(variable, env[variable])
            assert expression and expression.group(1) == ":?", f"{name}: {variable} is not required"
            with pytest.raises(LookupError):
                interpolate(env[variable], {}, refused)
        # The endpoint must be set too, but may be empty (AWS S3).
        expression = own_expression("WORKBENCH_S3_ENDPOINT_URL", env["WORKBENCH_S3_ENDPOINT_URL"])
        assert expression and expression.group(1) == "?", name
        assert interpolate(env["WORKBENCH_S3_ENDPOINT_URL"], {"WORKBENCH_S3_ENDPOINT_URL": ""}, refused) == ""
        for variable, elsewhere in ADDRESSES.items():
            assert filled(env[variable], SECRETS | {variable: elsewhere}) == elsewhere, (name, variable)
        assert set(env) <= settings_names() | BOTO3_NAMES, (
            f"{name}: settings.py reads no {set(env) - settings_names()}"
        )
        assert REQUIRED <= set(env), f"{name} lacks {REQUIRED - set(env)}"


def test_the_worker_environment_starts_the_settings_in_production(worker_services, tmp_path) -> None:
    given = SECRETS | {
        key: value
        for key, value in ADDRESSES.items()
        if key in ("DATABASE_URL", "CELERY_BROKER_URL", "WORKBENCH_CACHE_URL")
    }
    given |= {"WORKBENCH_S3_ENDPOINT_URL": "", "WORKBENCH_S3_BUCKET": "lab-audit-files"}
    env = compose_env(worker_services["worker-gpu"], given)
    env["WORKBENCH_DATA_DIR"] = str(tmp_path / "absent")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "production": True,
        "cache": "common.redis_cache.RedisCache",
        "mail": "django.core.mail.backends.smtp.EmailBackend",
        "bucket": "lab-audit-files",
        "model_dirs": ["/models"],
        "serve": "redirect",
    }
    assert not (tmp_path / "absent").exists()


def test_the_private_overlay_publishes_three_services_on_the_private_address_only(services) -> None:
    overlay = yaml.safe_load(PRIVATE_COMPOSE.read_text())["services"]
    assert set(overlay) == {"postgres", "redis", "minio"} and set(overlay) <= set(services)
    targets = set()
    for name, service in overlay.items():
        assert set(service) == {"ports"}, name  # nothing else of the service changes
        for entry in service["ports"]:
            assert entry.startswith("${WORKBENCH_PRIVATE_ADDRESS:?"), entry  # no default address at all
            with pytest.raises(LookupError):
                interpolate(entry, {}, refused)
            address, port, target = filled(entry, {"WORKBENCH_PRIVATE_ADDRESS": "10.0.0.5"}).split(":")
            assert address == "10.0.0.5" and port == target, entry
            targets.add(target)
    assert targets == {"5432", "6379", "9000"}


def test_every_variable_the_compose_files_read_is_named_in_the_example_env() -> None:
    """A lab's engineer learns every setting from `.env.compose.example` (commented where optional)."""
    used: set[str] = set()
    for name in ("compose.yaml", "compose.worker.yaml", "compose.private.yaml"):
        used |= set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", (ROOT / name).read_text()))
    example = (ROOT / ".env.compose.example").read_text()
    named = set(re.findall(r"^#?\s*([A-Z_][A-Z0-9_]*)=", example, flags=re.M))
    assert used, "no ${VARIABLE} found in the compose files"
    assert used <= named, sorted(used - named)
