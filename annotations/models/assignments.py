"""Items leased to annotators, and the drafts of answers to a leased item."""

from __future__ import annotations

from django.db import models

from annotations.models.annotators import Annotator
from annotations.models.items import Item
from annotations.models.studies import MAX_POOL_CHARS, Study


class Assignment(models.Model):
    """An item leased to one annotator; an annotator never gets the same item twice."""

    class Status(models.TextChoices):
        LEASED = "leased", "Leased"
        SUBMITTED = "submitted", "Submitted"
        SKIPPED = "skipped", "Skipped"
        EXPIRED = "expired", "Expired"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="assignments")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.LEASED)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    skip_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    time_spent_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="Time on the task, as measured"
    )
    rater_pool = models.CharField(
        max_length=MAX_POOL_CHARS,
        blank=True,
        default="",
        help_text="The annotator's value of the study's rater-pool attribute when the item was leased "
        "(what the pool quotas count; empty: the study declares no pools)",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "annotator"], name="assignment_unique")]
        indexes = [
            models.Index(fields=["study", "status"]),
            models.Index(fields=["annotator", "status"]),
            models.Index(fields=["item", "status"], name="assignment_item_status"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} for annotator {self.annotator_id} ({self.status})"


class AssignmentDraft(models.Model):
    """Answers to a leased item not yet submitted, kept on the server so the task page restores them on
    any device (docs/annotating.md, "Drafts"). ``fields`` is the task form as ``[name, value]`` pairs
    (``q-KEY``, ``shown-KEY``, ``reason-KEY``), checked like answers but possibly incomplete
    (``services/drafts.py``). Only the assignment's annotator writes or reads it, while the lease is
    theirs; it goes on submit, skip, release and expiry, and with the assignment."""

    assignment = models.OneToOneField(
        Assignment, on_delete=models.CASCADE, primary_key=True, related_name="draft"
    )
    fields = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"draft of assignment {self.assignment_id}"
