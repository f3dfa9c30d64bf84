from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
    verbose_name = "Generation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register this app's tasks in every process (web ones too), so ``common.jobs.job_enqueue``
        # finds them by name.
        from generation import tasks  # noqa: F401
