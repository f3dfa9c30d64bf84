"""Django project of the Stereotype Audit Workbench (settings, root urls, Celery app, dashboards)."""

from workbench.celery import app as celery_app

__all__ = ["celery_app"]
