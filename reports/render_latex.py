"""The report as a standalone LaTeX ``article`` (docs/reports.md, "Formats, downloads and the API").

It compiles with pdflatex from Debian's ``texlive-latex-base`` and ``texlive-latex-recommended``
(``\\usepackage[utf8]{inputenc}``, ``[T1]{fontenc}``, geometry, array, booktabs, longtable,
pdflscape, graphicx).
Tables are booktabs tables (``\\toprule``, ``\\midrule``, ``\\bottomrule``); a table of more than
``LONGTABLE_ROWS`` rows is a ``longtable`` that breaks across pages. A table of more than ``WIDE_COLUMNS``
columns is set smaller, shrunk to the text width (a ``tabular``) or on landscape pages (a ``longtable``);
an identifier may break after its underscores. Figures are the PDF drawings of
the document, attached as ``figures/<key>.pdf`` and included with ``\\includegraphics``.

Every string of the document is untrusted text and goes through :func:`latex_escape`.
"""

from __future__ import annotations

import re
import unicodedata

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
from reports.render_html import NUMERIC_KINDS, method_text

LONGTABLE_ROWS = 30
WRAP_CHARS = 40

# The ASCII characters LaTeX treats specially, and what prints them.
_ASCII = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "^": r"\textasciicircum{}",
    "_": r"\_\allowbreak{}",  # a long identifier may break after its underscores
    "%": r"\%",
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    '"': r"\textquotedbl{}",
    # Ligatures that would change the text: -- and --- print as dashes, `` and '' as curly quotes.
    "-": "-{}",
    "`": r"\textasciigrave{}",
    "'": r"\textquotesingle{}",
}

# The non-ASCII characters that pdflatex's ``inputenc`` (utf8) typesets with the T1 and TS1 font
# encodings (the code points declared in LaTeX's t1enc.dfu and ts1enc.dfu). Any other character (CJK,
# Greek, Cyrillic, emoji...) prints as the visible placeholder ``[U+XXXX]`` instead of stopping the run.
_TYPESET = frozenset(
    int(code, 16)
    for code in (
        "00A0 00A1 00A3 00AB 00AD 00BB 00BF 00C0 00C1 00C2 00C3 00C4 00C5 00C6 00C7 00C8 00C9 00CA 00CB 00CC "
        "00CD 00CE 00CF 00D0 00D1 00D2 00D3 00D4 00D5 00D6 00D8 00D9 00DA 00DB 00DC 00DD 00DE 00DF 00E0 00E1 "
        "00E2 00E3 00E4 00E5 00E6 00E7 00E8 00E9 00EA 00EB 00EC 00ED 00EE 00EF 00F0 00F1 00F2 00F3 00F4 00F5 "
        "00F6 00F8 00F9 00FA 00FB 00FC 00FD 00FE 00FF 0100 0101 0102 0103 0104 0105 0106 0107 0108 0109 010A "
        "010B 010C 010D 010E 010F 0110 0111 0112 0113 0114 0115 0116 0117 0118 0119 011A 011B 011C 011D 011E "
        "011F 0120 0121 0122 0123 0124 0125 0128 0129 012A 012B 012C 012D 012E 012F 0130 0131 0132 0133 0134 "
        "0135 0136 0137 0139 013A 013B 013C 013D 013E 0141 0142 0143 0144 0145 0146 0147 0148 014A 014B 014C "
        "014D 014E 014F 0150 0151 0152 0153 0154 0155 0156 0157 0158 0159 015A 015B 015C 015D 015E 015F 0160 "
        "0161 0162 0163 0164 0165 0168 0169 016A 016B 016C 016D 016E 016F 0170 0171 0172 0173 0174 0175 0176 "
        "0177 0178 0179 017A 017B 017C 017D 017E 0218 0219 021A 021B 0232 0233 "
        "2013 2014 2018 2019 201A 201C 201D 201E 2039 203A "
        "00A2 00A4 00A5 00A6 00A7 00A8 00A9 00AA 00AC 00AE 00AF 00B0 00B1 00B2 00B3 00B4 00B5 00B6 00B7 00B9 "
        "00BA 00BC 00BD 00BE 00D7 00F7 2020 2021 2022 2030 20AC 2122 2190 2191 2192 2193"
    ).split()
)


def latex_escape(text: object) -> str:
    """``text`` as LaTeX that prints it literally, for untrusted strings (names, labels, prompts).

    The characters LaTeX treats specially (``\\ { } $ & # ^ _ % ~``, and ``< > | "`` that T1 prints
    literally only this way) become commands; ``-`` and quotes are kept from forming ligatures; line
    breaks and tabs become spaces and other control characters are dropped; text is put in NFC form
    so "é" written as e and an accent is one character; a character pdflatex cannot typeset (see
    ``_TYPESET``) becomes the visible placeholder ``[U+XXXX]``."""
    out: list[str] = []
    for char in unicodedata.normalize("NFC", str(text)):
        code = ord(char)
        if char in _ASCII:
            out.append(_ASCII[char])
        elif char in "\n\r\t\v\f":
            out.append(" ")
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x20 or 0x7F <= code < 0xA0 or unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            continue
        elif code in _TYPESET:
            out.append(char)
        else:
            out.append(f"[U+{code:04X}]")
    return "".join(out)


_HEADINGS = ("section", "subsection", "subsubsection", "paragraph", "subparagraph")
_FIGURE_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def _figure_name(key: str, taken: set[str]) -> str:
    """A file name for a figure from its key: letters, digits, ``_`` and ``-`` only, unique."""
    base = _FIGURE_NAME.sub("-", key).strip("-")[:60] or "figure"
    name, number = base, 2
    while name in taken:
        name, number = f"{base}-{number}", number + 1
    taken.add(name)
    return name


WIDE_COLUMNS = 7


def _column_spec(table: DocTable, kinds: list[str]) -> str:
    """Numbers right-aligned; text left-aligned, and wrapped in a paragraph column when some cell or
    the heading is longer than ``WRAP_CHARS`` (so a long label or prompt stays on the page)."""
    long_text = []
    for index, (column, kind) in enumerate(zip(table.columns, kinds, strict=True)):
        cells = (cell_text(row[index], kind) for row in table.rows if index < len(row))
        long_text.append(
            kind not in NUMERIC_KINDS
            and (len(column.label) > WRAP_CHARS or any(len(cell) > WRAP_CHARS for cell in cells))
        )
    width = 0.6 / max(1, sum(long_text))
    return "".join(
        rf">{{\raggedright\arraybackslash}}p{{{width:.2f}\linewidth}}"
        if wrap
        else ("r" if kind in NUMERIC_KINDS else "l")
        for kind, wrap in zip(kinds, long_text, strict=True)
    )


def _table(table: DocTable) -> list[str]:
    if not table.rows:
        reason = table.empty_reason or "no rows"
        return [rf"\noindent\textbf{{{latex_escape(table.title)}}}: {latex_escape(reason)}", ""]
    kinds = [column.kind for column in table.columns]
    spec = _column_spec(table, kinds)
    header = " & ".join(rf"\textbf{{{latex_escape(c.label)}}}" for c in table.columns) + r" \\"
    body = []
    for row in table.rows:
        cells = [
            latex_escape(cell_text(v, kinds[i] if i < len(kinds) else "text")) for i, v in enumerate(row)
        ]
        body.append(" & ".join(cells) + r" \\")
    caption = latex_escape(table.title) + (
        f" (n = {latex_escape(cell_text(table.n, 'n'))})" if table.n else ""
    )
    # A wide table (more than WIDE_COLUMNS columns) in a smaller type with tighter columns, so that it
    # stays inside the text block.
    font = r"\small" if len(table.columns) <= WIDE_COLUMNS else r"\scriptsize\setlength{\tabcolsep}{3pt}"
    lines: list[str]
    if len(table.rows) > LONGTABLE_ROWS:
        wide = len(table.columns) > WIDE_COLUMNS
        lines = [
            # a wide table over several pages is set on landscape pages (pdflscape turns them)
            *([r"\begin{landscape}"] if wide else []),
            rf"{{{font}\begin{{longtable}}{{{spec}}}",
            rf"\caption{{{caption}}}\\",
            r"\toprule",
            header,
            r"\midrule",
            r"\endfirsthead",
            r"\toprule",
            header,
            r"\midrule",
            r"\endhead",
            r"\bottomrule",
            r"\endlastfoot",
            *body,
            r"\end{longtable}}",
            *([r"\end{landscape}"] if wide else []),
        ]
    else:
        lines = [
            r"\begin{table}[htbp]",
            rf"\centering{font}",
            rf"\caption{{{caption}}}",
            # shrunk to the text width when wider (never enlarged)
            r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            header,
            r"\midrule",
            *body,
            r"\bottomrule",
            r"\end{tabular}}",
            r"\end{table}",
        ]
    method = method_text(table)
    if method:
        lines.append(rf"\noindent{{\small\emph{{Method.}} {latex_escape(method)}}}\par")
    lines.extend(rf"\noindent{{\small {latex_escape(note)}}}\par" for note in table.notes)
    lines.append("")
    return lines


def _block(block: object, figures: dict[str, bytes], taken: set[str]) -> list[str]:
    if isinstance(block, Paragraph):
        return [latex_escape(block.text), ""]
    if isinstance(block, Facts):
        if not block.pairs:
            return []
        items = [rf"\item[{{{latex_escape(label)}}}] {latex_escape(value)}" for label, value in block.pairs]
        return [r"\begin{description}", *items, r"\end{description}", ""]
    if isinstance(block, BulletList):
        if not block.items:
            return []
        return [
            r"\begin{itemize}",
            *(rf"\item {latex_escape(item)}" for item in block.items),
            r"\end{itemize}",
            "",
        ]
    if isinstance(block, DocTable):
        return _table(block)
    if isinstance(block, DocFigure):
        if not block.pdf:
            return [rf"\noindent\textbf{{{latex_escape(block.title)}}}: no drawing.", ""]
        path = f"figures/{_figure_name(block.key, taken)}.pdf"
        figures[path] = block.pdf
        return [
            r"\begin{figure}[htbp]",
            r"\centering",
            rf"\includegraphics[width=\linewidth,height=0.45\textheight,keepaspectratio]{{{path}}}",
            rf"\caption{{{latex_escape(block.title)}}}",
            r"\end{figure}",
            "",
        ]
    raise TypeError(f"unknown report block {type(block).__name__}")


def render_source(document: ReportDocument) -> tuple[str, dict[str, bytes]]:
    """The LaTeX source and its figures (relative path -> PDF bytes)."""
    figures: dict[str, bytes] = {}
    taken: set[str] = set()
    lines = [
        r"\documentclass[11pt,a4paper]{article}",
        r"\usepackage[utf8]{inputenc}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage{textcomp}",
        r"\usepackage[margin=2.2cm]{geometry}",
        r"\usepackage{array}",
        r"\usepackage{booktabs}",
        r"\usepackage{longtable}",
        r"\usepackage{pdflscape}",
        r"\usepackage{graphicx}",
        r"\setcounter{secnumdepth}{3}",
        rf"\title{{{latex_escape(document.title)}}}",
        r"\author{Stereotype Audit Workbench}",
        rf"\date{{Studies {latex_escape(', '.join(str(pk) for pk in document.study_ids))}; "
        rf"source {latex_escape(document.source)}; generated {latex_escape(document.generated_at)}}}",
        r"\begin{document}",
        r"\maketitle",
        r"\tableofcontents",
        "",
    ]

    def walk(sections: list[Section], depth: int) -> None:
        for section in sections:
            command = _HEADINGS[min(depth, len(_HEADINGS) - 1)]
            lines.append(rf"\{command}{{{latex_escape(section.title)}}}")
            for block in section.blocks:
                lines.extend(_block(block, figures, taken))
            walk(section.subsections, depth + 1)

    walk(document.sections, 0)
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n", figures


def render(document: ReportDocument) -> Rendered:
    source, figures = render_source(document)
    return Rendered(
        filename="report.tex",
        content_type="application/x-tex; charset=utf-8",
        body=source.encode("utf-8"),
        attachments=figures,
    )
