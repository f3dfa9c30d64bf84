"""The report as one self-contained, printable HTML page (docs/reports.md, "Formats, downloads and the API").

Everything is inline: the style sheet, the figures (SVG, checked by :func:`reports.svg_check.svg_checked`
first; a figure that fails the check is left out with a note saying so) and a table of contents. The
page is a Django template (``templates/reports/document.html``) with autoescape on, so every string of
the document (titles, cells, notes, paragraphs: untrusted text) is escaped; the only markup marked safe
is a checked SVG. Tables have a ``<caption>``, ``scope``d headers and right-aligned numeric columns;
every value is printed by :func:`reports.document.cell_text`. The PDF is made from this page
(``reports.render_pdf``), so the page has a print style sheet too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from reports.document import (
    BulletList,
    DocFigure,
    DocTable,
    Facts,
    Paragraph,
    ReportDocument,
    Section,
    cell_text,
)
from reports.formats import Rendered
from reports.svg_check import UnsafeSvg, svg_checked

# Column kinds printed right-aligned (numbers line up on their last digit).
NUMERIC_KINDS = frozenset({"n", "estimate", "low", "high", "statistic", "p", "p_adjusted", "interval"})


@dataclass
class PageSection:
    """A section flattened for the template: its anchor, heading level (2 to 6) and prepared blocks."""

    anchor: str
    title: str
    level: int
    blocks: list[dict[str, Any]] = field(default_factory=list)


def method_text(table: DocTable) -> str:
    """A table's method record in one line (empty without one): shared by the HTML and LaTeX pages."""
    method = table.method
    if method is None:
        return ""
    parts = [f"Estimator: {method.estimator}"]
    if method.interval:
        parts.append(f"interval: {method.interval}")
    if method.test:
        parts.append(f"test: {method.test}")
    if method.correction:
        parts.append(f"correction: {method.correction}")
    parts.append(f"unit: {method.unit}")
    if method.reference:
        parts.append(f"reference: {method.reference}")
    return "; ".join(parts) + "."


def _table(table: DocTable) -> dict[str, Any]:
    kinds = [column.kind for column in table.columns]
    rows = []
    for row in table.rows:
        cells = []
        for index, value in enumerate(row):
            kind = kinds[index] if index < len(kinds) else "text"
            cells.append(
                {
                    "text": cell_text(value, kind),
                    "numeric": kind in NUMERIC_KINDS,
                    # The first column names the row when it is a label: a row header.
                    "header": index == 0 and kind == "label",
                }
            )
        rows.append(cells)
    return {
        "type": "table",
        "title": table.title,
        "n": cell_text(table.n, "n") if table.n is not None else "",
        "columns": [{"label": c.label, "numeric": c.kind in NUMERIC_KINDS} for c in table.columns],
        "rows": rows,
        "notes": table.notes,
        "method": method_text(table),
        "empty_reason": table.empty_reason if not table.rows else None,
    }


def _figure(figure: DocFigure) -> dict[str, Any]:
    try:
        svg: SafeString | None = mark_safe(svg_checked(figure.svg))  # noqa: S308 - checked just now
        refused = ""
    except UnsafeSvg as exc:
        svg, refused = None, str(exc)
    return {"type": "figure", "title": figure.title, "svg": svg, "refused": refused}


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, Paragraph):
        return {"type": "paragraph", "text": block.text}
    if isinstance(block, Facts):
        return {"type": "facts", "pairs": block.pairs}
    if isinstance(block, BulletList):
        return {"type": "bullets", "items": block.items}
    if isinstance(block, DocTable):
        return _table(block)
    if isinstance(block, DocFigure):
        return _figure(block)
    raise TypeError(f"unknown report block {type(block).__name__}")


def page_sections(document: ReportDocument) -> list[PageSection]:
    """The document's sections depth first, each with its anchor (``s1``, ``s1-2``...: never a key from
    the data) and heading level."""
    flat: list[PageSection] = []

    def walk(sections: list[Section], prefix: str, level: int) -> None:
        for number, section in enumerate(sections, start=1):
            anchor = f"{prefix}-{number}" if prefix else f"s{number}"
            flat.append(
                PageSection(
                    anchor=anchor,
                    title=section.title,
                    level=min(level, 6),
                    blocks=[_block(block) for block in section.blocks],
                )
            )
            walk(section.subsections, anchor, level + 1)

    walk(document.sections, "", 2)
    return flat


def render_page(document: ReportDocument) -> str:
    """The whole HTML page as text."""
    return render_to_string(
        "reports/document.html",
        {"document": document, "sections": page_sections(document), "studies": document.study_ids},
    )


def report_filename(document: ReportDocument, suffix: str) -> str:
    """``report-study-<id>[-<id>...].<suffix>``: ids only, never a name from the data."""
    return "report-study-" + "-".join(str(pk) for pk in document.study_ids) + f".{suffix}"


def render(document: ReportDocument) -> Rendered:
    return Rendered(
        filename=report_filename(document, "html"),
        content_type="text/html; charset=utf-8",
        body=render_page(document).encode("utf-8"),
    )
