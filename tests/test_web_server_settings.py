"""The web server's settings chosen by measurement (docs/deploy.md, "Web server"; docs/benchmarks.md,
"Claim path at the limit"): gunicorn's C HTTP parser, where it is installed (optional), is chosen by
gunicorn's default with the request limits of docs/security.md, and every deploy file keeps upstream
connections open longer than nginx does."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from gunicorn.config import Config  # type: ignore[import-untyped]
from gunicorn.http import message  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
NGINX_UPSTREAM_IDLE_SECONDS = 60  # nginx's keepalive_timeout for upstream connections (its default)


@pytest.mark.skipif(
    importlib.util.find_spec("gunicorn_h1c") is None,
    reason="gunicorn-h1c (optional, docs/deploy.md) is not installed",
)
def test_gunicorn_uses_its_c_parser_with_the_request_limits() -> None:
    config = Config()
    for name, value in (
        ("limit_request_line", 8190),
        ("limit_request_fields", 100),
        ("limit_request_field_size", 8190),
    ):
        config.set(name, value)
    assert config.http_parser == "auto"
    assert message._check_fast_parser(config) is True  # gunicorn-h1c, with limit enforcement


def _keep_alive(command: str) -> int:
    found = re.search(r'--keep-alive"?,?\s*"?(\d+)', command)
    assert found, command
    return int(found.group(1))


def test_every_deploy_file_keeps_upstream_connections_longer_than_nginx() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    service = (ROOT / "deploy/systemd/workbench-web.service").read_text()
    command = dockerfile[dockerfile.index("CMD") :]
    for text in (command, service):
        assert _keep_alive(text) > NGINX_UPSTREAM_IDLE_SECONDS
        assert "--threads" in text  # gthread: keep-alive connections wait in its poller, not a thread
    nginx = (ROOT / "deploy/nginx.conf").read_text()
    upstream = nginx[nginx.index("upstream workbench") :]
    upstream = upstream[: upstream.index("}")]
    assert "keepalive " in upstream and "keepalive_timeout" not in upstream
    # The C parser is optional: a source package that needs a compiler, which the slim image lacks.
    assert not re.search(r"^gunicorn-h1c", (ROOT / "requirements.txt").read_text(), re.M)
