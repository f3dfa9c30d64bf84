"""Whole numbers (clamped to a range) and yes/no flags from query strings, refused with a message when
neither."""

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


_YES = frozenset({"1", "true", "yes", "on"})
_NO = frozenset({"", "0", "false", "no", "off"})


def query_flag(value: str | None, name: str) -> bool:
    """A yes/no query parameter (``?partial=1``, ``?empty=0``): absent or blank is no; anything but
    1/0, true/false, yes/no, on/off is refused with a message naming ``name``."""
    text = (value or "").strip().lower()
    if text in _YES:
        return True
    if text in _NO:
        return False
    raise ValidationFailed(f"{name} must be 1 or 0 (true or false), not {text[:20]!r}", {name: "not a flag"})
