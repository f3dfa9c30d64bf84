"""Setting a study's settings from the one JSON object the export and the API call ``options``.

``selectors/study_options.py`` writes the object from the typed fields and tables; this module checks
one (``study_options_parse``: every key known, every value of its type and range, each consensus rule
for a question of the protocol) and writes it back, replacing the settings as a whole as the JSON bag
did: a key left out is the setting's default. Two writers:

- ``study_options_replace`` (the API's ``PATCH options``): the object names rows of this database, so a
  validation sample's items must be the study's and a visual-ness study one the caller may read.
- ``study_options_restore`` (importing an export): a validation sample is checked but not restored (its
  item and labeller ids are those of the exporting database; draw it again with
  ``sample_for_validation``), and the visual-ness study is linked only if the importing owner can read
  a study of that id (an export re-imported where it was made); else it is left empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from annotations.locks import study_lock
from annotations.models import (
    QUALITY_SETTINGS,
    Annotator,
    ConsensusRuleChoice,
    Study,
    StudyQualitySettings,
)
from annotations.selectors.controls import quality_setting_value
from annotations.selectors.study_options import OPTION_KEYS
from annotations.services.consensus import rule_check
from annotations.services.validation_sample import validation_sample_clear, validation_sample_store
from common.errors import ValidationFailed
from protocols.schema import Protocol

BIGINT_MAX = 2**63 - 1  # the largest BigIntegerField
MAX_IMPORTED_FROM = 255
MAX_QUESTION_KEY = 64


@dataclass(frozen=True)
class SampleOption:
    """A checked ``validation_sample`` entry (ids as written: they name rows of some database)."""

    item_ids: list[int]
    labeller: int | None = None
    labeller_name: str = ""
    seed: int = 0
    stratify_by: str = ""


@dataclass(frozen=True)
class StudyOptions:
    """A checked options object: every setting typed, with its default where the key was left out."""

    reveal_after_submit: bool = False
    seed: int | None = None
    imported_from: str = ""
    visualness_study: int | None = None
    quality: dict[str, float | int] = field(default_factory=dict)
    consensus: dict[str, dict[str, Any]] = field(default_factory=dict)
    validation_sample: SampleOption | None = None


def _refuse(key: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"options.{key} {message}", {"options": f"{key}: {message}"})


def _whole(key: str, value: Any, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _refuse(key, f"must be a whole number from {low} to {high}")
    return value


def _text(key: str, value: Any, *, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise _refuse(key, f"must be a text of at most {limit} characters")
    return value


def _quality(value: Any) -> dict[str, float | int]:
    if not isinstance(value, Mapping):
        raise _refuse("quality", "must be an object of settings")
    clean: dict[str, float | int] = {}
    for name, number in value.items():
        if name not in QUALITY_SETTINGS:
            raise _refuse(
                "quality", f"has an unknown setting {name!r} (known: {', '.join(QUALITY_SETTINGS)})"
            )
        if number is None:
            continue
        try:
            clean[name] = quality_setting_value(name, number)
        except ValidationFailed as exc:
            raise _refuse("quality", exc.message) from exc
    return clean


def _consensus(value: Any, protocol: Protocol) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise _refuse("consensus", "must be an object of rules by question key")
    rules: dict[str, dict[str, Any]] = {}
    for key, rule in value.items():
        if not isinstance(key, str) or not protocol.has_question(key):
            raise _refuse("consensus", f"names {key!r}, which is not a question of the protocol")
        if protocol.question(key).kind == "boxes":
            raise _refuse("consensus", f"names {key!r}, a boxes question (boxes have no consensus)")
        try:
            rules[key] = dict(rule_check(rule))
        except ValidationFailed as exc:
            raise _refuse(f"consensus.{key}", exc.message) from exc
    return rules


def _sample(value: Any) -> SampleOption:
    key = "validation_sample"
    if not isinstance(value, Mapping) or not isinstance(value.get("item_ids"), list):
        raise _refuse(key, "must be an object with a list of item_ids")
    item_ids = [_whole(f"{key}.item_ids", item_id, low=1, high=BIGINT_MAX) for item_id in value["item_ids"]]
    labeller = value.get("labeller")
    return SampleOption(
        item_ids=sorted(set(item_ids)),
        labeller=None if labeller is None else _whole(f"{key}.labeller", labeller, low=1, high=BIGINT_MAX),
        labeller_name=_text(f"{key}.labeller_name", value.get("labeller_name", ""), limit=150),
        seed=_whole(f"{key}.seed", value.get("seed", 0), low=-BIGINT_MAX, high=BIGINT_MAX),
        stratify_by=_text(f"{key}.stratify_by", value.get("stratify_by", ""), limit=200),
    )


def study_options_parse(raw: Any, *, protocol: Protocol) -> StudyOptions:
    """Check an options object (None or ``{}``: every default). Raises ValidationFailed naming the key."""
    if raw is None:
        return StudyOptions()
    if not isinstance(raw, Mapping):
        raise ValidationFailed("options must be an object", {"options": "not an object"})
    unknown = sorted(str(key) for key in set(raw) - set(OPTION_KEYS))
    if unknown:
        raise ValidationFailed(
            f"unknown option {unknown[0]!r} (known: {', '.join(OPTION_KEYS)})", {"options": "unknown key"}
        )
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue  # the default
        if key == "reveal_after_submit":
            if not isinstance(value, bool):
                raise _refuse(key, "must be true or false")
            values[key] = value
        elif key == "seed":
            values[key] = _whole(key, value, low=0, high=BIGINT_MAX)
        elif key == "imported_from":
            values[key] = _text(key, value, limit=MAX_IMPORTED_FROM)
        elif key == "visualness_study":
            values[key] = _whole(key, value, low=1, high=BIGINT_MAX)
        elif key == "quality":
            values[key] = _quality(value)
        elif key == "consensus":
            values[key] = _consensus(value, protocol)
        else:
            values[key] = _sample(value)
    return StudyOptions(**values)


def _write(study: Study, options: StudyOptions, *, visualness: Study | None) -> Study:
    """Replace the study's settings (not the validation sample) with ``options``; the study is locked."""
    if visualness is not None and visualness.pk == study.pk:
        raise _refuse("visualness_study", "cannot be the study itself")
    study.reveal_after_submit = options.reveal_after_submit
    study.seed = options.seed
    study.imported_from = options.imported_from
    study.visualness_study = visualness
    study.save(
        update_fields=["reveal_after_submit", "seed", "imported_from", "visualness_study", "updated_at"]
    )
    StudyQualitySettings.objects.filter(study=study).delete()
    if options.quality:
        StudyQualitySettings.objects.create(study=study, **options.quality)
    ConsensusRuleChoice.objects.filter(study=study).delete()
    ConsensusRuleChoice.objects.bulk_create(
        ConsensusRuleChoice(
            study=study,
            question_key=key,
            rule=rule["rule"],
            params={name: value for name, value in rule.items() if name != "rule"},
        )
        for key, rule in options.consensus.items()
    )
    return study


def _linked(options: StudyOptions, linkable: QuerySet[Study]) -> Study | None:
    if options.visualness_study is None:
        return None
    return linkable.filter(pk=options.visualness_study).first()


@transaction.atomic
def study_options_replace(*, study: Study, options: Any, linkable: QuerySet[Study]) -> Study:
    """Replace the study's settings with an options object (see the module docstring); ``linkable``: the
    studies the caller may read, one of which the visual-ness study must be. Returns the study, fresh."""
    parsed = study_options_parse(options, protocol=study.protocol_obj)
    locked = study_lock(study.pk)
    visualness = _linked(parsed, linkable)
    if parsed.visualness_study is not None and visualness is None:
        raise _refuse("visualness_study", f"names no study {parsed.visualness_study} that you can read")
    _write(locked, parsed, visualness=visualness)
    sample = parsed.validation_sample
    if sample is None:
        validation_sample_clear(study=locked)
    else:
        labeller = None
        if sample.labeller is not None:
            labeller = Annotator.objects.filter(pk=sample.labeller, kind=Annotator.Kind.MACHINE).first()
            if labeller is None:
                raise _refuse("validation_sample.labeller", f"names no machine labeller {sample.labeller}")
        try:
            validation_sample_store(
                study=locked,
                labeller=labeller,
                labeller_name=sample.labeller_name,
                item_ids=sample.item_ids,
                seed=sample.seed,
                stratify_by=sample.stratify_by,
            )
        except ValidationFailed as exc:
            raise _refuse("validation_sample", exc.message) from exc
    return Study.objects.get(pk=study.pk)


@transaction.atomic
def study_options_restore(*, study: Study, options: StudyOptions, linkable: QuerySet[Study]) -> Study:
    """Give a study just imported the checked settings of its export (see the module docstring)."""
    locked = study_lock(study.pk)
    return _write(locked, options, visualness=_linked(options, linkable.exclude(pk=locked.pk)))
