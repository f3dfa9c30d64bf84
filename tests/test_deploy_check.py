"""`manage.py check --deploy` is clean with the production settings that docs/deploy.md documents (its
first ```env block), run in a subprocess as an operator would; and the embedded defaults, meant for one
machine without HTTPS, are not silently taken for production."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN_PREFIXES = ("DJANGO_", "WORKBENCH_", "DATABASE_URL", "CELERY_")


def documented_production_env() -> dict[str, str]:
    """KEY=VALUE lines of the first ```env block of docs/deploy.md (comments after '#' dropped)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = re.search(r"```env\n(.*?)```", text, re.S)
    assert block, "docs/deploy.md has no ```env block of production settings"
    values = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def run_deploy_check(values: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(OWN_PREFIXES)}
    env.update(values)
    env["WORKBENCH_DATA_DIR"] = str(tmp_path / "var")
    env["WORKBENCH_MEDIA_ROOT"] = str(tmp_path / "media")
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_check_deploy_is_clean_with_the_documented_production_settings(tmp_path) -> None:
    values = documented_production_env()
    for needed in (
        "DJANGO_DEBUG",
        "DJANGO_SECURE_COOKIES",
        "DJANGO_SECURE_SSL_REDIRECT",
        "DJANGO_SECURE_HSTS_SECONDS",
        "DJANGO_SECURE_PROXY_SSL_HEADER",
        "DJANGO_ALLOWED_HOSTS",
    ):
        assert needed in values, needed
    values["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)  # the documented placeholder is refused
    result = run_deploy_check(values, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout, result.stdout + result.stderr


def test_the_documented_placeholder_secret_and_the_embedded_defaults_do_not_pass(tmp_path) -> None:
    placeholder = documented_production_env()["DJANGO_SECRET_KEY"]
    result = run_deploy_check({"DJANGO_SECRET_KEY": placeholder}, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    for code in ("W009", "W004", "W008", "W012", "W016"):  # weak key, no HSTS, no redirect, cookies
        assert f"security.{code}" in output, code
