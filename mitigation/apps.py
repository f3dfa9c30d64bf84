from django.apps import AppConfig


class MitigationConfig(AppConfig):
    name = "mitigation"
    verbose_name = "Mitigation loops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register this app's task and its hook on finished generation and labelling tasks in every
        # process, so a loop step advances wherever its jobs run.
        from mitigation import tasks  # noqa: F401
