"""Choosing what humans validate: a seeded, stratified sample of a labeller's items.

The sample is a ``ValidationSample`` row with a ``ValidationSampleItem`` per item; while a study has
one, the assignment service hands out only the sampled items (humans' time goes where it measures the
labeller), and each sampled item still needs the study's overlap of human judgements. The report says how wide
the 95% Wilson interval on the labeller's accuracy will be for that size, and the smallest size
that reaches a requested width.
"""

from __future__ import annotations

from typing import Any, cast

from django.db import transaction

from annotations.models import Annotation, Annotator, Item, Study, ValidationSample, ValidationSampleItem
from common.errors import ValidationFailed
from metrics.validation_sampling import sample_size_for_width, stratified_sample, wilson_width

ITEM_FIELDS = {"condition": "condition", "model": "model_name", "kind": "kind"}


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
) -> dict[str, Any]:
    """Draw and store the sample; ``stratify_by`` is condition, model, kind or a metadata field."""
    if labeller.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{labeller} is not a machine labeller")
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
    try:
        sample = stratified_sample(strata, size=size, fraction=fraction, seed=seed)
        width_now = wilson_width(len(sample.ids), expected_accuracy=expected_accuracy)
        needed = sample_size_for_width(width, expected_accuracy=expected_accuracy) if width else None
    except ValueError as exc:
        raise ValidationFailed(str(exc)) from exc
    validation_sample_store(
        study=study,
        labeller=labeller,
        labeller_name=labeller.name,
        item_ids=sorted(cast("list[int]", sample.ids)),  # the ids drawn from are item pks
        seed=seed,
        stratify_by=stratify_by,
    )
    return {
        "study": study.pk,
        "labeller": f"{labeller.name} {labeller.version}".strip(),
        "size": len(sample.ids),
        "labelled_items": len(labelled),
        "stratify_by": stratify_by,
        "seed": seed,
        "allocation": {str(k): v for k, v in sample.allocation.items()},
        "population": {str(k): v for k, v in sample.population.items()},
        "expected_accuracy": expected_accuracy,
        "interval_width_95": width_now,
        "requested_width": width,
        "smallest_size_for_width": needed,
        "note": "humans are now assigned only the sampled items (clear with --clear)",
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
) -> ValidationSample:
    """Make these items the study's validation sample, replacing any earlier one. The items must be the
    study's (claims hand out only them); ``labeller`` a machine labeller or None (it was deleted)."""
    if labeller is not None and labeller.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{labeller} is not a machine labeller")
    wanted = set(item_ids)
    found = set(Item.objects.filter(study=study, pk__in=wanted).values_list("pk", flat=True))
    if found != wanted:
        missing = sorted(wanted - found)
        raise ValidationFailed(
            f"item {missing[0]} is not an item of this study", {"item_ids": "unknown item"}
        )
    locked = Study.objects.select_for_update().get(pk=study.pk)
    ValidationSample.objects.filter(study=locked).delete()
    record = ValidationSample.objects.create(
        study=locked,
        labeller=labeller,
        labeller_name=labeller_name[:150],
        seed=seed,
        stratify_by=stratify_by[:200],
    )
    ValidationSampleItem.objects.bulk_create(
        (ValidationSampleItem(sample=record, item_id=item_id) for item_id in sorted(wanted)), batch_size=2000
    )
    locked.save(update_fields=["updated_at"])
    return record


@transaction.atomic
def validation_sample_clear(*, study: Study) -> None:
    """Drop the study's validation sample: humans are given every item again."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    if ValidationSample.objects.filter(study=locked).delete()[0]:
        locked.save(update_fields=["updated_at"])
