from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
    verbose_name = "Generation"
    default_auto_field = "django.db.models.BigAutoField"
