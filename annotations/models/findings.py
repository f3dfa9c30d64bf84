"""What a study's findings rest on: the validation sample humans check a machine labeller on, the
reliability gate's thresholds and the questions left out of the findings."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotations.models.annotators import Annotator
from annotations.models.items import Item
from annotations.models.studies import Study


class ValidationSample(models.Model):
    """The items humans validate a machine labeller on (``services/validation_sample.py``).

    While a study has one, claims hand out only its items (``ValidationSampleItem``, joined by the claim
    query); a sample whose items were all deleted therefore hands out nothing, as before.
    """

    study = models.OneToOneField(
        Study, primary_key=True, on_delete=models.CASCADE, related_name="validation_sample"
    )
    labeller = models.ForeignKey(
        Annotator,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The machine labeller the sample was drawn for",
    )
    labeller_name = models.CharField(max_length=150, blank=True)
    seed = models.BigIntegerField(default=0)
    stratify_by = models.CharField(max_length=200, blank=True)
    design = models.CharField(
        max_length=16,
        blank=True,
        help_text="uniform, stratified or active; blank: drawn without stored inclusion probabilities "
        "(before designs, or restored from an export), which PPI refuses",
    )
    design_params = models.JSONField(default=dict, blank=True, help_text="e.g. active: against, mix")
    frame_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many items the sample was drawn from (the labeller's items)"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"validation sample of study {self.study_id}"


class ValidationSampleItem(models.Model):
    """One item of a study's validation sample (an item of that study: the service checks it)."""

    sample = models.ForeignKey(ValidationSample, on_delete=models.CASCADE, related_name="items")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    inclusion_probability = models.FloatField(
        null=True,
        blank=True,
        help_text="The chance the design gave this item of being drawn (PPI weights by 1/pi); blank: unknown",
    )

    class Meta:
        ordering = ["item_id"]
        constraints = [
            models.UniqueConstraint(fields=["sample", "item"], name="validation_sample_item_unique")
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} in the validation sample of study {self.sample_id}"


class FindingsReliability(models.Model):
    """A study's own thresholds for the reliability gate of its findings (docs/metrics.md, "Reliability
    gate"); without a row Krippendorff's (2004) 0.800 / 0.667 and 10 pairable items apply."""

    study = models.OneToOneField(
        Study, primary_key=True, on_delete=models.CASCADE, related_name="findings_reliability"
    )
    reliable_at = models.FloatField(default=0.8)
    tentative_at = models.FloatField(default=0.667)
    min_items = models.PositiveIntegerField(default=10)
    chosen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "findings reliability thresholds"
        verbose_name_plural = "findings reliability thresholds"
        constraints = [
            models.CheckConstraint(
                condition=Q(tentative_at__lte=F("reliable_at")), name="findings_reliability_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"reliability thresholds of study {self.study_id}"


class FindingsExclusion(models.Model):
    """A question a researcher left out of a study's findings (its labels feed no table), who and why;
    the report states it (docs/metrics.md, "Reliability gate")."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="findings_exclusions")
    question_key = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["question_key"]
        constraints = [
            models.UniqueConstraint(fields=["study", "question_key"], name="findings_exclusion_unique")
        ]

    def __str__(self) -> str:
        return f"{self.question_key} left out of study {self.study_id}'s findings"
