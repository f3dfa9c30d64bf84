"""Annotator attributes given to one study (a region, a recruitment route): checked, and merged where they
belong (docs/import-export.md, "Annotator attributes").

They come from an invitation (demographic answers and fixed ``attributes``), annotation JSONL lines
(``annotator_attributes``) or a CSV file (``interchange/attribute_import.py``), and stay per study: an
account's on its enrolment, an imported annotator's on its row (``selectors/pools.py`` reads them; a
study's rater pools are the values of one of them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from annotations.models import MAX_POOL_CHARS, Annotator, Enrollment
from annotations.services.rater_pools import MAX_ATTRIBUTE_KEY_CHARS
from common.errors import ValidationFailed

MAX_ATTRIBUTE_KEYS = 20


def attribute_problem(key: Any, value: Any) -> str | None:
    """Why one attribute cannot be kept (None when it can): names are text of 1 to 64 printable characters
    without spaces around; values text (at most 200 characters), finite numbers or true/false."""
    if not isinstance(key, str) or not key or len(key) > MAX_ATTRIBUTE_KEY_CHARS or not key.isprintable():
        return f"an attribute name must be text of 1 to {MAX_ATTRIBUTE_KEY_CHARS} printable characters"
    if key != key.strip():
        return f"attribute {key!r}: its name has spaces around it"
    if isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2**53):
        return None
    if isinstance(value, float) and math.isfinite(value):
        return None
    if isinstance(value, str) and len(value) <= MAX_POOL_CHARS and "\x00" not in value:
        return None
    kinds = f"text (at most {MAX_POOL_CHARS} characters), a number or true/false"
    return f"attribute {key!r}: its value must be {kinds}"


def attributes_clean(value: Any, *, where: str) -> dict[str, Any]:
    """An object of at most 20 attributes, each checked by ``attribute_problem``; text values trimmed.
    ``where`` starts a refusal (e.g. "line 3")."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed(f'{where}: attributes must be an object, e.g. {{"region": "South Asia"}}')
    if len(value) > MAX_ATTRIBUTE_KEYS:
        raise ValidationFailed(
            f"{where}: at most {MAX_ATTRIBUTE_KEYS} attributes", {"attributes": "too many"}
        )
    for key, raw in value.items():
        if problem := attribute_problem(key, raw):
            raise ValidationFailed(f"{where}: {problem}", {"attributes": "invalid"})
    return {key: raw.strip() if isinstance(raw, str) else raw for key, raw in value.items()}


def attributes_merged(
    stored: Mapping[str, Any] | None, given: Mapping[str, Any], *, who: str
) -> dict[str, Any]:
    """``stored`` with ``given``'s keys set (the others kept); refused past 20 in all (an export carries
    them back on annotation lines, which take 20)."""
    merged = {**(stored or {}), **given}
    if len(merged) > MAX_ATTRIBUTE_KEYS:
        raise ValidationFailed(
            f"{who} would have {len(merged)} attributes in this study, more than {MAX_ATTRIBUTE_KEYS}"
        )
    return merged


@transaction.atomic
def annotator_attributes_merge(
    given: Mapping[str, Mapping[str, Any]],
    *,
    imported: Mapping[str, Annotator],
    enrolled: Mapping[str, Enrollment],
) -> tuple[int, int]:
    """Merge checked attributes (``{who: {key: value}}``) into the study's imported annotators' rows (no
    account; ``imported`` by name) and its accounts' enrolments (``enrolled`` by username), in two bulk
    updates; ``who`` names them in a refusal. Returns (changed, unchanged)."""
    rows: dict[str, list[Any]] = {"study_attributes": [], "attributes": []}
    unchanged = 0
    for who, attributes in sorted(given.items()):
        annotator = imported.get(who)
        if annotator is not None and (annotator.study_id is None or annotator.user_id is not None):
            raise ValidationFailed(f"{who} is not an imported annotator of a study")
        row: Any = annotator if annotator is not None else enrolled[who]
        field = "study_attributes" if annotator is not None else "attributes"
        merged = attributes_merged(getattr(row, field), attributes, who=who)
        if not attributes or merged == getattr(row, field):
            unchanged += 1
            continue
        setattr(row, field, merged)
        rows[field].append(row)
    Annotator.objects.bulk_update(rows["study_attributes"], ["study_attributes"], batch_size=1000)
    Enrollment.objects.bulk_update(rows["attributes"], ["attributes"], batch_size=1000)
    return len(rows["study_attributes"]) + len(rows["attributes"]), unchanged
