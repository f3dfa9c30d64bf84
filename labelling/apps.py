from django.apps import AppConfig


class LabellingConfig(AppConfig):
    name = "labelling"
    verbose_name = "Machine labelling"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register this app's tasks in every process (web ones too), so ``common.jobs.job_enqueue``
        # finds them by name.
        from labelling import tasks  # noqa: F401
