"""Reads of the drafts kept on the server (``AssignmentDraft``; ``services/drafts.py`` writes them)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from annotations.models import Assignment, AssignmentDraft


def lease_is_live(assignment: Assignment, now: Any = None) -> bool:
    """The lease is the annotator's now: leased and not past its expiry."""
    now = now or timezone.now()
    return bool(
        assignment.status == Assignment.Status.LEASED
        and assignment.lease_expires_at
        and assignment.lease_expires_at > now
    )


def draft_fields_for(assignment: Assignment, now: Any = None) -> list[list[str]] | None:
    """The draft's form fields for the task page, while the lease is live (else None). The caller
    fetched ``assignment`` for its own annotator (``access.assignment_get_for_user``, which selects
    the draft with it: no query here)."""
    if not lease_is_live(assignment, now):
        return None
    try:
        draft = assignment.draft
    except AssignmentDraft.DoesNotExist:
        return None
    return list(draft.fields)
