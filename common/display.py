"""How a report's cell reads on a page or in a terminal (no domain: numbers, yes/no, lists)."""

from __future__ import annotations

from typing import Any


def cell_display(value: Any) -> str:
    """A cell as the page shows it: 4 decimals at most, yes/no, a dash for undefined."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value == value else "–"
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)
