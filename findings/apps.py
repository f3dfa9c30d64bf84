from django.apps import AppConfig


class FindingsConfig(AppConfig):
    """The papers' findings, comparison and figures: reads the annotations app, holds no models
    (docs/architecture.md, "findings")."""

    name = "findings"
    verbose_name = "Findings"
