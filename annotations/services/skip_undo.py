"""Undo a skip: the skipped item comes back to the same annotator as a lease, when it still can.

A skip gives the item's slot back to others (``assignment.assignment_skip``). Undoing it takes a slot
again, so it follows the claim rule of ``assignment.md``: the study hands out items, the annotator is not
excluded from it, an invitation's quota is not reached, and the item has fewer than ``overlap`` others
occupying it (submitted, or leased and not expired). The item row is locked (``select_for_update``) before
that count, as every claim locks it before adding a lease, so an undo and a claim never both take the last
slot. docs/annotating.md, "Undo a skip".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotations.locks import item_lock_or_none
from annotations.models import Assignment, Participant, Study, User
from annotations.selectors.counted import active_exclusions
from annotations.selectors.overlap import policy_opening
from annotations.services.assignment import slots_of
from common.errors import Conflict, NotAllowed

Status = Assignment.Status


def _occupying(now: Any) -> Q:
    return Q(status=Status.SUBMITTED) | Q(status=Status.LEASED, lease_expires_at__gt=now)


@transaction.atomic
def assignment_skip_undo(*, assignment: Assignment, user: User, now: Any = None) -> Assignment:
    """Turn the user's own skipped ``assignment`` back into a lease of ``study.lease_minutes``.

    Raises ``NotAllowed`` for someone else's assignment, ``Conflict`` with the reason when the item cannot
    come back (not skipped, study not handing out items, excluded, quota reached, or filled by others)."""
    now = now or timezone.now()
    # The item first (the lock every claim takes before counting), then the assignment.
    item_lock_or_none(assignment.item_id)
    locked = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("study", "annotator", "item")
        .get(pk=assignment.pk)
    )
    if locked.annotator.user_id != user.pk:
        raise NotAllowed("this is not your assignment")
    if locked.status != Status.SKIPPED:
        raise Conflict("this item is not skipped, so there is no skip to undo")
    study = locked.study
    if study.status != Study.Status.ACTIVE:
        raise Conflict(f"the study is {study.get_status_display().lower()}; no items are handed out now")
    if active_exclusions(study).filter(annotator=locked.annotator).exists():
        raise Conflict("you are no longer given items in this study")
    quota = (
        Participant.objects.filter(user=user, study=study)
        .values_list("invitation__items_per_participant", flat=True)
        .first()
    )
    if quota is not None:
        held = Assignment.objects.filter(_occupying(now), study=study, annotator=locked.annotator).count()
        if held >= quota:
            raise Conflict(f"you have the {quota} items this study asks of you")
    if not locked.item.control_kind:  # a control item has no slots to fill: every annotator may answer it
        others = (
            Assignment.objects.filter(_occupying(now), item_id=locked.item_id).exclude(pk=locked.pk).count()
        )
        if others >= slots_of(locked.item, policy_opening(study)):
            raise Conflict("others have judged this item since you skipped it, so it cannot come back to you")
    locked.status, locked.skip_reason = Status.LEASED, ""
    locked.lease_expires_at = now + timedelta(minutes=study.lease_minutes)
    locked.completed_at = None
    locked.save(update_fields=["status", "skip_reason", "lease_expires_at", "completed_at"])
    return locked
