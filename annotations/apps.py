from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Annotations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register this app's tasks in every process (web ones too), so ``common.jobs.job_enqueue``
        # finds them by name.
        # The token cache's signals, in every process: a token revoked (or an account changed) by the
        # admin, a command or a worker writes the shared cache's new generation too (docs/api.md).
        from annotations import (
            tasks,  # noqa: F401
            token_cache,  # noqa: F401
        )
