"""Start-up (Issue 16, point 6): a favicon on every page, password-reset pages in the workbench's
look, and scripts/run.sh printing the address and demo accounts last, access log off by default."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client

from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.django_db


def test_favicon_is_linked_and_answered(client: Client) -> None:
    login = client.get("/accounts/login/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in login
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"].startswith("image/svg+xml")
    assert b"<svg" in b"".join(icon.streaming_content)  # type: ignore[attr-defined]


def test_password_reset_pages_use_the_workbench_look(
    client: Client, settings, django_capture_on_commit_callbacks
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    UserFactory.create(username="ann", email="ann@example.org", role="annotator")
    form = client.get("/accounts/password_reset/")
    assert form.status_code == 200 and 'class="topbar"' in form.content.decode()
    with django_capture_on_commit_callbacks(execute=True):  # the mail is a task queued after the commit
        sent = client.post("/accounts/password_reset/", {"email": "ann@example.org"}, follow=True)
    assert "Check your email" in sent.content.decode() and len(mail.outbox) == 1
    link = next(line for line in mail.outbox[0].body.splitlines() if "/accounts/reset/" in line).strip()
    path = link.split("://", 1)[1].split("/", 1)[1]
    confirm = client.get(f"/{path}", follow=True)
    text = confirm.content.decode()
    assert "Choose a new password" in text and 'class="topbar"' in text


def test_mail_defaults_to_files_under_the_data_dir(settings) -> None:
    from workbench import settings as project

    if "WORKBENCH_EMAIL_BACKEND" not in os.environ:
        assert project.EMAIL_BACKEND == "django.core.mail.backends.filebased.EmailBackend"
    assert Path(project.EMAIL_FILE_PATH).parent == Path(project.DATA_DIR)


def _run_sh(function: str, env: dict[str, str] | None = None) -> str:
    command = f"source scripts/run.sh && {function}"
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


def test_run_sh_banner_ends_with_the_address_the_login_and_the_accounts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "demo-accounts.json").write_text('{"admin": "pw-a", "annotator1": "pw-1"}')
    out = _run_sh("print_banner 8123", {"WORKBENCH_DATA_DIR": str(data)}).splitlines()
    assert out[1] == "The workbench is at http://127.0.0.1:8123/"
    assert "http://127.0.0.1:8123/accounts/login/" in out[2]
    assert out[-3:] == ["Demo accounts (username / password):", "  admin        pw-a", "  annotator1   pw-1"]


def test_run_sh_starts_quietly_and_prints_the_banner_last() -> None:
    script = (ROOT / "scripts/run.sh").read_text()
    body = script[script.index('if [[ "${BASH_SOURCE[0]}" != "$0" ]]') :]
    assert "setup_demo --no-accounts" in body and "--logfile" in body
    assert body.index("celery -A workbench worker") < body.index("gunicorn") < body.index("print_banner")
    assert "--access-logfile" not in body  # only through access_log_args
    assert _run_sh("access_log_args", {"WORKBENCH_ACCESS_LOG": "0"}).strip() == ""
    assert _run_sh("access_log_args", {"WORKBENCH_ACCESS_LOG": "1"}).strip() == "--access-logfile -"
