"""The report's figures, drawn by the findings page's matplotlib code (one drawing, every door).

The drawing lives in ``annotations/views/figures.py`` (``figure_render``) for now, and a page module may
be imported by no app module (tests/test_architecture.py). So the project, which may import both,
registers it here at start-up (``workbench/apps.py``: :func:`figure_drawer_register`), and
:func:`figure_bytes` calls it. When the drawing moves out of the page layer (issue 26 point 5), this
module imports it directly and the registration goes: only that import changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# figure_render(report, table_key, params, fmt) -> bytes | None
Drawer = Callable[[dict[str, Any], str, dict[str, str], str], bytes | None]

_drawers: list[Drawer] = []


def figure_drawer_register(draw: Drawer) -> None:
    """Make ``draw`` the function :func:`figure_bytes` draws with (the last registered wins)."""
    _drawers[:] = [draw]


def figure_bytes(table: dict[str, Any], figure: dict[str, Any], fmt: str) -> bytes | None:
    """SVG or PDF bytes of ``figure`` (a findings report's figure: key, table, params) drawn from
    ``table`` (that report's table as JSON); None when no drawer is registered or the table has none."""
    if not _drawers:
        return None
    return _drawers[0]({"tables": [table]}, figure["table"], dict(figure.get("params") or {}), fmt)
