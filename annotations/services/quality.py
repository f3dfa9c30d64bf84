"""Excluding an annotator from a study, and reinstating them (docs/crowd.md, "Quality control").

Excluding writes an ``AnnotatorExclusion`` row (reason, who, when); reinstating fills in who and when
on the same row. Both recompute the stored consensus of every question that has one, in the same
transaction, so consensus, agreement and metrics are without (or again with) that annotator at once.
The per-annotator quality report and the exclusion history are reads: ``selectors/quality.py``.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.models import (
    Annotation,
    Annotator,
    AnnotatorExclusion,
    Assignment,
    ConsensusLabel,
    Study,
    User,
)
from annotations.selectors.counted import active_exclusions
from annotations.services.consensus import consensus_compute
from common.errors import Conflict, ValidationFailed

MAX_REASON = 2000


# --- Exclusion -------------------------------------------------------------------------------------


def _recompute_consensus(study: Study) -> None:
    """Recompute each question's stored consensus (the study's rule), and let cached reports go."""
    protocol = study.protocol_obj
    keys = sorted(
        set(
            ConsensusLabel.objects.filter(study=study)
            .exclude(rule="adjudicated")
            .values_list("question_key", flat=True)
        )
    )
    for key in keys:
        if protocol.has_question(key) and protocol.question(key).kind != "boxes":
            consensus_compute(study=study, question=key)
    Study.objects.filter(pk=study.pk).update(updated_at=timezone.now())


def _check_in_study(study: Study, annotator: Annotator) -> None:
    if annotator.kind != Annotator.Kind.HUMAN:
        raise ValidationFailed(
            "only human annotators are excluded (machine labellers never count in consensus)"
        )
    has_work = (
        Assignment.objects.filter(study=study, annotator=annotator).exists()
        or Annotation.objects.filter(study=study, annotator=annotator).exists()
        or (annotator.user_id is not None and study.enrollments.filter(user_id=annotator.user_id).exists())
    )
    if not has_work:
        raise ValidationFailed(f"{annotator.name} has no work in this study")


@transaction.atomic
def annotator_exclude(
    *, study: Study, annotator: Annotator, user: User | None, reason: str, now: datetime | None = None
) -> AnnotatorExclusion:
    """Exclude an annotator from a study: their answers stop counting (consensus recomputed now) and they
    are given no new items. Refused without a reason, or when they are already excluded."""
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("say why the annotator is excluded", {"reason": "required"})
    if len(reason) > MAX_REASON:
        raise ValidationFailed(f"the reason is longer than {MAX_REASON} characters", {"reason": "too long"})
    _check_in_study(study, annotator)
    Study.objects.select_for_update().filter(pk=study.pk).first()  # one exclusion change at a time per study
    if active_exclusions(study).filter(annotator=annotator).exists():
        raise Conflict(f"{annotator.name} is already excluded from this study")
    try:
        with transaction.atomic():
            exclusion = AnnotatorExclusion.objects.create(
                study=study,
                annotator=annotator,
                reason=reason,
                excluded_by=user,
                excluded_at=now or timezone.now(),
            )
    except IntegrityError as exc:
        raise Conflict(f"{annotator.name} is already excluded from this study") from exc
    _recompute_consensus(study)
    return exclusion


@transaction.atomic
def annotator_reinstate(
    *, study: Study, annotator: Annotator, user: User | None, note: str = "", now: datetime | None = None
) -> AnnotatorExclusion:
    """Undo an exclusion: the row keeps its history and records who reinstated and when; consensus is
    recomputed with the annotator's answers again."""
    note = (note or "").strip()
    if len(note) > MAX_REASON:
        raise ValidationFailed(f"the note is longer than {MAX_REASON} characters", {"note": "too long"})
    exclusion = active_exclusions(study).select_for_update().filter(annotator=annotator).first()
    if exclusion is None:
        raise Conflict(f"{annotator.name} is not excluded from this study")
    exclusion.reinstated_at, exclusion.reinstated_by, exclusion.reinstate_note = (
        now or timezone.now(),
        user,
        note,
    )
    exclusion.save(update_fields=["reinstated_at", "reinstated_by", "reinstate_note"])
    _recompute_consensus(study)
    return exclusion
