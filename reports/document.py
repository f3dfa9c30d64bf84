"""The audit report as a typed document: what ``gather`` builds and every renderer reads (docs/reports.md).

A :class:`ReportDocument` is a list of :class:`Section` s, each a list of blocks: :class:`Paragraph`,
:class:`Facts` (label: value pairs), :class:`DocTable` (declared columns, raw values) and
:class:`DocFigure` (a vector figure drawn once, in SVG and PDF). Values stay raw numbers (floats, ints,
``(low, high)`` intervals, None for undefined) until a renderer formats them with :func:`cell_text`, so
every format prints the same digits and a test compares a report's numbers with the page's and the API's
values, not with their text. Every string in a document is untrusted text (prompts, labels, names):
renderers escape it for their format; nothing here does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from findings.tables import COLUMN_KINDS, Method

# How many decimals a renderer prints for an estimate, interval bound or statistic; p-values print with
# 3 significant digits and "< 0.001" below that.
DECIMALS = 3


@dataclass(frozen=True)
class Column:
    """One declared column: its key, its heading and one of ``COLUMN_KINDS`` (plus "interval": a
    ``(low, high)`` pair printed as ``[low, high]``)."""

    key: str
    label: str
    kind: str = "text"

    def __post_init__(self) -> None:
        if self.kind not in (*COLUMN_KINDS, "interval"):
            raise ValueError(f"unknown column kind {self.kind!r}")


@dataclass
class Paragraph:
    """Running text with every number already filled in (generated from the data)."""

    text: str


@dataclass
class Facts:
    """Label: value pairs (a design summary, the reproducibility appendix)."""

    pairs: list[tuple[str, str]]


@dataclass
class BulletList:
    items: list[str]


@dataclass
class DocTable:
    """A table with declared columns. ``source_key`` names the findings table (or page/API value) its
    numbers come from, so the consistency test knows where to compare them; ``method`` says how they
    were computed; ``n`` is the number of units behind it (None where it varies by row: an ``n`` column).

    A findings table names ``csv``, the file of the report's supplement that holds every row and column
    (``reports.supplement``); a long one shows only its top rows in the body (``rows``) and keeps
    every row in ``full_rows`` (None: ``rows`` are all of them), its notes saying so."""

    key: str
    title: str
    columns: list[Column]
    rows: list[list[Any]]
    n: int | None = None
    notes: list[str] = field(default_factory=list)
    method: Method | None = None
    source_key: str = ""
    empty_reason: str | None = None
    csv: str = ""
    full_rows: list[list[Any]] | None = None

    @property
    def every_row(self) -> list[list[Any]]:
        """Every row of the table: the body's, or all of them where the body shows its top rows."""
        return self.rows if self.full_rows is None else self.full_rows


@dataclass
class DocFigure:
    """A vector figure: ``svg`` (text, for HTML and Markdown) and ``pdf`` (bytes, for LaTeX), drawn once
    by the shared figure code from the table keyed ``table``."""

    key: str
    title: str
    table: str
    svg: str
    pdf: bytes


Block = Paragraph | Facts | BulletList | DocTable | DocFigure


@dataclass
class Section:
    key: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    subsections: list[Section] = field(default_factory=list)


@dataclass
class ReportDocument:
    """One study's report (or a compare report of several: ``study_ids`` in order)."""

    title: str
    study_ids: list[int]
    source: str
    generated_at: str  # ISO 8601, UTC
    sections: list[Section] = field(default_factory=list)
    # The HEDS 3.0 datasheet (reports.heds): question number -> answer record.
    heds: dict[str, Any] = field(default_factory=dict)
    # The source in words ("human consensus", "colour-rule c8b2d0e (machine labeller)").
    source_label: str = ""
    # The manage.py commands that recompute each number: the supplement's README lists them.
    commands: list[str] = field(default_factory=list)

    def tables(self) -> list[DocTable]:
        """Every table of the document, depth first (what the consistency test walks)."""
        found: list[DocTable] = []

        def walk(sections: list[Section]) -> None:
            for section in sections:
                found.extend(b for b in section.blocks if isinstance(b, DocTable))
                walk(section.subsections)

        walk(self.sections)
        return found


def cell_text(value: Any, kind: str) -> str:
    """The one way every renderer prints a value: "-" for undefined, ``DECIMALS`` decimals for estimates,
    intervals and statistics, p-values to 3 significant digits ("< 0.001" below), counts as integers
    with thousands separators, flags as yes/no; text as is (the renderer escapes it)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind == "interval":
        low, high = value
        return f"[{cell_text(low, 'estimate')}, {cell_text(high, 'estimate')}]"
    if isinstance(value, bool) or kind == "flag":
        return "yes" if value else "no"
    if kind in ("p", "p_adjusted") and isinstance(value, int | float):
        return "< 0.001" if value < 0.001 else f"{value:.3g}"
    if kind == "n" and isinstance(value, int | float) and float(value).is_integer():
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.{DECIMALS}f}"
    if isinstance(value, list | tuple):
        return ", ".join(cell_text(v, "text") for v in value)
    return str(value)
