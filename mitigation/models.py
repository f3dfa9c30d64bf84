"""InterMit loops (BiasConnect, paper section 4): a researcher's choice of axes B*, weights p and epsilon
for one prompt group of a study, and the steps taken, each recorded with what it measured.

A step is no job of its own: it is one generation job (the ``biasconnect-mitigation`` prompt set of
the axes mitigated so far) and, with a labeller, one labelling job over the items that job made, so
a step resumes the way those jobs do (``common.jobs``). The step row records the numbers before and
after and which jobs did the work.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class MitigationLoop(models.Model):
    """InterMit over one prompt group (occupation) of a bias-axes study."""

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="mitigation_loops")
    group = models.CharField(
        max_length=200, help_text="The prompt group mitigated, e.g. the occupation nurse"
    )
    axes = models.JSONField(help_text="B*: the axes to debias, in order")
    weights = models.JSONField(help_text="p: axis -> priority weight, summing to 1")
    epsilon = models.FloatField(default=0.35, help_text="Stop when tau <= epsilon")
    targets = models.JSONField(
        default=dict, blank=True, help_text="D*: axis -> shares per option (an axis left out: uniform)"
    )
    annotator = models.ForeignKey(
        "annotations.Annotator",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The machine labeller that labels each step's images; empty: people label them",
    )
    model_spec = models.JSONField(help_text="generation.pipelines.ModelSpec fields for each step's images")
    model_label = models.CharField(max_length=120, blank=True)
    images_per_step = models.PositiveIntegerField(
        default=48, help_text="Images of the mitigated prompts per step (A.7: 48, or a few more)"
    )
    base_seed = models.BigIntegerField(default=0)
    initial_labelling_job = models.ForeignKey(
        "labelling.LabellingJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(epsilon__gte=0) & Q(epsilon__lte=1), name="mitigation_loop_epsilon_range"
            ),
            models.CheckConstraint(condition=Q(images_per_step__gte=1), name="mitigation_loop_images"),
        ]

    def __str__(self) -> str:
        return f"InterMit on {self.group} ({', '.join(self.axes)}) in study {self.study_id}"


class MitigationStep(models.Model):
    """One InterMit step: the axis chosen, tau before and after, the IS predicted and measured."""

    class Status(models.TextChoices):
        GENERATING = "generating", "Generating the mitigation set"
        LABELLING = "labelling", "Labelling (machine)"
        AWAITING_LABELS = "awaiting_labels", "Waiting for people's labels"
        DONE = "done", "Done"

    loop = models.ForeignKey(MitigationLoop, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveSmallIntegerField(help_text="1 for the first step")
    axis = models.CharField(max_length=64, help_text="The axis mitigated at this step")
    mitigated_axes = models.JSONField(help_text="Every axis mitigated in this step's prompts, in order")
    gamma = models.FloatField(null=True, blank=True)
    gammas = models.JSONField(default=dict, blank=True, help_text="gamma of every candidate axis")
    tau_before = models.FloatField()
    w_before = models.JSONField(default=dict, help_text="w_bar of every axis before the step")
    n_before = models.PositiveIntegerField(default=0, help_text="Base images behind tau_before")
    predicted_is = models.JSONField(default=dict, help_text="IS[axis][y] predicted before the step")
    prompt_set = models.CharField(max_length=200)
    generation_job = models.ForeignKey(
        "generation.GenerationJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    labelling_job = models.ForeignKey(
        "labelling.LabellingJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.GENERATING)
    items_made = models.PositiveIntegerField(default=0)
    tau_after = models.FloatField(null=True, blank=True)
    w_after = models.JSONField(default=dict, blank=True)
    n_after = models.PositiveIntegerField(default=0, help_text="Base images behind tau_after")
    measured_is = models.JSONField(
        default=dict, blank=True, help_text="IS^mit[axis][y] = w_bar_y(before) - w_bar_y(after) (A.9)"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["loop_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["loop", "index"], name="mitigation_step_index_unique"),
            models.UniqueConstraint(
                fields=["loop"], condition=~Q(status="done"), name="mitigation_step_one_open"
            ),
        ]

    def __str__(self) -> str:
        return f"step {self.index} of loop {self.loop_id}: {self.axis} ({self.status})"
