"""The report as a standalone LaTeX ``article`` (docs/reports.md, "Formats, downloads and the API").

It compiles with pdflatex from Debian's ``texlive-latex-base`` and ``texlive-latex-recommended``
(``\\usepackage[utf8]{inputenc}``, ``[T1]{fontenc}``, geometry, array, booktabs, longtable,
pdflscape, graphicx).
Tables are booktabs tables (``\\toprule``, ``\\midrule``, ``\\bottomrule``); a table of more than
``LONGTABLE_ROWS`` rows is a ``longtable`` that breaks across pages. A table of more than ``WIDE_COLUMNS``
columns is set smaller, shrunk to the text width (a ``tabular``) or on landscape pages (a ``longtable``,
whose every column is a ``p{}`` column of a share of the line's width: ``column_shares``, so that nothing
runs off the page); an identifier may break after its underscores, and any long word every few letters.
Figures are the PDF drawings of the document, attached as ``figures/<key>.pdf`` and included with
``\\includegraphics``. Every table and figure has a ``\\label`` (``tab:<key>``, ``fig:<key>``) and a
``\\caption`` that defines its symbols: its title, n, and its method's estimator and unit (a figure,
its table's).

Every string of the document is untrusted text and goes through :func:`latex_escape`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

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
from reports.render_html import NUMERIC_KINDS, column_shares, method_text

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


# A word this long with no space (a hash, an address, a long identifier) gets a break point every
# BREAK_EVERY characters, so that it never runs into the margin.
LONG_WORD = re.compile(r"\S{24,}")
BREAK_EVERY = 12


def latex_text(text: object) -> str:
    """``text`` escaped (``latex_escape``), a long word given break points (``\\allowbreak``) every
    ``BREAK_EVERY`` characters: for running text and table cells."""
    raw = str(text)
    out: list[str] = []
    at = 0
    for match in LONG_WORD.finditer(raw):
        out.append(latex_escape(raw[at : match.start()]))
        word = match.group(0)
        out.append(
            r"\allowbreak{}".join(
                latex_escape(word[i : i + BREAK_EVERY]) for i in range(0, len(word), BREAK_EVERY)
            )
        )
        at = match.end()
    out.append(latex_escape(raw[at:]))
    return "".join(out)


_HEADINGS = ("section", "subsection", "subsubsection", "paragraph", "subparagraph")
_LABEL_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def _label(kind: str, key: str, taken: set[str]) -> str:
    """A ``\\label`` name for a table (``tab``) or figure (``fig``) from its key: ``tab:soda_bds``;
    letters, digits, ``_`` and ``-`` only, unique in the document (a compare report's second study's
    ``tab:soda_bds-2``)."""
    base = f"{kind}:" + (_LABEL_NAME.sub("-", key).strip("-")[:60] or kind)
    name, number = base, 2
    while name in taken:
        name, number = f"{base}-{number}", number + 1
    taken.add(name)
    return name


def definition(table: DocTable | None) -> str:
    """What a table's (or its figure's) symbols mean, for its caption: its method's estimator and what
    one n counts ("" without a method record)."""
    if table is None or table.method is None:
        return ""
    method = table.method
    text = f"{method.estimator.rstrip('. ')}; n counts {method.unit}."
    return text[:1].upper() + text[1:]


@dataclass
class _State:
    """What the walk over the document keeps: the figures' files, their names, the labels used and the
    table each figure draws (the last table of that key before it)."""

    figures: dict[str, bytes] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)
    tables: dict[str, DocTable] = field(default_factory=dict)


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


# About how many characters of Computer Modern a long table's row holds: \\small on the portrait text
# width, \\scriptsize on the landscape one (geometry's 2.2 cm margins), less the columns' padding.
LONG_CAPACITY = {False: (470.0, 12.0, 5.0), True: (720.0, 6.0, 4.0)}  # width pt, padding pt, pt per char


def _long_spec(table: DocTable, kinds: list[str], texts: list[list[str]], wide: bool) -> str:
    """A long table's columns: each a ``p{}`` column of its share of the line (``column_shares``), less
    its padding, so the table is exactly as wide as the line; numbers right-aligned."""
    width, padding, per_char = LONG_CAPACITY[wide]
    capacity = (width - padding * len(kinds)) / per_char
    shares = column_shares(table, texts, capacity)
    return "".join(
        (r">{\raggedleft\arraybackslash}" if kind in NUMERIC_KINDS else r">{\raggedright\arraybackslash}")
        + rf"p{{\dimexpr {share:.4f}\linewidth-2\tabcolsep\relax}}"
        for kind, share in zip(kinds, shares, strict=True)
    )


def _table(table: DocTable, state: _State) -> list[str]:
    if not table.rows:
        reason = table.empty_reason or "no rows"
        return [rf"\noindent\textbf{{{latex_escape(table.title)}}}: {latex_text(reason)}", ""]
    state.tables[table.key] = table
    label = _label("tab", table.key, state.labels)
    kinds = [column.kind for column in table.columns]
    texts = [
        [cell_text(v, kinds[i] if i < len(kinds) else "text") for i, v in enumerate(row)]
        for row in table.rows
    ]
    header = " & ".join(rf"\textbf{{{latex_escape(c.label)}}}" for c in table.columns) + r" \\"
    body = [" & ".join(latex_text(cell) for cell in row) + r" \\" for row in texts]
    short = latex_escape(table.title) + (f" (n = {latex_escape(cell_text(table.n, 'n'))})" if table.n else "")
    symbols = definition(table)
    caption = rf"[{short}]{{{short}" + (f". {latex_text(symbols)}" if symbols else "") + "}"
    wide = len(table.columns) > WIDE_COLUMNS
    # A wide table (more than WIDE_COLUMNS columns) in a smaller type with tighter columns, so that it
    # stays inside the text block.
    font = r"\small" if not wide else r"\scriptsize\setlength{\tabcolsep}{3pt}"
    lines: list[str]
    if len(table.rows) > LONGTABLE_ROWS:
        spec = _long_spec(table, kinds, texts, wide)
        lines = [
            # a wide table over several pages is set on landscape pages (pdflscape turns them)
            *([r"\begin{landscape}"] if wide else []),
            rf"{{{font}\begin{{longtable}}{{{spec}}}",
            rf"\caption{caption}\label{{{label}}}\\",
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
        spec = _column_spec(table, kinds)
        lines = [
            r"\begin{table}[htbp]",
            rf"\centering{font}",
            rf"\caption{caption}\label{{{label}}}",
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
        lines.append(rf"\noindent{{\small\emph{{Method.}} {latex_text(method)}}}\par")
    lines.extend(rf"\noindent{{\small {latex_text(note)}}}\par" for note in table.notes)
    lines.append("")
    return lines


# Label: value pairs as a list with a hanging indent (a description's label would not wrap).
FACTS_BEGIN = r"\begin{list}{}{\setlength{\leftmargin}{1.5em}\setlength{\itemindent}{-1.5em}}"


def _block(block: object, state: _State) -> list[str]:
    if isinstance(block, Paragraph):
        return [latex_text(block.text), ""]
    if isinstance(block, Facts):
        if not block.pairs:
            return []
        items = [
            rf"\item \textbf{{{latex_text(label)}}}: {latex_text(value)}" for label, value in block.pairs
        ]
        return [FACTS_BEGIN, *items, r"\end{list}", ""]
    if isinstance(block, BulletList):
        if not block.items:
            return []
        return [
            r"\begin{itemize}",
            *(rf"\item {latex_text(item)}" for item in block.items),
            r"\end{itemize}",
            "",
        ]
    if isinstance(block, DocTable):
        return _table(block, state)
    if isinstance(block, DocFigure):
        if not block.pdf:
            return [rf"\noindent\textbf{{{latex_escape(block.title)}}}: no drawing.", ""]
        path = f"figures/{_figure_name(block.key, state.names)}.pdf"
        state.figures[path] = block.pdf
        title = latex_escape(block.title)
        symbols = definition(state.tables.get(block.table))
        caption = rf"[{title}]{{{title}" + (f". {latex_text(symbols)}" if symbols else "") + "}"
        return [
            r"\begin{figure}[htbp]",
            r"\centering",
            rf"\includegraphics[width=\linewidth,height=0.45\textheight,keepaspectratio]{{{path}}}",
            rf"\caption{caption}\label{{{_label('fig', block.key, state.labels)}}}",
            r"\end{figure}",
            "",
        ]
    raise TypeError(f"unknown report block {type(block).__name__}")


def render_source(document: ReportDocument) -> tuple[str, dict[str, bytes]]:
    """The LaTeX source and its figures (relative path -> PDF bytes)."""
    state = _State()
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
        # lines of identifiers and numbers break where they may rather than run into the margin
        r"\tolerance=2000",
        r"\setlength{\emergencystretch}{3em}",
        rf"\title{{{latex_escape(document.title)}}}",
        r"\author{Stereotype Audit Workbench}",
        rf"\date{{Studies {latex_escape(', '.join(str(pk) for pk in document.study_ids))}; "
        rf"source {latex_escape(document.source_label or document.source)}; "
        rf"generated {latex_escape(document.generated_at)}}}",
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
                lines.extend(_block(block, state))
            walk(section.subsections, depth + 1)

    walk(document.sections, 0)
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n", state.figures


def render(document: ReportDocument) -> Rendered:
    source, figures = render_source(document)
    return Rendered(
        filename="report.tex",
        content_type="application/x-tex; charset=utf-8",
        body=source.encode("utf-8"),
        attachments=figures,
    )
