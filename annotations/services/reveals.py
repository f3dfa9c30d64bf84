"""Reveal after submit: showing machine labels to an annotator who has answered, and logging it.

Every showing is a ``RevealLog`` row (what was shown, when), and the annotator's agree/disagree
answers are stored on it, so a researcher can measure anchoring: compare answers given after
reveals with answers given before any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotations.models import Assignment, RevealLog, User
from annotations.selectors.reveals import reveal_enabled
from common.errors import Conflict, NotAllowed, ValidationFailed

AGREEMENT_VALUES = ("agree", "disagree")


@transaction.atomic
def reveal_log_create(*, assignment: Assignment, shown: list[dict[str, Any]]) -> RevealLog:
    """Log one showing of machine labels; only after this person submitted, only if the study allows it."""
    if not reveal_enabled(assignment):
        raise NotAllowed("this study does not reveal machine labels")
    if assignment.status != Assignment.Status.SUBMITTED:
        raise Conflict("machine labels are shown only after you submit your own answers")
    return RevealLog.objects.create(
        study_id=assignment.study_id,
        item_id=assignment.item_id,
        annotator_id=assignment.annotator_id,
        assignment=assignment,
        shown=shown,
    )


@transaction.atomic
def reveal_record_agreement(*, reveal: RevealLog, user: User, agreement: Mapping[str, str]) -> RevealLog:
    """Store whether the annotator agrees with the machine label, per question shown."""
    reveal = RevealLog.objects.select_for_update().select_related("annotator").get(pk=reveal.pk)
    if reveal.annotator.user_id != user.pk:
        raise NotAllowed("this is not your reveal")
    questions = {entry["question"] for entry in reveal.shown}
    clean: dict[str, str] = {}
    for key, value in agreement.items():
        if key not in questions:
            raise ValidationFailed(f"'{key}' was not shown", {key: "not shown"})
        if value not in AGREEMENT_VALUES:
            raise ValidationFailed(f"'{key}': answer agree or disagree", {key: "agree or disagree"})
        clean[key] = value
    reveal.agreement, reveal.answered_at = clean, timezone.now()
    reveal.save(update_fields=["agreement", "answered_at"])
    return reveal
