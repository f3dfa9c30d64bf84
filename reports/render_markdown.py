"""The report as GitHub-flavoured Markdown: headings, pipe tables, bullet lists, and figures as SVG files
beside it (``figures/<key>.svg``) linked by relative image links.

Every string of the document is untrusted (prompts, labels, names, reasons): :func:`escape` makes it
inert: backslashes and Markdown's inline specials are backslash-escaped, ``<``, ``>`` and ``&`` become
entities (no raw HTML, no entity tricks), ``|`` is escaped so a cell cannot end early, and line breaks
become spaces (``<br>`` inside table cells), so no text starts a heading, list or quote of its own. A
line that starts with a block marker (``#``, ``-``, ``+``, ``=``, ``>``, ``1.``) is escaped at its start.
"""

from __future__ import annotations

import re

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

INLINE = re.compile(r"([\\`*_\[\]|~$!#])")
BLOCK_START = re.compile(r"^(\s*)([#+=>-]|\d+[.)](?=\s|$))")
ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def escape(text: str, *, cell: bool = False, line_start: bool = False) -> str:
    """``text`` as inert Markdown (see the module docstring); ``cell``: for a table cell; ``line_start``:
    the text starts a line (a paragraph or a list item's text), so a block marker there is escaped too."""
    text = "".join(ENTITIES.get(ch, ch) for ch in str(text))
    text = INLINE.sub(r"\\\1", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if cell:
        return text.replace("\n", "<br>")
    text = " ".join(text.split("\n"))
    return BLOCK_START.sub(_escape_marker, text) if line_start else text


def _escape_marker(match: re.Match[str]) -> str:
    """A block marker made literal: a backslash before its punctuation (``\\#``, ``1\\.``)."""
    marker = match.group(2)
    return match.group(1) + marker[:-1] + "\\" + marker[-1]


def _table(table: DocTable) -> list[str]:
    lines = [f"**{escape(table.title)}**" + ("" if table.n is None else f" (n = {table.n:,})"), ""]
    if not table.rows:
        lines += [f"_No rows: {escape(table.empty_reason or 'nothing to show')}._", ""]
    else:
        lines.append("| " + " | ".join(escape(c.label, cell=True) for c in table.columns) + " |")
        lines.append(
            "| "
            + " | ".join("---:" if c.kind not in ("label", "text") else "---" for c in table.columns)
            + " |"
        )
        for row in table.rows:
            cells = [
                escape(cell_text(value, column.kind), cell=True)
                for value, column in zip(row, table.columns, strict=True)
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if table.method is not None:
        m = table.method
        parts = [f"estimator: {m.estimator}", f"n counts {m.unit}"]
        parts += [
            f"{name}: {value}"
            for name, value in (
                ("interval", m.interval),
                ("test", m.test),
                ("correction", m.correction),
                ("reference", m.reference),
            )
            if value
        ]
        lines += [f"_Method: {escape('; '.join(parts))}._", ""]
    lines += [f"_{escape(note)}_" + "  " for note in table.notes]
    if table.notes:
        lines.append("")
    return lines


def _figure(figure: DocFigure, figures: dict[str, str]) -> list[str]:
    name = f"figures/{figure.key}.svg"
    n = 2
    while name in figures and figures[name] != figure.svg:
        name = f"figures/{figure.key}-{n}.svg"
        n += 1
    figures[name] = figure.svg
    return [f"![{escape(figure.title)}]({name})", ""]


def _section(section: Section, depth: int, figures: dict[str, str]) -> list[str]:
    lines = ["#" * min(depth, 6) + " " + escape(section.title), ""]
    for block in section.blocks:
        if isinstance(block, Paragraph):
            lines += [escape(block.text, line_start=True), ""]
        elif isinstance(block, Facts):
            lines += [f"- **{escape(label)}**: {escape(value)}" for label, value in block.pairs] + [""]
        elif isinstance(block, BulletList):
            # "*", not "-": a list right after a Facts list stays a list of its own
            lines += [f"* {escape(item, line_start=True)}" for item in block.items] + [""]
        elif isinstance(block, DocTable):
            lines += _table(block)
        elif isinstance(block, DocFigure):
            lines += _figure(block, figures)
    for sub in section.subsections:
        lines += _section(sub, depth + 1, figures)
    return lines


def render(document: ReportDocument) -> Rendered:
    """The document as one Markdown file plus its figures (``figures/<key>.svg``)."""
    figures: dict[str, str] = {}
    lines = [
        f"# {escape(document.title)}",
        "",
        f"_Generated {escape(document.generated_at)} (UTC); labels from "
        f"{escape(document.source_label or document.source)}._",
        "",
    ]
    for section in document.sections:
        lines += _section(section, 2, figures)
    stem = "-".join(str(i) for i in document.study_ids)
    return Rendered(
        filename=f"study-{stem}-report.md",
        content_type="text/markdown; charset=utf-8",
        body=("\n".join(lines).rstrip() + "\n").encode(),
        attachments={name: svg.encode() for name, svg in figures.items()},
    )
