"""Machine labelling: jobs running a labeller over a study, failed attempts and the answer cache. What
labellers compute besides answers (embeddings, captions) is ``annotations.models.ItemFeature``: findings
read it, and ``annotations`` reads only its own rows.

These models lived in ``generation`` before and moved here by a state-only migration, so an existing
database kept its rows; their tables kept the ``generation_*`` names until migration 0007 renamed them
to ``labelling_*`` (Django's default names).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from common.jobs import BackgroundJob


class LabellingJob(BackgroundJob):
    """A machine labeller (a machine ``Annotator``) run over a study's items, or a seeded sample."""

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="labelling_jobs")
    annotator = models.ForeignKey(
        "annotations.Annotator", on_delete=models.PROTECT, related_name="labelling_jobs"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    sample_size = models.PositiveIntegerField(null=True, blank=True, help_text="None: every item")
    metadata_filter = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "Only the items whose metadata holds these values, e.g. {'prompt_set': NAME}; {}: every item"
        ),
    )
    seed = models.BigIntegerField(default=0)
    total_items = models.PositiveIntegerField(default=0)
    done_items = models.PositiveIntegerField(default=0)
    answered = models.PositiveIntegerField(default=0, help_text="Answers stored")
    failed = models.PositiveIntegerField(default=0, help_text="Answers that failed every attempt")
    cached = models.PositiveIntegerField(default=0, help_text="Answers served from the cache")
    skipped = models.PositiveIntegerField(default=0, help_text="Items already answered by this labeller")
    cost_usd = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return f"{self.annotator} on study {self.study_id} ({self.status})"

    @property
    def progress_percent(self) -> int:
        return 100 if not self.total_items else min(100, round(100 * self.done_items / self.total_items))


class LabelAttempt(models.Model):
    """An answer a machine gave that was not stored: invalid, unparseable, or an error, with the raw text."""

    job = models.ForeignKey(LabellingJob, on_delete=models.CASCADE, related_name="attempts")
    item = models.ForeignKey("annotations.Item", on_delete=models.CASCADE, related_name="+")
    question_key = models.CharField(max_length=64)
    attempt = models.PositiveSmallIntegerField(default=1)
    raw = models.TextField(blank=True)
    error = models.TextField()
    latency_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.question_key} on item {self.item_id}: {self.error[:60]}"


class LabelCacheEntry(models.Model):
    """A model's raw answer for (image hashes, rendered prompt, model, settings): a re-run costs nothing."""

    key = models.CharField(max_length=64, unique=True)
    raw = models.TextField()
    usage = models.JSONField(default=dict, blank=True)
    model = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "label cache entries"  # not Django's "entrys"

    def __str__(self) -> str:
        return self.key
