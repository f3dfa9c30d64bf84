"""Choosing what humans validate: a seeded, stratified sample of a labeller's items.

The sample is stored in ``Study.options["validation_sample"]``; while it is there, the assignment
service hands out only the sampled items (humans' time goes where it measures the labeller), and
each sampled item still needs the study's overlap of human judgements. The report says how wide
the 95% Wilson interval on the labeller's accuracy will be for that size, and the smallest size
that reaches a requested width.
"""

from __future__ import annotations

from typing import Any, cast

from django.db import transaction

from annotations.models import Annotation, Annotator, Item, Study
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
    locked = Study.objects.select_for_update().get(pk=study.pk)
    record = {
        "labeller": labeller.pk,
        "labeller_name": labeller.name,
        "item_ids": sorted(cast("list[int]", sample.ids)),  # the ids drawn from are item pks
        "seed": seed,
        "stratify_by": stratify_by,
    }
    locked.options = {**locked.options, "validation_sample": record}
    locked.save(update_fields=["options", "updated_at"])
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
def validation_sample_clear(*, study: Study) -> None:
    locked = Study.objects.select_for_update().get(pk=study.pk)
    locked.options = {k: v for k, v in locked.options.items() if k != "validation_sample"}
    locked.save(update_fields=["options", "updated_at"])
