"""Reads about invitation links: whether a link may be used now, and its state for lists."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from annotations.models import Invitation, Study
from common.errors import WorkbenchError


class InvitationRefused(WorkbenchError):
    """The link cannot be used: ``reason`` is ``revoked``, ``expired`` or ``used_up``."""

    status_code = 410

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def invitation_check(invitation: Invitation, *, now: datetime | None = None, joining: bool = True) -> None:
    """Raise ``InvitationRefused`` when the link is revoked or expired; when ``joining`` (a new account),
    also when it is used up or its study is not active (draft, paused or closed studies take no one new)."""
    now = now or timezone.now()
    if invitation.revoked_at is not None:
        raise InvitationRefused("revoked", "This link has been withdrawn by the researchers.")
    if invitation.expires_at <= now:
        raise InvitationRefused(
            "expired", f"This link expired on {invitation.expires_at:%d %B %Y at %H:%M} UTC."
        )
    if not joining:
        return
    if invitation.uses >= invitation.max_uses:
        raise InvitationRefused(
            "used_up", "This link has already been used by as many participants as the study needs."
        )
    if invitation.study.status == Study.Status.DRAFT:
        raise InvitationRefused(
            "inactive",
            "This study is not open yet: the researchers have not launched it. Try the link again later.",
        )
    if invitation.study.status != Study.Status.ACTIVE:
        raise InvitationRefused("inactive", "This study is not taking new participants at the moment.")


def invitation_state(invitation: Invitation, now: datetime | None = None) -> str:
    """``open``, ``revoked``, ``expired`` or ``used up`` (for lists; the join checks ``invitation_check``)."""
    try:
        invitation_check(invitation, now=now, joining=False)
    except InvitationRefused as exc:
        return exc.reason
    return "used up" if invitation.uses >= invitation.max_uses else "open"
