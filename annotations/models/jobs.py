"""Exports and imports run by a background worker (their lifecycle is ``common.jobs``'s)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotations.models.studies import Study
from common.jobs import BackgroundJob


class ExportJob(BackgroundJob):
    """A study export written to a file by a background task (large studies); its lifecycle is
    ``common.jobs``'s."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="export_jobs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    format = models.CharField(max_length=16)
    target = models.CharField(
        max_length=1024, blank=True, help_text="A bucket prefix the file is written to (s3://bucket/prefix/)"
    )
    raw = models.BooleanField(
        default=False, help_text="CSV: text cells as stored (no apostrophe before formula-like text)"
    )
    file = models.FileField(upload_to="exports/", max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"export {self.pk} of study {self.study_id} ({self.format}, {self.status})"


class ImportJob(BackgroundJob):
    """An import run by a worker (an upload kept in storage, or a bucket address): items, or another
    kind of import (``kind``, with its ``options``); its lifecycle is ``common.jobs``'s, and a job
    that ends (done, failed or cancelled) deletes its kept upload and files."""

    class Kind(models.TextChoices):
        ITEMS = "items", "Items"
        LABELSTUDIO = "labelstudio", "Label Studio export"
        COCO = "coco", "COCO boxes"
        ANNOTATIONS = "annotations", "Annotations"
        FEATURES = "features", "Embeddings and captions"
        STEREOTYPES = "stereotypes", "Stereotype table"
        CONTROLS = "controls", "Control items"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="import_jobs")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ITEMS)
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="The import's options (a COCO import's question, annotator, kind) and the other files "
        "it keeps in storage (files: a labeling config, visual-attribute ratings)",
    )
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    upload = models.CharField(
        max_length=255, blank=True, help_text="The upload kept in storage (a file, or a folder ending in /)"
    )
    address = models.CharField(max_length=1024, blank=True, help_text="A bucket address, s3://bucket/prefix/")
    label = models.CharField(max_length=255, blank=True, help_text="What the researcher sent, as shown")
    report = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} into study {self.study_id} ({self.status})"
