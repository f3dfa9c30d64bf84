"""Django project of the Stereotype Audit Workbench (settings, root urls, Celery app, dashboards)."""

from workbench.file_modes import private_file_modes

private_file_modes()  # before anything creates a file: 0600 files, 0700 folders (docs/security.md)

from workbench.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
