"""The report's figures, drawn by the same matplotlib code as the findings page and its downloads
(``annotations/figures.py``: one drawing, every door)."""

from __future__ import annotations

from typing import Any


def figure_bytes(table: dict[str, Any], figure: dict[str, Any], fmt: str) -> bytes | None:
    """SVG or PDF bytes of ``figure`` (a findings report's figure: key, table, params) drawn from
    ``table`` (that report's table as JSON); None when the table has no figure. matplotlib loads only
    when a report draws."""
    from annotations.figures import table_figure

    return table_figure(table, figure, fmt)
