"""``{% load long_tables %}``: how the analysis pages (findings, agreement and consensus, compare,
progress and quality) show a long table. A table of more than ``FOLD_ROWS`` rows starts folded behind
a summary line (how many rows, and the headline: the page's own figure, or the first row), in a box
of its own height whose header row stays in view as its rows scroll (``static/css/long_pages.css``,
``.table-tall``); docs/agreement.md, "Long pages"."""

from __future__ import annotations

from collections.abc import Sized

from django import template

register = template.Library()

FOLD_ROWS = 12  # rows a table shows open; a longer one starts folded behind its summary line


@register.filter(name="folds")
def folds(rows: Sized | None) -> bool:
    """Whether a table of ``rows`` starts folded: more than ``FOLD_ROWS`` rows."""
    return rows is not None and len(rows) > FOLD_ROWS
