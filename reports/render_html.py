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
# Every table fits the page's width (docs/reports.md, "Page edges"): its columns get fixed widths from
# their contents (``column_widths``), a number or short text column as wide as its longest cell, a
# longer text column at most TEXT_CAP characters wide (it wraps between words, a long identifier
# anywhere). A table of more columns than LANDSCAPE_COLUMNS is set on landscape pages of its own in the
# PDF; more than WIDE_COLUMNS, smaller.
SHORT_CELL = 14
TEXT_CAP = 32
BOLD = 1.15  # a bold character (headings, row headers) is about this much wider
PADDING = 2.0  # a cell's padding and rule, in characters
WIDE_COLUMNS = 7
LANDSCAPE_COLUMNS = 10
# About how many characters of DejaVu Sans a row of each size of table holds in the PDF (A4, 16 mm
# margins; "widest" on a landscape page): where the columns' widths add up to more, the text columns
# give way first.
CAPACITY = {"": 88.0, "wide": 116.0, "widest": 150.0}


def column_shares(table: DocTable, texts: list[list[str]], capacity: float) -> list[float]:
    """Each column's share of the table's width (they add up to 1): numbers and short text as wide as
    their longest cell (or heading word), longer text as wide as its text up to ``TEXT_CAP``
    characters; when the whole is wider than ``capacity`` characters, the longer text columns narrow
    towards their longest heading word, so that the numbers keep their width. Shared by the HTML page
    (and so the PDF) and the LaTeX's long tables."""
    needs: list[tuple[float, float]] = []
    for index, column in enumerate(table.columns):
        longest = max((len(row[index]) for row in texts if index < len(row)), default=0)
        if index == 0 and column.kind == "label":
            longest = round(longest * BOLD)  # row headers are bold
        heading = BOLD * max((len(word) for word in column.label.split()), default=1)
        natural = max(longest, heading) + PADDING
        if column.kind in NUMERIC_KINDS or longest <= SHORT_CELL:
            needs.append((natural, natural))
        else:
            needs.append((min(natural, TEXT_CAP), min(natural, max(heading, 8) + PADDING)))
    total = sum(width for width, _least in needs)
    room = sum(width - least for width, least in needs)
    if total > capacity and room > 0:
        give = min(1.0, (total - capacity) / room)
        needs = [(width - (width - least) * give, least) for width, least in needs]
        total = sum(width for width, _least in needs)
    return [width / total for width, _least in needs]


def column_widths(table: DocTable, texts: list[list[str]], size: str) -> list[float]:
    """Each column's width in percent of the table's (``column_shares`` for the PDF's page and type size
    ``size``)."""
    return [round(100 * share, 2) for share in column_shares(table, texts, CAPACITY[size])]


@dataclass
class PageSection:
    """A section flattened for the template: its anchor, heading level (2 to 6) and prepared blocks."""

    anchor: str
    title: str
    level: int
    blocks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def opens_landscape(self) -> bool:
        """Whether the section starts with a table set on landscape pages: its heading goes with it."""
        return bool(self.blocks) and bool(self.blocks[0].get("landscape"))


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
    texts = [
        [cell_text(value, kinds[i] if i < len(kinds) else "text") for i, value in enumerate(row)]
        for row in table.rows
    ]
    rows = []
    for row in texts:
        cells = []
        for index, text in enumerate(row):
            kind = kinds[index] if index < len(kinds) else "text"
            cells.append(
                {
                    "text": text,
                    "numeric": kind in NUMERIC_KINDS,
                    # The first column names the row when it is a label: a row header.
                    "header": index == 0 and kind == "label",
                }
            )
        rows.append(cells)
    count = len(table.columns)
    size = "widest" if count > LANDSCAPE_COLUMNS else "wide" if count > WIDE_COLUMNS else ""
    return {
        "type": "table",
        "title": table.title,
        "size": size,
        "landscape": size == "widest" and bool(table.rows),
        "widths": column_widths(table, texts, size),
        "n": cell_text(table.n, "n") if table.n is not None else "",
        "columns": [{"label": c.label, "numeric": c.kind in NUMERIC_KINDS} for c in table.columns],
        "rows": rows,
        "notes": table.notes,
        "method": method_text(table),
        "empty_reason": table.empty_reason if not table.rows else None,
    }


def _figure(figure: DocFigure) -> dict[str, Any]:
    try:
        svg: SafeString | None = mark_safe(svg_checked(figure.svg))  # checked just now
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
