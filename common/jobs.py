"""The lifecycle every background job shares (exports, generation, labelling).

A job row is claimed compare-and-set, so two workers never run one job; its task is sent by name
once the transaction that made the row commits, so services never import their tasks modules.
"""

from __future__ import annotations

from django.db import models


class BackgroundJob(models.Model):
    """What generation and labelling jobs share: a status claimed compare-and-set, cancellation
    between batches, an error message, and timestamps."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)
