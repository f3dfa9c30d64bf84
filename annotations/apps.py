from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Annotations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register this app's tasks in every process (web ones too), so ``common.jobs.job_enqueue``
        # finds them by name.
        from annotations import tasks  # noqa: F401
