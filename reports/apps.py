from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "reports"
    verbose_name = "Audit reports"
    default_auto_field = "django.db.models.BigAutoField"
