"""Generation jobs (a prompt set through a diffusers model into a study's items) and their failures."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


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


class GenerationJob(BackgroundJob):
    """(prompt set, model spec, images per prompt, base seed) -> items in a study, with provenance.

    Re-running a job only makes the images whose items are missing, so a job run twice (or
    resumed after a crash or a cancellation) never makes an image twice.
    """

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="generation_jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    name = models.CharField(max_length=200, help_text="The prompt set's name")
    paper = models.CharField(max_length=32, blank=True)
    parent_name = models.CharField(max_length=200, blank=True, help_text="The prompt set this one derives from")
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
        constraints = [models.CheckConstraint(condition=~Q(model_label=""), name="generation_job_model_label")]

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
        constraints = [models.UniqueConstraint(fields=["job", "external_id"], name="generation_failure_unique")]

    def __str__(self) -> str:
        return f"{self.external_id}: {self.reason[:60]}"


class LabellingJob(BackgroundJob):
    """A machine labeller (a machine ``Annotator``) run over a study's items, or a seeded sample."""

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="labelling_jobs")
    annotator = models.ForeignKey("annotations.Annotator", on_delete=models.PROTECT, related_name="labelling_jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    sample_size = models.PositiveIntegerField(null=True, blank=True, help_text="None: every item")
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

    def __str__(self) -> str:
        return self.key


class ItemFeature(models.Model):
    """What a machine computed about an item besides answers: CLIP image embeddings (stereotypical
    pull) and captions (salience)."""

    class Kind(models.TextChoices):
        EMBEDDING = "embedding", "Image embedding"
        CAPTIONS = "captions", "Captions"

    item = models.ForeignKey("annotations.Item", on_delete=models.CASCADE, related_name="features")
    annotator = models.ForeignKey("annotations.Annotator", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    vector = models.BinaryField(null=True, blank=True, help_text="float32 little-endian, one row per image")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "annotator", "kind"], name="item_feature_unique")]

    def __str__(self) -> str:
        return f"{self.kind} of item {self.item_id}"
