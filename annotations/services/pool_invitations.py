"""One Prolific link per rater pool, in one step (docs/crowd.md, "Prolific links per pool").

For each pool with a quota (``Study.rater_pool_quotas``): a Prolific invitation labelled ``Prolific:
<pool>`` whose fixed attributes (``{attribute: pool}``) put everyone who joins by it in that pool, with
``max uses = ceil(quota x items / min(items per participant, items))`` places, and never fewer than the
quota (one person judges an item once; real items, controls left out), made by ``invitation_create`` with
all of its checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from annotations.models import Invitation, Item, Study, User
from annotations.services.invitations import MAX_USES, invitation_create
from common.errors import ValidationFailed


@dataclass(frozen=True)
class PoolInvitation:
    """A link made for one pool, and how its places were sized (the page says it)."""

    invitation: Invitation
    sizing: str


def pool_places(*, quota: int, items: int, items_per_participant: int) -> int:
    """Participants a pool needs to give each item its quota: quota x items / the items one person can
    judge (their quota, at most every item), rounded up; never fewer than the quota itself, since one
    person judges an item once (and at least 1)."""
    each = max(1, min(items_per_participant, items))
    return max(1, quota, math.ceil(quota * items / each))


@transaction.atomic
def invitations_per_pool(
    *, study: Study, created_by: User, expires_at: datetime, items_per_participant: int, **link: Any
) -> list[PoolInvitation]:
    """One Prolific invitation per pool with a quota, pools by name; all or none. ``link``: the rest of
    ``invitation_create``'s settings (``completion_code``, ``consent_text``, ``estimated_minutes``, ...).
    Refused when the study sets no quotas or has no items. The caller checked that ``created_by`` may write
    the study."""
    quotas = study.rater_pool_quotas or {}
    if not study.rater_pool_attribute or not quotas:
        raise ValidationFailed(
            "the study declares no rater pools with quotas: set them on the Overlap tab first"
        )
    if isinstance(items_per_participant, bool) or not isinstance(items_per_participant, int):
        raise ValidationFailed(
            "items per participant must be a whole number", {"items_per_participant": "invalid"}
        )
    items = Item.objects.filter(study=study, control_kind="").count()
    if not items:
        raise ValidationFailed("the study has no items to judge yet: import them first")
    made = []
    for pool, quota in sorted(quotas.items()):
        places = pool_places(quota=quota, items=items, items_per_participant=max(1, items_per_participant))
        if places > MAX_USES:
            raise ValidationFailed(
                f"pool {pool!r} would need {places} participants, more than a link takes ({MAX_USES}); ask "
                "more items per participant",
                {"items_per_participant": "too few"},
            )
        invitation = invitation_create(
            study=study,
            created_by=created_by,
            expires_at=expires_at,
            max_uses=places,
            platform=Invitation.Platform.PROLIFIC,
            items_per_participant=items_per_participant,
            label=f"Prolific: {pool}"[:200],
            attributes={study.rater_pool_attribute: pool},
            **link,
        )
        each = min(items_per_participant, items)
        sizing = (
            f"{invitation.label}: {places} participant{'s' if places != 1 else ''} ({quota} per item x "
            f"{items} item{'s' if items != 1 else ''} / {each} per participant, rounded up"
            + (
                f"; the study has {items} items, fewer than the {items_per_participant} asked"
                if each < items_per_participant
                else ""
            )
            + ")"
        )
        made.append(PoolInvitation(invitation, sizing))
    return made
