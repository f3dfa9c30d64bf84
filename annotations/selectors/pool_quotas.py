"""Rater pools on the claim path: which pool a claimant is of, and how many judgements of an item each pool
may give (``services/assignment.md``, "Rater pools and quotas"; docs/crowd.md).

The pools are the values of the study's ``rater_pool_attribute`` that people gave it (``selectors.pools``);
while ``rater_pool_quotas`` is set, an item takes at most ``quota[V]`` submitted or live leased judgements
from pool V, and someone of no pool with a quota gets nothing. The claim counts by ``Assignment.rater_pool``
(the pool copied onto each lease) in its candidate query and again in the lease's insert.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, Sum

from annotations.models import MAX_POOL_CHARS, Assignment, Enrollment, Invitation, Item, Study
from annotations.selectors.pools import pool_name
from common.errors import NotAllowed


class PoolNotCollected(NotAllowed):
    """The study collects judgements per pool (quotas) and the claimant is of none it collects."""


@dataclass(frozen=True)
class ClaimPool:
    """The claimant's pool value (copied onto the lease; "" for none) and its quota per item (None: no
    quotas, only the item's slots count)."""

    value: str = ""
    quota: int | None = None

    def admits(self, occupied_by_pool: int) -> bool:
        """Whether an item holding ``occupied_by_pool`` judgements of this pool (others') takes one more."""
        return self.quota is None or occupied_by_pool < self.quota


NO_POOL = ClaimPool()


def pool_value(attributes: Mapping[str, Any] | None, key: str) -> str:
    """The pool the value of ``key`` names (``pools.pool_name``: text, trimmed), "" for none or too long."""
    name = pool_name((attributes or {}).get(key)) if key else None
    return name if name is not None and len(name) <= MAX_POOL_CHARS else ""


def claim_pool(study: Study, attributes: Mapping[str, Any] | None) -> ClaimPool:
    """The claimant's pool from the attributes they gave this study (no query). Raises ``PoolNotCollected``
    while the study sets quotas and the claimant has no value of its attribute, or one with no quota."""
    key, quotas = study.rater_pool_attribute, study.rater_pool_quotas or {}
    value = pool_value(attributes, key)
    if not key or not quotas:
        return ClaimPool(value=value)
    quota = quotas.get(value) if value else None
    if isinstance(quota, int) and not isinstance(quota, bool):
        return ClaimPool(value=value, quota=quota)
    if value:
        raise PoolNotCollected(
            f"This study collects judgements per {key}; your {key} is not one it collects."
        )
    raise PoolNotCollected(
        f"This study collects judgements per {key}, and it has no {key} for you, so it has no items for you. "
        "Write to the researcher if you think this is wrong."
    )


def late_submit_pool(study: Study, rater_pool: str) -> ClaimPool:
    """The pool a submit on an expired lease counts in (the lease's) under the quotas now; a pool whose quota
    is gone may give nothing more (quota 0)."""
    quotas = study.rater_pool_quotas or {}
    if not study.rater_pool_attribute or not quotas:
        return ClaimPool(value=rater_pool)
    quota = quotas.get(rater_pool) if rater_pool else None
    return ClaimPool(value=rater_pool, quota=quota if isinstance(quota, int) else 0)


def pool_recount_sql(quote: Callable[[str], str]) -> str:
    """What the lease's ``INSERT ... SELECT ... WHERE`` adds under a quota: the item's live leases and submits
    by others of the claimant's pool are fewer than the quota. Parameters: item id, annotator id, pool,
    status submitted, status leased, now, quota."""
    return (
        f" AND (SELECT COUNT(*) FROM {quote(Assignment._meta.db_table)} "
        f"WHERE {quote('item_id')} = %s AND {quote('annotator_id')} <> %s AND {quote('rater_pool')} = %s "
        f"AND ({quote('status')} = %s OR ({quote('status')} = %s AND {quote('lease_expires_at')} > %s))"
        f") < %s"
    )


@dataclass(frozen=True)
class PoolProgress:
    """A pool with a quota: the judgements its people submitted, and the items holding its quota of them."""

    pool: str
    quota: int
    judgements: int
    items_full: int
    items: int


def pool_quota_progress(study: Study) -> list[PoolProgress]:
    """Each pool with a quota, by name, on the real items (controls take no slot): counted in the database
    (one query for the items, one per pool; none while the study sets no quotas)."""
    quotas = study.rater_pool_quotas or {}
    if not study.rater_pool_attribute or not quotas:
        return []
    items = Item.objects.filter(study=study, control_kind="").count()
    found = []
    for pool, quota in sorted(quotas.items()):
        per_item = (
            Assignment.objects.filter(
                study=study, status=Assignment.Status.SUBMITTED, item__control_kind="", rater_pool=pool
            )
            .order_by()
            .values("item_id")
            .annotate(n=Count("id"))
        )
        # an aggregate over the grouped rows: Django wraps them in a subquery
        counted = per_item.aggregate(judgements=Sum("n"), full=Count("item_id", filter=Q(n__gte=quota)))
        found.append(PoolProgress(pool, quota, counted["judgements"] or 0, counted["full"] or 0, items))
    return found


def pool_attribute_keys(study: Study, limit: int = 50) -> list[str]:
    """The attribute keys the study knows, sorted (the Overlap tab suggests them): its enrolments' and
    imported annotators', its invitations' questions and fixed attributes. Three queries."""
    held = [
        *Enrollment.objects.filter(study=study)
        .exclude(attributes={})
        .values_list("attributes", flat=True)[:5000],
        *study.external_annotators.exclude(study_attributes={}).values_list("study_attributes", flat=True)[
            :5000
        ],
    ]
    keys = {str(key) for attributes in held for key in attributes or {}}
    for fields, fixed in Invitation.objects.filter(study=study).values_list("demographics", "attributes"):
        keys.update(
            str(field["key"]) for field in fields or [] if isinstance(field, dict) and field.get("key")
        )
        keys.update(str(key) for key in fixed or {})
    return sorted(keys)[:limit]
