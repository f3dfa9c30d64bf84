"""Whole numbers from query strings, clamped to a range, refused with a message when not numbers."""

from __future__ import annotations

from common.errors import ValidationFailed


def bounded_int(value: str | None, default: int, *, low: int = 0, high: int = 10_000) -> int:
    """``value`` as an int clamped to [low, high]; ``default`` when absent; ValidationFailed when not a
    number."""
    if value is None or value == "":
        return default
    try:
        return min(max(int(value), low), high)
    except ValueError as exc:
        raise ValidationFailed(f"{value!r} is not a whole number") from exc
