"""Files the workbench creates are its own account's only (docs/security.md, "File modes"): the data
folder 0700; the SQLite database, mail files and exports 0600, in a fresh process started as
``manage.py`` is, and through the storage for exports."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from annotations.models import ExportJob
from tests.factories import ItemFactory
from tests.helpers import client_for

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
from django.core.mail import send_mail
from django.db import connection
connection.ensure_connection()
send_mail("subject", "a reset link", None, ["someone@example.org"])
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_data_folder_database_and_mail_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "WORKBENCH_EMAIL_BACKEND")
    }
    env.update(WORKBENCH_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="workbench.settings")
    old = os.umask(0o022)  # what a shell usually gives: the workbench must not rely on it
    try:
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SCRIPT], cwd=ROOT, env=env, check=True, timeout=120
        )
    finally:
        os.umask(old)
    assert _mode(data) == 0o700
    database = data / "workbench.sqlite3"
    assert database.exists() and _mode(database) == 0o600
    mail = data / "mail"
    files = list(mail.iterdir())
    assert _mode(mail) == 0o700 and files and all(_mode(f) == 0o600 for f in files)
    assert _mode(data / "secret_key") == 0o600


def test_an_older_world_readable_data_folder_is_closed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(WORKBENCH_DATA_DIR=str(data))
    subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    assert _mode(data) == 0o700


@pytest.mark.django_db
@pytest.mark.filesystem  # modes of files in the media folder (a bucket's objects have no mode)
def test_export_files_are_private(study, owner, django_capture_on_commit_callbacks) -> None:
    assert settings.FILE_UPLOAD_PERMISSIONS == 0o600
    ItemFactory.create(study=study)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(f"/api/studies/{study.pk}/export/zip/")
    job = ExportJob.objects.get(pk=response.json()["id"])
    path = Path(job.file.path)
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
