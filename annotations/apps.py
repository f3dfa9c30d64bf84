from typing import Any

from django.apps import AppConfig
from django.core import checks


def bucket_entries_check(**kwargs: Any) -> list[checks.CheckMessage]:
    """The bucket entries imports and exports may use, checked at start-up (docs/security.md)."""
    from annotations.interchange.bucket_addresses import bucket_settings_problems

    return [checks.Warning(problem, id="workbench.W010") for problem in bucket_settings_problems()]


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Annotations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(bucket_entries_check, checks.Tags.security)
        # Register this app's tasks in every process (web ones too), so ``common.jobs.job_enqueue``
        # finds them by name.
        # The token cache's signals, in every process: a token revoked (or an account changed) by the
        # admin, a command or a worker writes the shared cache's new generation too (docs/api.md).
        from annotations import (
            tasks,  # noqa: F401
            token_cache,  # noqa: F401
        )
