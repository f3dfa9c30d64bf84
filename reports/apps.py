from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "reports"
    verbose_name = "Audit reports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register this app's task in every process, so ``common.jobs.job_enqueue`` finds it by name.
        from reports import tasks  # noqa: F401
