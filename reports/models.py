"""The report job: a report made by a worker (tex and pdf, and every format of a large study); its
lifecycle is ``common.jobs``'s, like an export's."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotations.models import Study
from common.jobs import BackgroundJob


class ReportJob(BackgroundJob):
    """One report to make: the study, the format and the options it was asked with; when done, its
    file (the main file, or a zip of it and its figures) and the name and type it downloads with, and
    its supplement (``reports.supplement``: every findings table as CSV, in a zip)."""

    class Correction(models.TextChoices):
        HOLM = "holm", "Holm"
        BH = "bh", "Benjamini-Hochberg"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="report_jobs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    format = models.CharField(max_length=8)
    source = models.CharField(
        max_length=200, blank=True, help_text="The label source (blank: the protocol's)"
    )
    correction = models.CharField(max_length=8, choices=Correction.choices, default=Correction.HOLM)
    compare = models.JSONField(
        default=list, blank=True, help_text="Ids of the studies compared with it, in order"
    )
    file = models.FileField(upload_to="reports/", max_length=255, blank=True)
    filename = models.CharField(max_length=255, blank=True, help_text="The name the file downloads with")
    content_type = models.CharField(max_length=100, blank=True)
    supplement = models.FileField(
        upload_to="reports/",
        max_length=255,
        blank=True,
        help_text="The zip of every findings table as CSV that goes with the report (none for heds)",
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"report {self.pk} of study {self.study_id} ({self.format}, {self.status})"
