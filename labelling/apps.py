from django.apps import AppConfig


class LabellingConfig(AppConfig):
    name = "labelling"
    verbose_name = "Machine labelling"
    default_auto_field = "django.db.models.BigAutoField"
