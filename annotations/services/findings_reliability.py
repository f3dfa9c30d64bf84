"""The reliability gate's writes (docs/metrics.md, "Reliability gate"): a researcher leaves a question out of
a study's findings (recorded with who and why; every report states it) or takes it back, and chooses the
study's thresholds. Each write touches the study, so cached findings are recomputed."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotations.locks import study_lock
from annotations.models import FindingsExclusion, FindingsReliability, Study
from common.errors import ValidationFailed
from metrics.reliability import Thresholds

MAX_REASON = 1000


def _question(study: Study, question_key: str) -> str:
    key = (question_key or "").strip()
    protocol = study.protocol_obj
    if not protocol.has_question(key) or protocol.question(key).kind == "boxes":
        raise ValidationFailed(
            f"{key[:64]!r} is not a question of this study the findings read", {"question": "unknown"}
        )
    return key


@transaction.atomic
def findings_question_exclude(
    *, study: Study, question_key: str, reason: str, user: Any
) -> FindingsExclusion:
    """Leave ``question_key`` out of ``study``'s findings, with the reason (required) and who did it."""
    key = _question(study, question_key)
    why = (reason or "").strip()
    if not why:
        raise ValidationFailed(
            "say why the question is left out (the report states it)", {"reason": "required"}
        )
    if len(why) > MAX_REASON or "\x00" in why:
        raise ValidationFailed(f"the reason must be at most {MAX_REASON} characters", {"reason": "too long"})
    locked = study_lock(study.pk)
    row, _created = FindingsExclusion.objects.update_or_create(
        study=locked, question_key=key, defaults={"reason": why, "excluded_by": user}
    )
    locked.save(update_fields=["updated_at"])
    return row


@transaction.atomic
def findings_question_include(*, study: Study, question_key: str) -> bool:
    """Take ``question_key`` back into ``study``'s findings; whether it was left out."""
    locked = study_lock(study.pk)
    deleted = FindingsExclusion.objects.filter(
        study=locked, question_key=(question_key or "").strip()
    ).delete()[0]
    if deleted:
        locked.save(update_fields=["updated_at"])
    return bool(deleted)


@transaction.atomic
def findings_thresholds_set(
    *, study: Study, reliable_at: float, tentative_at: float, min_items: int, user: Any
) -> Thresholds:
    """Choose ``study``'s reliability thresholds (Krippendorff's values restore the default)."""
    try:
        thresholds = Thresholds(float(reliable_at), float(tentative_at), int(min_items))
    except (TypeError, ValueError) as exc:
        raise ValidationFailed(f"reliability thresholds: {exc}", {"thresholds": "invalid"}) from exc
    locked = study_lock(study.pk)
    if thresholds.is_default:
        FindingsReliability.objects.filter(study=locked).delete()
    else:
        FindingsReliability.objects.update_or_create(
            study=locked,
            defaults={
                "reliable_at": thresholds.reliable_at,
                "tentative_at": thresholds.tentative_at,
                "min_items": thresholds.min_items,
                "chosen_by": user,
            },
        )
    locked.save(update_fields=["updated_at"])
    return thresholds
