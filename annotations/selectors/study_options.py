"""A study's settings as the one JSON object the export and the API call ``options``.

The settings are typed fields of ``Study`` and rows of ``StudyQualitySettings``, ``ConsensusRuleChoice``
and ``ValidationSample`` (they were a JSON bag, ``Study.options``, until migration 0009). The object
keeps the bag's shape so exports and API clients stay as they were; a key is present only when its
setting was chosen (``reveal_after_submit`` only when on). ``services/study_options.py`` reads it back.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from annotations.models import Study, StudyQualitySettings, ValidationSample

OPTION_KEYS = (
    "reveal_after_submit",
    "seed",
    "imported_from",
    "visualness_study",
    "quality",
    "consensus",
    "validation_sample",
)
# Keys annotators must not see (docs/crowd.md: they must not learn the control rate or qualification).
RESEARCHER_ONLY_KEYS = ("quality",)


def with_study_options(studies: QuerySet[Study]) -> QuerySet[Study]:
    """``studies`` loading what ``study_options`` reads in a fixed number of queries however many."""
    return studies.select_related("quality", "validation_sample").prefetch_related(
        "consensus_rules", "validation_sample__items"
    )


def study_options(study: Study, *, researcher: bool = True) -> dict[str, Any]:
    """The study's settings as ``{"reveal_after_submit": true, "seed": 3, "quality": {...}, ...}``;
    without ``researcher``, the keys annotators must not see are left out."""
    options: dict[str, Any] = {}
    if study.reveal_after_submit:
        options["reveal_after_submit"] = True
    if study.seed is not None:
        options["seed"] = study.seed
    if study.imported_from:
        options["imported_from"] = study.imported_from
    if study.visualness_study_id is not None:
        options["visualness_study"] = study.visualness_study_id
    try:
        quality = study.quality.chosen()
    except StudyQualitySettings.DoesNotExist:
        quality = {}
    if quality:
        options["quality"] = quality
    rules = {choice.question_key: choice.as_dict() for choice in study.consensus_rules.all()}
    if rules:
        options["consensus"] = rules
    try:
        sample = study.validation_sample
    except ValidationSample.DoesNotExist:
        sample = None
    if sample is not None:
        options["validation_sample"] = {
            "labeller": sample.labeller_id,
            "labeller_name": sample.labeller_name,
            "item_ids": sorted(entry.item_id for entry in sample.items.all()),
            "seed": sample.seed,
            "stratify_by": sample.stratify_by,
        }
    if not researcher:
        options = {key: value for key, value in options.items() if key not in RESEARCHER_ONLY_KEYS}
    return options
