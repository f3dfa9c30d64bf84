"""A study's rater pools and their quotas, checked and saved (docs/crowd.md, "Rater pools and quotas").

``Study.rater_pool_attribute`` names the attribute whose values are the pools (blank: none);
``Study.rater_pool_quotas`` is ``{pool: judgements per item}`` (empty: no quotas), read by the claim
(``selectors/pool_quotas.py``). The Overlap tab and ``PATCH /api/studies/ID/`` save them through
``study_rater_pools_set``, which refuses, with the reason, what the claim could not honour.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotations.locks import study_lock
from annotations.models import MAX_POOL_CHARS, Study
from common.errors import ValidationFailed

MAX_ATTRIBUTE_KEY_CHARS = 64
MAX_QUOTA_POOLS = 20


def attribute_key_clean(value: Any) -> str:
    """A pool attribute: text of at most 64 printable characters, trimmed ("" for none)."""
    key = value.strip() if isinstance(value, str) else value
    if key is None or (isinstance(key, str) and len(key) <= MAX_ATTRIBUTE_KEY_CHARS and key.isprintable()):
        return key or ""
    raise ValidationFailed(
        f"the pool attribute must be text of at most {MAX_ATTRIBUTE_KEY_CHARS} printable characters",
        {"rater_pool_attribute": "invalid"},
    )


def pool_quotas_clean(value: Any, *, attribute: str, overlap: int) -> dict[str, int]:
    """``{pool: judgements per item}`` checked: at most 20 pools, each distinct printable text (trimmed, 1 to
    200 characters) with a whole number from 1 to the overlap; quotas need an attribute."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed(
            'pool quotas must be an object, e.g. {"South Asia": 2}', {"rater_pool_quotas": "not an object"}
        )
    if not attribute:
        raise ValidationFailed(
            "pool quotas need the attribute the pools are values of (e.g. region)",
            {"rater_pool_attribute": "required"},
        )
    if len(value) > MAX_QUOTA_POOLS:
        raise ValidationFailed(
            f"at most {MAX_QUOTA_POOLS} pools with quotas", {"rater_pool_quotas": "too many"}
        )
    quotas: dict[str, int] = {}
    for raw, quota in value.items():
        pool = raw.strip() if isinstance(raw, str) else ""
        if not pool or len(pool) > MAX_POOL_CHARS or not pool.isprintable() or pool in quotas:
            raise ValidationFailed(
                f"a pool must be a distinct value of {attribute} of 1 to {MAX_POOL_CHARS} printable "
                f"characters; {str(raw)[:40]!r} is not",
                {"rater_pool_quotas": "invalid pool"},
            )
        if isinstance(quota, bool) or not isinstance(quota, int) or not 1 <= quota <= overlap:
            raise ValidationFailed(
                f"the quota of pool {pool!r} must be a whole number of judgements per item from 1 to the "
                f"study's overlap ({overlap}); {quota!r} is not",
                {"rater_pool_quotas": "out of range"},
            )
        quotas[pool] = quota
    return quotas


def pool_quotas_from_text(text: str) -> dict[str, int]:
    """Quotas written one a line as ``POOL: K`` (the Overlap tab's box), shape only."""
    quotas: dict[str, int] = {}
    for number, line in enumerate((text or "")[:10_000].splitlines(), start=1):
        pool, colon, quota = (part.strip() for part in line.rpartition(":"))
        if not line.strip():
            continue
        if not colon or not pool or not (quota.isascii() and quota.isdigit()) or pool in quotas:
            problem = (
                f"pool {pool!r} is given twice" if pool in quotas else "write POOL: K, e.g. 'South Asia: 2'"
            )
            raise ValidationFailed(
                f"pool quotas, line {number}: {problem}", {"rater_pool_quotas": "invalid line"}
            )
        quotas[pool] = int(quota.lstrip("0")[:12] or "0")  # too many digits: out of range either way
    return quotas


def pool_quotas_within_overlap(study: Study) -> None:
    """Refuse an overlap below a pool's quota (the pool could never give what the study asks of it)."""
    for pool, quota in sorted((study.rater_pool_quotas or {}).items()):
        if quota > study.overlap:
            raise ValidationFailed(
                f"the overlap ({study.overlap}) is below the quota of pool {pool!r} ({quota}); lower the "
                "pool quotas first",
                {"overlap": "below a pool quota"},
            )


@transaction.atomic
def study_rater_pools_set(*, study: Study, attribute: Any = None, quotas: Any = None) -> Study:
    """Declare the study's pool attribute (``""``: none, which clears the quotas) and each pool's judgements
    per item (``{}``: no quotas); None keeps either. The next claims count by them; leases already made
    keep their pool."""
    locked = study_lock(study.pk)
    key = locked.rater_pool_attribute if attribute is None else attribute_key_clean(attribute)
    given = (locked.rater_pool_quotas if key else {}) if quotas is None else quotas
    locked.rater_pool_attribute = key
    locked.rater_pool_quotas = pool_quotas_clean(given, attribute=key, overlap=locked.overlap)
    locked.save(update_fields=["rater_pool_attribute", "rater_pool_quotas", "updated_at"])
    return locked
