"""Reads about control items and quality settings: the study's settings, each annotator's results on
control items, and where they stand with the qualification (docs/crowd.md, "Quality control").

The writes (settings changes, marking controls) and the mixing of controls into claims are in
``annotations/services/controls.py``; the per-annotator report is ``selectors/quality.py``.

- Settings live in ``StudyQualitySettings`` (one row per study, a column per name of ``SETTINGS``, empty
  when never chosen); ``quality_settings`` reads them with defaults and ``quality_setting_value`` is the
  check of one value (the update service and the study import use it too).
- Scoring (``control_outcomes``) uses each answer as first submitted (the oldest revision when it
  was edited since), so going back to change an answer never changes a score.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from annotations.models import (
    QUALITY_SETTINGS,
    Annotation,
    AnnotationRevision,
    Annotator,
    Assignment,
    ControlKind,
    Item,
    Pool,
    Study,
    StudyQualitySettings,
)
from annotations.selectors.counted import active_exclusions
from annotations.selectors.pools import pools_in_study
from common.errors import ValidationFailed
from metrics.quality import DEFAULT_THRESHOLDS, answers_match, control_score
from protocols.schema import Protocol

# name: (default, lowest, highest, whole number); stated once, in annotations.models (the table's columns
# and constraints are built from it too).
SETTINGS: dict[str, tuple[float, float, float, bool]] = QUALITY_SETTINGS
THRESHOLD_NAMES = tuple(DEFAULT_THRESHOLDS)


@dataclass(frozen=True)
class QualitySettings:
    control_rate: float
    qualification_items: int
    qualification_min_accuracy: float
    thresholds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        thresholds = {
            name: int(value) if SETTINGS[name][3] else value for name, value in self.thresholds.items()
        }
        return {
            "control_rate": self.control_rate,
            "qualification_items": self.qualification_items,
            "qualification_min_accuracy": self.qualification_min_accuracy,
            **thresholds,
        }


def quality_setting_value(name: str, value: Any) -> float | int:
    """One setting's value checked against ``SETTINGS`` (a number, whole where it must be, in range)."""
    _default, low, high, whole = SETTINGS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValidationFailed(f"{name} must be a number", {name: "not a number"})
    if not low <= value <= high:
        raise ValidationFailed(f"{name} must be between {low:g} and {high:g}", {name: "out of range"})
    if whole and int(value) != value:
        raise ValidationFailed(f"{name} must be a whole number", {name: "not whole"})
    return int(value) if whole else float(value)


def _quality_row(study: Study) -> StudyQualitySettings | None:
    """The study's settings row, or None; read once per study object (``select_related("quality")`` reads
    it with the study), like the study's other fields."""
    try:
        return study.quality
    except StudyQualitySettings.DoesNotExist:
        return None


def quality_settings_chosen(study: Study) -> dict[str, float | int]:
    """The settings a researcher chose (the others read as their defaults), by name."""
    row = _quality_row(study)
    return row.chosen() if row is not None else {}


def quality_settings(study: Study) -> QualitySettings:
    """The study's quality settings with defaults for those never chosen."""
    chosen = quality_settings_chosen(study)
    values: dict[str, Any] = {
        name: chosen[name] if name in chosen else (int(default) if whole else default)
        for name, (default, _low, _high, whole) in SETTINGS.items()
    }
    return QualitySettings(
        control_rate=values["control_rate"],
        qualification_items=values["qualification_items"],
        qualification_min_accuracy=values["qualification_min_accuracy"],
        thresholds={name: float(values[name]) for name in THRESHOLD_NAMES},
    )


# --- Scoring ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ControlOutcome:
    """One annotator on one control item: a check per expected answer they were asked."""

    item_id: int
    kind: str
    submitted_at: datetime | None
    checks: tuple[bool, ...]

    @property
    def passed(self) -> bool | None:
        return all(self.checks) if self.checks else None


def _asked(protocol: Protocol, key: str, pool: str, given: Mapping[str, Any]) -> bool:
    """Was the annotator asked this question? (not expert-only for a crowd annotator; its show_if held)."""
    if not protocol.has_question(key):
        return False
    question = protocol.question(key)
    if question.expert_only and pool != Pool.EXPERT:
        return False
    if key in given or question.show_if is None:
        return True
    parent = given.get(question.show_if["question"])
    return parent is not None and str(parent) in question.show_if["in"]


def control_outcomes(
    study: Study, *, annotator_ids: Iterable[int] | None = None, item_ids: Iterable[int] | None = None
) -> dict[int, list[ControlOutcome]]:
    """Every human's results on the study's control items, per annotator id, in submission order.

    A control counts for an annotator once they submitted it (or, imported humans, once they have
    answers to it). An expected answer they were not asked is not a check; one they were asked but
    left unanswered is a failed check. Answers are taken as first submitted.
    """
    controls = Item.objects.filter(study=study).exclude(control_kind="")
    if item_ids is not None:
        controls = controls.filter(pk__in=list(item_ids))
    expected = {
        pk: (kind, answers)
        for pk, kind, answers in controls.values_list("id", "control_kind", "control_answers")
    }
    if not expected:
        return {}
    who = Q() if annotator_ids is None else Q(annotator_id__in=list(annotator_ids))
    submitted: dict[tuple[int, int], datetime | None] = {}
    pools = pools_in_study(study.pk)  # the pool in this study: it decides which questions were asked
    for annotator_id, item_id, completed in Assignment.objects.filter(
        who, study=study, item_id__in=list(expected), status=Assignment.Status.SUBMITTED
    ).values_list("annotator_id", "item_id", "completed_at"):
        submitted[(annotator_id, item_id)] = completed
    given: dict[tuple[int, int], dict[str, Any]] = defaultdict(dict)
    first_at: dict[tuple[int, int], datetime] = {}
    annotations = list(
        Annotation.objects.filter(
            who, study=study, item_id__in=list(expected), annotator__kind=Annotator.Kind.HUMAN
        ).values_list("id", "annotator_id", "item_id", "question_key", "value", "created_at")
    )
    originals: dict[int, Any] = {}
    for annotation_id, value in (
        AnnotationRevision.objects.filter(annotation_id__in=[a[0] for a in annotations])
        .order_by("annotation_id", "id")
        .values_list("annotation_id", "value")
    ):
        originals.setdefault(annotation_id, value)
    for annotation_id, annotator_id, item_id, key, value, created in annotations:
        given[(annotator_id, item_id)][key] = originals.get(annotation_id, value)
        first_at[(annotator_id, item_id)] = min(created, first_at.get((annotator_id, item_id), created))
    protocol = study.protocol_obj
    result: dict[int, list[ControlOutcome]] = defaultdict(list)
    for annotator_id, item_id in sorted(set(submitted) | set(given)):
        kind, answers = expected[item_id]
        mine = given.get((annotator_id, item_id), {})
        checks = tuple(
            answers_match(value, mine.get(key))
            for key, value in answers.items()
            if _asked(protocol, key, pools.get(annotator_id, Pool.CROWD), mine)
        )
        when = submitted.get((annotator_id, item_id)) or first_at.get((annotator_id, item_id))
        result[annotator_id].append(ControlOutcome(item_id, kind, when, checks))
    for outcomes in result.values():
        outcomes.sort(key=lambda o: (o.submitted_at is None, o.submitted_at or timezone.now(), o.item_id))
    return dict(result)


@dataclass(frozen=True)
class Qualification:
    """Where an annotator stands with the study's qualification.

    ``state``: ``none`` (the study has none), ``pending`` (fewer than ``required`` gold items
    submitted), ``passed`` or ``failed`` (scored on the first ``required`` gold items submitted).
    """

    state: str
    required: int
    answered: int = 0
    live: int = 0
    correct: int = 0
    n: int = 0
    accuracy: float | None = None
    min_accuracy: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def qualification_of(
    gold: list[ControlOutcome], settings: QualitySettings, *, live: int = 0
) -> Qualification:
    """The qualification state from an annotator's gold outcomes in submission order (first N scored)."""
    required = settings.qualification_items
    if required <= 0:
        return Qualification("none", 0)
    base: dict[str, Any] = {
        "required": required,
        "answered": len(gold),
        "live": live,
        "min_accuracy": settings.qualification_min_accuracy,
    }
    if len(gold) < required:
        return Qualification("pending", **base)
    score = control_score(check for outcome in gold[:required] for check in outcome.checks)
    # Gold items whose questions this annotator was never asked (e.g. expert-only) give no checks.
    passed = score.rate is None or score.rate >= settings.qualification_min_accuracy
    return Qualification(
        "passed" if passed else "failed", correct=score.correct, n=score.n, accuracy=score.rate, **base
    )


def qualification_state(
    *,
    study: Study,
    annotator: Annotator,
    now: datetime | None = None,
    settings: QualitySettings | None = None,
) -> Qualification:
    """Where ``annotator`` stands with the study's qualification (a few queries; none without one)."""
    settings = settings or quality_settings(study)
    if settings.qualification_items <= 0:
        return Qualification("none", 0)
    now = now or timezone.now()
    gold = [
        outcome
        for outcome in control_outcomes(study, annotator_ids=[annotator.pk]).get(annotator.pk, [])
        if outcome.kind == ControlKind.GOLD
    ]
    live = Assignment.objects.filter(
        study=study,
        annotator=annotator,
        item__control_kind=ControlKind.GOLD,
        status=Assignment.Status.LEASED,
        lease_expires_at__gt=now,
    ).count()
    return qualification_of(gold, settings, live=live)


# --- Which control the next claim serves (read by the claim; moved from services: a read) ---------


def _hash(*parts: object) -> int:
    return int(hashlib.sha256(":".join(str(part) for part in parts).encode()).hexdigest()[:16], 16)


def control_seed(*, study_id: int, annotator_id: int) -> int:
    """The annotator's seed for control slots and picks (independent of the item ring's seed)."""
    return _hash("controls", study_id, annotator_id) % 2**31


def control_slot(*, seed: int, index: int, rate: float) -> bool:
    """Whether claim number ``index`` (0-based) is a control slot, at ``rate`` in (0, 1].

    The claims are cut into stretches k = 0, 1, ... holding the positions i with floor(i * rate) = k
    (1/rate positions, give or take one); each stretch has exactly one slot, at a place drawn from
    (seed, k). So the first n claims hold floor(n * rate) or one more slots, never bunched, never
    periodic. Exact integer arithmetic (rate as a fraction), so rounding never moves a slot.
    """
    if rate <= 0:
        return False
    from fractions import Fraction

    fraction = Fraction(rate).limit_denominator(10_000)
    num, den = fraction.numerator, fraction.denominator
    stretch = index * num // den  # k = floor(index * rate)
    first = -(-stretch * den // num)  # ceil(k / rate): the stretch's first position
    size = -(-(stretch + 1) * den // num) - first  # how many positions it holds
    return first + _hash("slot", seed, stretch) % size == index


@dataclass(frozen=True)
class ControlPlan:
    """What the next claim serves: a control of ``kinds`` if one is left; ``only``: nothing else."""

    kinds: tuple[str, ...] = ()
    only: bool = False
    index: int = 0


NO_PLAN = ControlPlan()


def control_plan(*, study: Study, annotator: Annotator, now: datetime) -> ControlPlan:
    """The control part of the next claim. No query unless the study mixes controls or qualifies people
    (besides reading its settings, which ``select_related("quality")`` on the study saves)."""
    settings = quality_settings(study)
    if settings.control_rate <= 0 and settings.qualification_items <= 0:
        return NO_PLAN
    index = Assignment.objects.filter(study=study, annotator=annotator).count()
    if settings.qualification_items > 0:
        state = qualification_state(study=study, annotator=annotator, now=now, settings=settings)
        if state.state == "failed":
            return ControlPlan(only=True, index=index)
        if state.state == "pending":
            # Lease no more gold than still needed (the task page leases one ahead).
            kinds = (ControlKind.GOLD.value,) if state.answered + state.live < state.required else ()
            return ControlPlan(kinds=kinds, only=True, index=index)
    seed = control_seed(study_id=study.pk, annotator_id=annotator.pk)
    if control_slot(seed=seed, index=index, rate=settings.control_rate):
        return ControlPlan(kinds=(ControlKind.GOLD.value, ControlKind.ATTENTION.value), index=index)
    return ControlPlan(index=index)


def control_candidate(
    *, study: Study, annotator: Annotator, expert: bool, kinds: Iterable[str], index: int
) -> Item | None:
    """A control of ``kinds`` this annotator never had (in any state), drawn from their seed and ``index``;
    expert-only controls only for an annotator of the expert pool in this study (``expert``)."""
    mine = Assignment.objects.filter(item=OuterRef("pk"), annotator=annotator)
    items = Item.objects.filter(study=study, control_kind__in=list(kinds)).filter(
        ~Exists(mine), ~Exists(active_exclusions(study).filter(annotator=annotator))
    )
    if not expert:
        items = items.filter(expert_only=False)
    candidates = list(items.order_by("id"))
    if not candidates:
        return None
    seed = control_seed(study_id=study.pk, annotator_id=annotator.pk)
    return candidates[_hash("pick", seed, index) % len(candidates)]
