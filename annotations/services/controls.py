"""Control items: gold items and attention checks, changing the study's quality settings, and how claims
mix controls into an annotator's queue (docs/crowd.md, "Quality control").

- A control is an ``Item`` with ``control_kind`` ``gold`` (known answers) or ``attention`` (an
  instruction in the item, e.g. its ``note`` "Select 'Agree' for this item", and the expected
  answer). Its ``control_answers`` are ``{question_key: value}``, each checked by the same
  validators as an annotation (``protocols.answers.clean_answer``).
- Settings live in ``StudyQualitySettings`` (one row per study, a column per name of ``SETTINGS``, empty
  when never chosen); ``selectors.controls.quality_settings`` reads them with defaults,
  ``quality_settings_update`` changes them.
- Mixing (``control_plan`` and ``control_candidate``, called by ``assignment_claim_next``): claim
  number *n* of an annotator (0-based, counting every item they were ever leased in the study) is
  a control slot when ``control_slot(seed, n, rate)`` says so: the claims are cut into stretches of
  1/rate and one claim at a pseudo-random place in each stretch is a slot, so 100 claims at rate 0.1
  hold exactly 10 slots, at places fixed by the annotator's seed (reproducible, not periodic). The
  control served is drawn among those the annotator never had (never the same one twice), from the
  same seed. Controls take no overlap slot: every annotator may see each one.
- Qualification: with ``qualification_items`` = N > 0, an annotator is served only gold items until
  they have submitted N of them; the first N are then scored and, below
  ``qualification_min_accuracy``, the annotator gets no more items.
- Scoring (``control_outcomes``, ``qualification_state``) reads, so it is in ``selectors.controls``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotations.locks import item_lock, study_lock_only
from annotations.models import ControlKind, Item, Study, StudyQualitySettings
from annotations.selectors.controls import (
    SETTINGS,
    QualitySettings,
    quality_setting_value,
    quality_settings,
)
from annotations.services.annotation_writes import item_context
from common.errors import ValidationFailed
from protocols.answers import AnswerError, clean_answer
from protocols.schema import Protocol

DEFAULT_CONTROL_RATE = 0.1
MAX_NOTE = 2000


def _quality_write(study: Study, changes: Mapping[str, float | int | None]) -> None:
    """Write checked settings (None: back to the default) in the locked study's row; touch the study
    (cached reports key on its ``updated_at``) and refresh ``study``'s cached row."""
    row, _created = StudyQualitySettings.objects.select_for_update().get_or_create(study_id=study.pk)
    for name, value in changes.items():
        setattr(row, name, value)
    row.save(update_fields=list(changes))  # checked by quality_setting_value; constraints say it again
    _touch(study)
    study.quality = row


@transaction.atomic
def quality_settings_update(*, study: Study, changes: Mapping[str, Any]) -> QualitySettings:
    """Change some quality settings (names of ``SETTINGS``); every value is checked, nothing half-saved."""
    unknown = sorted(set(changes) - set(SETTINGS))
    if unknown:
        raise ValidationFailed(f"unknown quality setting {unknown[0]!r} (known: {', '.join(SETTINGS)})")
    clean = {name: quality_setting_value(name, value) for name, value in changes.items()}
    study_lock_only(study.pk)
    if clean:
        _quality_write(study, clean)
    return quality_settings(study)


# --- Marking controls ------------------------------------------------------------------------------


def control_answers_clean(*, protocol: Protocol, item: Item, answers: Mapping[str, Any]) -> dict[str, Any]:
    """Expected answers checked like annotations: the questions must exist, apply to the item and not be
    boxes; each value must be a valid answer. Raises ValidationFailed with a message per question."""
    if not isinstance(answers, Mapping) or not answers:
        raise ValidationFailed("a control needs at least one expected answer", {"answers": "required"})
    context = item_context(item)
    applicable = {question.key for question in protocol.questions_for(dict(item.metadata))}
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for key, value in answers.items():
        if not protocol.has_question(key):
            errors[key] = "is not a question of this protocol"
            continue
        question = protocol.question(key)
        if question.kind == "boxes":
            errors[key] = "boxes cannot be a control's answer (they are compared by IoU, not exactly)"
        elif key not in applicable:
            errors[key] = "does not apply to this item"
        else:
            try:
                clean[key] = clean_answer(question, value, context=context, protocol=protocol).value
            except AnswerError as exc:
                errors[key] = exc.message
    for key in clean:
        show_if = protocol.question(key).show_if
        if show_if and show_if["question"] in clean and str(clean[show_if["question"]]) not in show_if["in"]:
            errors[key] = f"is asked only when '{show_if['question']}' is one of {', '.join(show_if['in'])}"
    if errors:
        raise ValidationFailed("; ".join(f"{key}: {message}" for key, message in errors.items()), errors)
    return clean


def _touch(study: Study) -> None:
    # Cached reports (metrics_report_cached) key on the study's updated_at.
    Study.objects.filter(pk=study.pk).update(updated_at=timezone.now())


def _turn_mixing_on(study: Study) -> None:
    """Marking a study's first control sets the control rate to 10% unless one was chosen (even 0)."""
    study_lock_only(study.pk)
    chosen = (
        StudyQualitySettings.objects.filter(study_id=study.pk).values_list("control_rate", flat=True).first()
    )
    if chosen is None:
        _quality_write(study, {"control_rate": DEFAULT_CONTROL_RATE})


@transaction.atomic
def control_mark(*, study: Study, item: Item, kind: str, answers: Mapping[str, Any], note: str = "") -> Item:
    """Make ``item`` a control of ``kind`` (gold or attention) with its expected answers (replacing any
    earlier ones). ``note`` is shown with the item on the task page (an attention check's instruction).
    The item stops counting in consensus, agreement and metrics from the next computation."""
    if item.study_id != study.pk:
        raise ValidationFailed("the item is not in this study")
    if kind not in ControlKind.values:
        raise ValidationFailed(f"kind must be one of {', '.join(ControlKind.values)}", {"kind": "invalid"})
    note = (note or "").strip()
    if len(note) > MAX_NOTE:
        raise ValidationFailed(f"the note is longer than {MAX_NOTE} characters", {"note": "too long"})
    clean = control_answers_clean(protocol=study.protocol_obj, item=item, answers=answers)
    item = item_lock(item.pk)
    item.control_kind, item.control_answers, item.note = kind, clean, note
    item.save(update_fields=["control_kind", "control_answers", "note"])
    _turn_mixing_on(study)
    _touch(study)
    return item


@transaction.atomic
def control_unmark(*, study: Study, item: Item) -> Item:
    """Make a control a real item again (its expected answers and note are removed)."""
    if item.study_id != study.pk:
        raise ValidationFailed("the item is not in this study")
    item = item_lock(item.pk)
    item.control_kind, item.control_answers, item.note = "", {}, ""
    item.save(update_fields=["control_kind", "control_answers", "note"])
    _touch(study)
    return item


# --- Mixing controls into claims -------------------------------------------------------------------
