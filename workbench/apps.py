"""The project's own app: its start-up hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.conf import settings

from reports.figures import figure_drawer_register
from workbench.file_modes import private_folder

EMBEDDED_BROKER = "sqla+sqlite:///"


def _draw_figure(report: dict[str, Any], table_key: str, params: dict[str, str], fmt: str) -> bytes | None:
    """The findings page's figure drawing, for the audit report (imported when a report draws, so no
    process loads matplotlib at start-up)."""
    from annotations.views.figures import figure_render

    return figure_render(report, table_key, params, fmt)


class WorkbenchConfig(AppConfig):
    name = "workbench"

    def ready(self) -> None:
        """The embedded SQLite-file broker's folder, made at start-up (importing the settings creates
        no folder; with a Redis broker nothing is made), and the data folder closed to other accounts
        (0700) where an older install left it world-readable (workbench/file_modes.py); and the report's
        figure drawer (reports/figures.py)."""
        url = str(settings.CELERY_BROKER_URL)
        if url.startswith(EMBEDDED_BROKER):
            Path(url.removeprefix(EMBEDDED_BROKER)).parent.mkdir(parents=True, exist_ok=True)
        figure_drawer_register(_draw_figure)
        data = Path(settings.DATA_DIR)
        if data.is_dir():
            private_folder(data)
