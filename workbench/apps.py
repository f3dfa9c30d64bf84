"""The project's own app: its start-up hook."""

from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig
from django.conf import settings

from workbench.file_modes import private_folder

EMBEDDED_BROKER = "sqla+sqlite:///"


class WorkbenchConfig(AppConfig):
    name = "workbench"

    def ready(self) -> None:
        """The embedded SQLite-file broker's folder, made at start-up (importing the settings creates
        no folder; with a Redis broker nothing is made), and the data folder closed to other accounts
        (0700) where an older install left it world-readable (workbench/file_modes.py)."""
        url = str(settings.CELERY_BROKER_URL)
        if url.startswith(EMBEDDED_BROKER):
            Path(url.removeprefix(EMBEDDED_BROKER)).parent.mkdir(parents=True, exist_ok=True)
        data = Path(settings.DATA_DIR)
        if data.is_dir():
            private_folder(data)
