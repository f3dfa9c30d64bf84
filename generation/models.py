"""Generation jobs (a prompt set through a diffusers model into a study's items) and their failures."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from common.jobs import BackgroundJob


class GenerationJob(BackgroundJob):
    """(prompt set, model spec, images per prompt, base seed) -> items in a study, with provenance.

    Re-running a job only makes the images whose items are missing, so a job run twice (or
    resumed after a crash or a cancellation) never makes an image twice.
    """

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="generation_jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    name = models.CharField(max_length=200, help_text="The prompt set's name")
    paper = models.CharField(max_length=32, blank=True)
    parent_name = models.CharField(
        max_length=200, blank=True, help_text="The prompt set this one derives from"
    )
    prompts = models.JSONField(help_text="[{text, condition, metadata, images_per_prompt}]")
    model_spec = models.JSONField(help_text="generation.pipelines.ModelSpec fields")
    model_label = models.CharField(max_length=120, help_text="Short model name stored on items")
    base_seed = models.BigIntegerField(default=0)
    total_images = models.PositiveIntegerField(default=0)
    generated = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0, help_text="Images already in the study")
    failed = models.PositiveIntegerField(default=0)
    provenance = models.JSONField(default=dict, blank=True)

    class Meta(BackgroundJob.Meta):
        constraints = [
            models.CheckConstraint(condition=~Q(model_label=""), name="generation_job_model_label")
        ]

    def __str__(self) -> str:
        return f"{self.name} with {self.model_label} ({self.status})"

    @property
    def done_images(self) -> int:
        return self.generated + self.skipped + self.failed

    @property
    def progress_percent(self) -> int:
        return 100 if not self.total_images else min(100, round(100 * self.done_images / self.total_images))


class GenerationFailure(models.Model):
    """One image a job could not make, with the reason; cleared when a re-run makes it."""

    job = models.ForeignKey(GenerationJob, on_delete=models.CASCADE, related_name="failures")
    external_id = models.CharField(max_length=255)
    prompt = models.TextField()
    condition = models.CharField(max_length=128)
    seed = models.BigIntegerField()
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "external_id"], name="generation_failure_unique")
        ]

    def __str__(self) -> str:
        return f"{self.external_id}: {self.reason[:60]}"


class WorkerDevice(models.Model):
    """What a Celery worker of the ``gpu`` queue saw of CUDA, recorded by the worker itself when it
    starts and when it runs a generation job (``generation/environment.py``), so that the generation
    page says what the workers see without importing torch in the web process."""

    hostname = models.CharField(max_length=255, unique=True, help_text="The worker's Celery node name")
    cuda_available = models.BooleanField(default=False)
    device = models.CharField(max_length=200, blank=True, help_text="The first CUDA device's name")
    torch_version = models.CharField(max_length=64, blank=True)
    problem = models.CharField(max_length=1000, blank=True, help_text="Why torch could not say")
    seen_at = models.DateTimeField(help_text="When the worker last recorded this")

    class Meta:
        ordering = ["-seen_at"]

    def __str__(self) -> str:
        return f"{self.hostname}: CUDA {'available' if self.cuda_available else 'not available'}"
