"""Answers and what is derived from them: annotations with their revisions, machine-computed item
features, consensus labels, and the log of machine labels revealed to annotators."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from annotations.models.annotators import Annotator
from annotations.models.assignments import Assignment
from annotations.models.items import Item
from annotations.models.studies import Study


class Annotation(models.Model):
    """One annotator's current answer to one question on one item. Edits keep revisions."""

    class Source(models.TextChoices):
        UI = "ui", "Task page"
        API = "api", "API"
        IMPORT = "import", "Import"
        LABELLER = "labeller", "Machine labeller"
        ADJUDICATION = "adjudication", "Adjudication"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="annotations")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="annotations")
    question_key = models.CharField(max_length=64)
    value = models.JSONField()
    shown = models.JSONField(null=True, blank=True, help_text="multi: option keys shown to this annotator")
    reason = models.TextField(blank=True)
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator", "question_key"], name="annotation_unique"),
        ]
        indexes = [
            models.Index(fields=["study", "question_key"]),
            models.Index(fields=["annotator", "study"]),
        ]

    def __str__(self) -> str:
        return f"{self.question_key} on item {self.item_id} by {self.annotator_id}"

    def snapshot(self) -> dict[str, Any]:
        return {"value": self.value, "shown": self.shown, "reason": self.reason}


class ItemFeature(models.Model):
    """What a machine computed about an item besides answers: image embeddings (stereotypical pull) and
    captions (salience), by one machine annotator (a labeller, or one named in an imported file).

    It lives here, beside ``Annotation``, because findings read it and ``annotations`` reads only its own
    rows; labellers (``labelling``) and the feature import write it. The table kept the name it had when
    the model lived in ``generation`` and then ``labelling`` (moved by state-only migrations).
    """

    class Kind(models.TextChoices):
        EMBEDDING = "embedding", "Image embedding"
        CAPTIONS = "captions", "Captions"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="features")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    vector = models.BinaryField(null=True, blank=True, help_text="float32 little-endian, one row per image")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "generation_itemfeature"
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator", "kind"], name="item_feature_unique")
        ]

    def __str__(self) -> str:
        return f"{self.kind} of item {self.item_id}"


class AnnotationRevision(models.Model):
    """An earlier state of an annotation, kept when it is changed."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    value = models.JSONField()
    shown = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    replaced_at = models.DateTimeField(auto_now_add=True)
    replaced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["annotation_id", "id"]

    def __str__(self) -> str:
        return f"revision of annotation {self.annotation_id}"


class RevealLog(models.Model):
    """One showing of the machine labels to an annotator after they submitted ("reveal after submit").

    ``shown`` is exactly what was displayed; ``agreement`` maps question key to "agree" or
    "disagree" once the annotator says so. Rows are never updated except to record that answer,
    so a researcher can measure anchoring (did later answers move towards the machine's?).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="reveals")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="reveals")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="reveals")
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="reveals")
    shown = models.JSONField(default=list)
    agreement = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["study", "annotator"])]

    def __str__(self) -> str:
        return f"reveal of item {self.item_id} to annotator {self.annotator_id}"


class ConsensusLabel(models.Model):
    """The label the study adopts for (item, question), with the rule and the annotations behind it.

    Rules are those of ``metrics/consensus.py`` (see ``metrics/consensus.md``); ``adjudicated`` rows
    are an expert's decision and are never overwritten by a recomputation.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="consensus_labels")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="consensus_labels")
    question_key = models.CharField(max_length=64)
    value = models.JSONField(null=True, blank=True, help_text="None when unresolved")
    resolved = models.BooleanField(default=False)
    rule = models.CharField(max_length=32)
    params = models.JSONField(default=dict, blank=True)
    support = models.JSONField(default=list, blank=True, help_text="Ids of the annotations that agree")
    confidence = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True, help_text="Why it is unresolved (e.g. a tie)")
    n_votes = models.PositiveIntegerField(default=0)
    pending = models.BooleanField(
        default=False,
        help_text="The item has fewer judgements than the study's overlap: no label yet (docs/agreement.md)",
    )
    adjudicated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "question_key"], name="consensus_unique")]
        indexes = [models.Index(fields=["study", "question_key", "resolved"])]

    def __str__(self) -> str:
        return f"{self.question_key} of item {self.item_id}: {self.value!r} ({self.rule})"
