"""Studies, their enrolments and the study settings held in tables (quality settings, per-question
consensus rules)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from metrics.quality import DEFAULT_THRESHOLDS
from protocols.schema import Protocol, protocol_stored

# The longest rater-pool name (a value of the study's pool attribute) a quota or an assignment holds.
MAX_POOL_CHARS = 200


class Study(models.Model):
    """One audit: a protocol, its items, its annotators and the overlap each item needs."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        ACTIVE = "active", "Active"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_studies"
    )
    shared_with = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="shared_studies", blank=True)
    preset = models.CharField(
        max_length=64, blank=True, help_text="Preset key the protocol came from, if any"
    )
    protocol = models.JSONField(help_text="The validated protocol (see docs/protocols.md)")
    overlap = models.PositiveSmallIntegerField(default=3, validators=[MinValueValidator(1)])
    lease_minutes = models.PositiveIntegerField(default=30, validators=[MinValueValidator(1)])
    # The overlap policy (docs/overlap.md, "A study under a policy"; annotations/selectors/overlap.py).
    overlap_policy = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="agree:K/MAX or posterior:P/MAX (docs/overlap.md); empty: fixed:K, K the overlap. "
        "Under a policy the overlap is its MAX",
    )
    overlap_question = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The single, binary or likert question the policy reads; empty: the protocol's first",
    )
    overlap_model = models.JSONField(
        default=dict,
        blank=True,
        help_text="posterior: the Dawid-Skene model fitted on the study's answers and gold items when the "
        "policy was last saved or refitted",
    )
    # Rater pools (docs/crowd.md, "Rater pools and quotas"; annotations/selectors/pool_quotas.py): the
    # annotator attribute whose values are the study's pools, and how many judgements per item each
    # pool gives. Checked by ``services/rater_pools.py``.
    rater_pool_attribute = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The annotator attribute (e.g. region) whose values are the study's rater pools; "
        "empty: none",
    )
    rater_pool_quotas = models.JSONField(
        default=dict,
        blank=True,
        help_text="{pool value: judgements per item}; empty: no quotas. While set, each item takes at most "
        "that many judgements from each pool, and people of no listed pool get no items",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # Settings (were one JSON bag, ``options``, until migration 0009; the export and the API still
    # show them as that bag: annotations/selectors/study_options.py). Quality settings, the
    # validation sample and per-question consensus rules are tables: StudyQualitySettings,
    # ValidationSample (findings.py) and ConsensusRuleChoice below.
    reveal_after_submit = models.BooleanField(
        default=False, help_text="Show machine labels to a person once they have answered (anchoring study)"
    )
    seed = models.BigIntegerField(
        null=True, blank=True, help_text="Seed of the study's random analyses (SODA permutations); empty: 0"
    )
    imported_from = models.CharField(
        max_length=255, blank=True, help_text="The file the study was imported from (visage import)"
    )
    visualness_study = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="marker_studies",
        help_text="The visual-ness study imported with this stereotype-markers study",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="study_overlap_positive"),
            models.CheckConstraint(condition=Q(lease_minutes__gte=1), name="study_lease_positive"),
            models.CheckConstraint(condition=Q(seed__gte=0), name="study_seed_not_negative"),
            models.CheckConstraint(
                condition=~Q(visualness_study=F("id")), name="study_visualness_not_itself"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @cached_property
    def protocol_obj(self) -> Protocol:
        return protocol_stored(self.protocol, source=f"study {self.pk}")


class Pool(models.TextChoices):
    """Which annotators of a study are experts (expert-only items and questions, adjudication)."""

    CROWD = "crowd", "Crowd"
    EXPERT = "expert", "Expert"


class Enrollment(models.Model):
    """An annotator account enrolled in a study (it sees only studies it is enrolled in).

    ``pool`` and ``attributes`` (demographic answers, e.g. given on an invitation's form) belong to
    this enrolment: what a person is in one study, and what they told one study, never reaches
    another (docs/security.md, "Tenancy").
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="enrollments")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="enrollments")
    pool = models.CharField(max_length=8, choices=Pool.choices, default=Pool.CROWD)
    attributes = models.JSONField(
        default=dict, blank=True, help_text="Demographic answers given to this study, for breakdowns"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="enrollment_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} in study {self.study_id}"


# --- Study settings held in tables ---------------------------------------------------------------------

MAX_CONTROL_RATE = 0.5

# The quality settings of a study (docs/crowd.md, "Settings"), stated once: the model's fields and
# constraints below, ``services.controls`` (reading, checking) and the settings form are built from it.
# name: (default, lowest, highest, whole number)
QUALITY_SETTINGS: dict[str, tuple[float, float, float, bool]] = {
    "control_rate": (0.0, 0.0, MAX_CONTROL_RATE, False),
    "qualification_items": (0, 0, 100, True),
    "qualification_min_accuracy": (0.7, 0.0, 1.0, False),
    "min_gold_accuracy": (DEFAULT_THRESHOLDS["min_gold_accuracy"], 0.0, 1.0, False),
    "max_attention_failures": (DEFAULT_THRESHOLDS["max_attention_failures"], 0, 1000, True),
    "loo_margin": (DEFAULT_THRESHOLDS["loo_margin"], 0.0, 1.0, False),
    "loo_min_n": (DEFAULT_THRESHOLDS["loo_min_n"], 1, 100000, True),
    "min_median_seconds": (DEFAULT_THRESHOLDS["min_median_seconds"], 0.0, 3600.0, False),
    "max_straight_run": (DEFAULT_THRESHOLDS["max_straight_run"], 0, 100000, True),
    "straight_margin": (DEFAULT_THRESHOLDS["straight_margin"], 0.0, 1.0, False),
    "straight_dominant_share": (DEFAULT_THRESHOLDS["straight_dominant_share"], 0.0, 1.0, False),
}


def _quality_field(name: str) -> models.Field[Any, Any]:
    """The column of one quality setting: its type and range from ``QUALITY_SETTINGS``; empty = default."""
    default, low, high, whole = QUALITY_SETTINGS[name]
    field_class = models.IntegerField if whole else models.FloatField
    return field_class(
        null=True,
        blank=True,
        validators=[MinValueValidator(low), MaxValueValidator(high)],
        help_text=f"{low:g} to {high:g}; empty: the default, {default:g}",
    )


class StudyQualitySettings(models.Model):
    """The quality settings a researcher chose for a study (``services/controls.py``).

    A column left empty was never chosen and reads as its default; that matters: marking a study's first
    control sets ``control_rate`` to 10% only when no rate was chosen (even 0). No row: nothing chosen.
    """

    study = models.OneToOneField(Study, primary_key=True, on_delete=models.CASCADE, related_name="quality")
    control_rate = _quality_field("control_rate")
    qualification_items = _quality_field("qualification_items")
    qualification_min_accuracy = _quality_field("qualification_min_accuracy")
    min_gold_accuracy = _quality_field("min_gold_accuracy")
    max_attention_failures = _quality_field("max_attention_failures")
    loo_margin = _quality_field("loo_margin")
    loo_min_n = _quality_field("loo_min_n")
    min_median_seconds = _quality_field("min_median_seconds")
    max_straight_run = _quality_field("max_straight_run")
    straight_margin = _quality_field("straight_margin")
    straight_dominant_share = _quality_field("straight_dominant_share")

    class Meta:
        verbose_name_plural = "study quality settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(**{f"{name}__isnull": True}) | Q(**{f"{name}__gte": low, f"{name}__lte": high}),
                name=f"quality_{name}_range",
            )
            for name, (_default, low, high, _whole) in QUALITY_SETTINGS.items()
        ]

    def __str__(self) -> str:
        return f"quality settings of study {self.study_id}"

    def chosen(self) -> dict[str, float | int]:
        """The settings that were chosen (non-empty columns), by name."""
        return {name: value for name in QUALITY_SETTINGS if (value := getattr(self, name)) is not None}


class ConsensusRule(models.TextChoices):
    """The consensus rules of ``metrics/consensus.py`` that a study may choose for a question."""

    MAJORITY = "majority", "Majority"
    UNANIMOUS = "unanimous", "Unanimous"
    AT_LEAST_K = "at-least-k", "At least k"
    ALL_AGREE_SET = "all-agree-set", "All agree within a set"
    DAWID_SKENE = "dawid-skene", "Dawid-Skene"


class ConsensusRuleChoice(models.Model):
    """The consensus rule a study chose for one question (``services/consensus.py``); without one, the
    preset's default or majority."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="consensus_rules")
    question_key = models.CharField(max_length=64)
    rule = models.CharField(max_length=32, choices=ConsensusRule.choices)
    params = models.JSONField(
        default=dict, blank=True, help_text="The rule's parameters: k, agree_values, absolute"
    )

    class Meta:
        ordering = ["study_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "question_key"], name="consensus_rule_one_per_question"),
            models.CheckConstraint(condition=Q(rule__in=ConsensusRule.values), name="consensus_rule_known"),
        ]

    def __str__(self) -> str:
        return f"{self.rule} for {self.question_key} in study {self.study_id}"

    def as_dict(self) -> dict[str, Any]:
        """The rule as ``services.consensus`` takes it: ``{"rule": name, **params}``."""
        return {"rule": self.rule, **self.params}
