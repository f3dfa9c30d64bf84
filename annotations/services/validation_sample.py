"""Choosing what humans validate: a seeded sample of a labeller's items under a design whose inclusion
probabilities are stored with it (``uniform``, ``stratified`` by condition or another field, ``active``:
oversampling the items where the labeller is unsure or disagrees with another labeller), so the
machine + human sample estimates (PPI, ``findings/papers/ppi.py``) can weight by them.

The sample is a ``ValidationSample`` row with a ``ValidationSampleItem`` per item; while a study has
one, the assignment service hands out only the sampled items (humans' time goes where it measures the
labeller), and each sampled item still needs the study's overlap of human judgements. The report says how wide
the 95% Wilson interval on the labeller's accuracy will be for that size, and the smallest size
that reaches a requested width.
"""

from __future__ import annotations

from typing import Any, cast

from django.db import transaction

from annotations.locks import study_lock
from annotations.models import Annotation, Annotator, Item, Study, ValidationSample, ValidationSampleItem
from common.errors import ValidationFailed
from metrics.validation_sampling import (
    DesignSample,
    active_probabilities,
    poisson_sample,
    sample_size_for_width,
    stratified_design,
    stratified_sample,
    uniform_sample,
    wilson_width,
)

ITEM_FIELDS = {"condition": "condition", "model": "model_name", "kind": "kind"}
DESIGNS = ("stratified", "uniform", "active")
# Answers that say the labeller could not tell: an active design counts them as uncertain.
UNSURE_VALUES = (None, "unsure", "Unsure", "none", "")


def _answers(study: Study, labeller: Annotator) -> dict[int, dict[str, Any]]:
    rows = Annotation.objects.filter(study=study, annotator=labeller).values_list(
        "item_id", "question_key", "value"
    )
    answers: dict[int, dict[str, Any]] = {}
    for item_id, key, value in rows:
        answers.setdefault(item_id, {})[key] = value
    return answers


def uncertainty_scores(study: Study, labeller: Annotator, against: Annotator | None) -> dict[int, float]:
    """Per item the labeller answered: the share of its answers that are unsure (no value, "unsure") or
    differ from ``against``'s answer to the same question (questions ``against`` did not answer do not
    count as disagreement)."""
    mine = _answers(study, labeller)
    theirs = _answers(study, against) if against is not None else {}
    scores: dict[int, float] = {}
    for item_id, answers in mine.items():
        other = theirs.get(item_id, {})
        doubtful = sum(
            1
            for key, value in answers.items()
            if (not isinstance(value, list | dict) and value in UNSURE_VALUES)
            or (key in other and other[key] != value)
        )
        scores[item_id] = doubtful / len(answers)
    return scores


@transaction.atomic
def validation_sample_create(
    *,
    study: Study,
    labeller: Annotator,
    size: int | None = None,
    fraction: float | None = None,
    stratify_by: str = "condition",
    seed: int = 0,
    expected_accuracy: float = 0.9,
    width: float | None = None,
    design: str = "stratified",
    against: Annotator | None = None,
    mix: float = 0.5,
) -> dict[str, Any]:
    """Draw and store the sample with each item's inclusion probability.

    ``design``: ``stratified`` (proportional allocation over ``stratify_by``: condition, model, kind or a
    metadata field; pi = a_s / N_s), ``uniform`` (a simple random sample; pi = n / N) or ``active``
    (Poisson sampling with pi_i from ``uncertainty_scores`` against the labeller ``against``, mixed with
    the uniform share by ``1 - mix``; the size is its expectation). ``metrics/validation_sampling.py``.
    """
    if labeller.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{labeller} is not a machine labeller")
    if design not in DESIGNS:
        raise ValidationFailed(
            f"unknown design {design!r} (designs: {', '.join(DESIGNS)})", {"design": "unknown"}
        )
    if against is not None and (against.kind != Annotator.Kind.MACHINE or against.pk == labeller.pk):
        raise ValidationFailed("--against must name another machine labeller", {"against": "invalid"})
    if against is not None and design != "active":
        raise ValidationFailed("--against applies to the active design only", {"against": "not applicable"})
    labelled = set(
        Annotation.objects.filter(study=study, annotator=labeller).values_list("item_id", flat=True)
    )
    if not labelled:
        raise ValidationFailed(f"{labeller.name} has labelled no item of this study")
    rows = Item.objects.filter(pk__in=labelled).values_list("id", ITEM_FIELDS.get(stratify_by, "metadata"))
    strata = [
        (item_id, value if stratify_by in ITEM_FIELDS else str((value or {}).get(stratify_by)))
        for item_id, value in rows
    ]
    params: dict[str, Any] = {}
    allocation: dict[str, int] | None = None
    population: dict[str, int] | None = None
    try:
        if size is None and fraction is not None:
            if not 0.0 <= fraction <= 1.0:
                raise ValueError("fraction must lie in [0, 1]")
            size = int(fraction * len(labelled) + 0.5)
        if size is None:
            raise ValueError("give a size or a fraction")
        drawn: DesignSample
        if design == "stratified":
            sample = stratified_sample(strata, size=size, seed=seed)
            drawn = stratified_design(sample, strata)
            allocation = {str(k): v for k, v in sample.allocation.items()}
            population = {str(k): v for k, v in sample.population.items()}
        elif design == "uniform":
            drawn = uniform_sample(sorted(labelled), size=size, seed=seed)
        else:
            scores = uncertainty_scores(study, labeller, against)
            probabilities = active_probabilities(cast("dict[Any, float]", scores), size, mix=mix)
            drawn = poisson_sample(probabilities, seed=seed)
            params = {"against": str(against) if against else None, "mix": mix}
        width_now = wilson_width(max(len(drawn.ids), 1), expected_accuracy=expected_accuracy)
        needed = sample_size_for_width(width, expected_accuracy=expected_accuracy) if width else None
    except ValueError as exc:
        raise ValidationFailed(str(exc)) from exc
    validation_sample_store(
        study=study,
        labeller=labeller,
        labeller_name=labeller.name,
        item_ids=sorted(cast("list[int]", drawn.ids)),  # the ids drawn from are item pks
        seed=seed,
        stratify_by=stratify_by if design == "stratified" else "",
        design=design,
        design_params=params,
        frame_size=len(labelled),
        probabilities=cast("dict[int, float]", drawn.probabilities),
    )
    chances = list(drawn.probabilities.values())
    return {
        "study": study.pk,
        "labeller": f"{labeller.name} {labeller.version}".strip(),
        "design": design,
        "design_params": params,
        "size": len(drawn.ids),
        "labelled_items": len(labelled),
        "stratify_by": stratify_by if design == "stratified" else None,
        "seed": seed,
        "allocation": allocation,
        "population": population,
        "inclusion_probability": {"min": min(chances), "max": max(chances)} if chances else None,
        "expected_accuracy": expected_accuracy,
        "interval_width_95": width_now,
        "requested_width": width,
        "smallest_size_for_width": needed,
        "note": "humans are now assigned only the sampled items (clear with --clear); each item's inclusion "
        "probability is stored, so the findings can read the source ppi:LABELLER",
    }


@transaction.atomic
def validation_sample_store(
    *,
    study: Study,
    labeller: Annotator | None,
    labeller_name: str,
    item_ids: list[int],
    seed: int,
    stratify_by: str,
    design: str = "",
    design_params: dict[str, Any] | None = None,
    frame_size: int | None = None,
    probabilities: dict[int, float] | None = None,
) -> ValidationSample:
    """Make these items the study's validation sample, replacing any earlier one. The items must be the
    study's (claims hand out only them); ``labeller`` a machine labeller or None (it was deleted).
    ``probabilities`` (item id -> pi) with ``design``: the design's inclusion probabilities; without them
    the sample's probabilities are unknown and PPI refuses it."""
    if labeller is not None and labeller.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{labeller} is not a machine labeller")
    wanted = set(item_ids)
    found = set(Item.objects.filter(study=study, pk__in=wanted).values_list("pk", flat=True))
    if found != wanted:
        missing = sorted(wanted - found)
        raise ValidationFailed(
            f"item {missing[0]} is not an item of this study", {"item_ids": "unknown item"}
        )
    locked = study_lock(study.pk)
    ValidationSample.objects.filter(study=locked).delete()
    record = ValidationSample.objects.create(
        study=locked,
        labeller=labeller,
        labeller_name=labeller_name[:150],
        seed=seed,
        stratify_by=stratify_by[:200],
        design=design if probabilities is not None else "",
        design_params=design_params or {},
        frame_size=frame_size,
    )
    chances = probabilities or {}
    ValidationSampleItem.objects.bulk_create(
        (
            ValidationSampleItem(sample=record, item_id=item_id, inclusion_probability=chances.get(item_id))
            for item_id in sorted(wanted)
        ),
        batch_size=2000,
    )
    locked.save(update_fields=["updated_at"])
    return record


@transaction.atomic
def validation_sample_clear(*, study: Study) -> None:
    """Drop the study's validation sample: humans are given every item again."""
    locked = study_lock(study.pk)
    if ValidationSample.objects.filter(study=locked).delete()[0]:
        locked.save(update_fields=["updated_at"])
