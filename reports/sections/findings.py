"""The report's Findings section: every table of the study's findings report as a typed ``DocTable`` and
every findings figure as a vector ``DocFigure``.

The numbers are ``findings_report_cached``'s (the findings page, ``/api/studies/{id}/metrics/`` and
``manage.py metrics --json``), row for row and column for column, so the consistency test compares each
cell with the API's. Each column keeps the kind its findings table declares (``findings.tables.Column``);
the method record is the table's ``method``.

Every findings table goes whole into the report's supplement (``reports/supplement.py``: one CSV per
table, named by ``DocTable.csv``). The body keeps a table of up to ``BODY_ROWS_MAX`` rows as it is; a
longer one (a listing: SODA's concentrated cases and shifts, ViSAGe's likelihoods) shows its
``BODY_ROWS`` top rows by its effect or estimate (``ranked_rows``) with a sentence saying how many rows
there are and which CSV holds them. The findings' notes are written for the workbench's pages; they are
printed through ``reports.wording.reader_text`` (no query strings, flags or settings names).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from findings.report import FindingsReport
from findings.tables import Method, Table, jsonable
from reports.document import Column, DocFigure, DocTable, Paragraph, Section
from reports.wording import reader_text

# A findings table with more rows than this shows its top BODY_ROWS rows in the body.
BODY_ROWS_MAX = 40
BODY_ROWS = 10

# The effect of a table whose effect is not "the estimate before its test" (see ``effect_column``).
EFFECT_COLUMNS = {
    "visage_tendency": "theta",
    "ppi_differences": "difference",
    "ssi_comparisons": "relative_drop",
}
# How a long table's rows are ranked where its effect alone does not say it (largest first; flags: yes
# first).
RANK_COLUMNS: dict[str, tuple[str, ...]] = {
    "soda_shifts": ("changed", "group_share"),
    "soda_concentrated": ("n",),
    "visage_likelihoods": ("likelihood",),
}
TEST_KINDS = ("p", "p_adjusted")
# A table that reads at most this many questions people do not agree on names them with their alphas;
# more are counted (the Limitations name them).
GATE_NAMED = 3


def effect_column(table: DocTable) -> int | None:
    """The index of ``table``'s effect column: the one ``EFFECT_COLUMNS`` names; else, in a table that
    runs a test, the last estimate before its statistic or p-value; else its first estimate (None: no
    estimate)."""
    keys = [c.key for c in table.columns]
    named = EFFECT_COLUMNS.get(table.key)
    if named in keys:
        return keys.index(named)
    kinds = [c.kind for c in table.columns]
    estimates = [i for i, kind in enumerate(kinds) if kind == "estimate"]
    if not estimates:
        return None
    tested = [i for i, kind in enumerate(kinds) if kind in ("statistic", *TEST_KINDS)]
    if tested:
        before = [i for i in estimates if i < tested[0]]
        if before:
            return before[-1]
    return estimates[0]


def _rank_key(row: list[Any], columns: list[int]) -> tuple[float, ...]:
    key = []
    for index in columns:
        value = row[index]
        if isinstance(value, bool):
            key.append(-1.0 if value else 0.0)
        elif isinstance(value, int | float):
            key.append(-abs(float(value)))
        else:
            key.append(float("inf"))  # undefined last
    return tuple(key)


def rank_columns(table: DocTable) -> list[int]:
    """The columns ``table``'s rows are ranked by, largest first ([]: kept in the table's order)."""
    keys = [c.key for c in table.columns]
    named = RANK_COLUMNS.get(table.key)
    if named and all(name in keys for name in named):
        return [keys.index(name) for name in named]
    effect = effect_column(table)
    return [] if effect is None else [effect]


def ranked_rows(table: DocTable) -> list[list[Any]]:
    """Every row of ``table``, largest effect first (by absolute value; undefined last; ties keep the
    table's order)."""
    columns = rank_columns(table)
    rows = table.every_row
    if not columns:
        return list(rows)
    return sorted(rows, key=lambda row: _rank_key(row, columns))


def gate_warning(table: Table) -> str | None:
    """The reliability gate's warning in one sentence: how many questions the table reads that people do
    not agree on reliably (the Limitations name them), instead of the findings' list of every one."""
    if not table.warning:
        return None
    # the gate keeps the verdicts of the questions the table reads that someone answered; a few are
    # named with their alphas as the findings name them
    weak = [e for e in table.reliability or [] if e.get("verdict") != "reliable"]
    if len(weak) <= GATE_NAMED:
        return reader_text(table.warning)
    verdicts: dict[str, int] = {}
    for entry in weak:
        verdicts[str(entry["verdict"])] = verdicts.get(str(entry["verdict"]), 0) + 1
    counts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(verdicts.items()))
    many = "question" if len(weak) == 1 else "questions"
    return (
        f"It reads {len(weak)} {many} people do not agree on reliably ({counts}; the Limitations name "
        "them), so read it as tentative at best."
    )


def _clause(text: str | None) -> str | None:
    """A method record's field for a reader, without its final stop (renderers join the fields)."""
    return reader_text(text).rstrip(".").rstrip() if text else text


def _method(method: Method | None) -> Method | None:
    if method is None:
        return None
    return dataclasses.replace(
        method,
        estimator=_clause(method.estimator) or "",
        interval=_clause(method.interval),
        test=_clause(method.test),
        correction=_clause(method.correction),
        reference=_clause(method.reference) or "",
        unit=_clause(method.unit) or "",
    )


def doc_table(table: Table, *, csv_prefix: str = "") -> DocTable:
    """One findings table as a DocTable with the same rows (every row: ``excerpt`` cuts a long one);
    each column keeps its declared kind; its notes for a reader of a paper."""
    warning = gate_warning(table)
    return DocTable(
        key=table.key,
        title=table.title,
        columns=[Column(c.name, c.name.replace("_", " "), c.kind) for c in table.columns],
        rows=[list(row) for row in jsonable(table.rows)],
        n=table.n_items,
        # the reliability gate's warning first: the table reads a question people do not agree on
        notes=[*([warning] if warning else []), *(reader_text(note) for note in table.notes)],
        method=_method(table.method),
        source_key=f"metrics:{table.key}",
        empty_reason=reader_text(table.empty_reason) if table.empty_reason else None,
        csv=f"{csv_prefix}{table.key}.csv",
    )


def excerpt(table: DocTable) -> DocTable:
    """``table`` as the body prints it: as it is up to ``BODY_ROWS_MAX`` rows; longer, its ``BODY_ROWS``
    top rows (``ranked_rows``), every row kept in ``full_rows`` and a note saying how many there are and
    which file of the supplement holds them."""
    if len(table.rows) <= BODY_ROWS_MAX:
        return table
    every = table.rows
    columns = rank_columns(table)
    names = [table.columns[i].label for i in columns]
    if not names:
        shown = f"the first {BODY_ROWS} rows"
    elif len(names) == 1:
        shown = f"the {BODY_ROWS} rows with the largest {names[0]}"
    else:
        shown = f"the top {BODY_ROWS} rows by {names[0]}, then by {', then by '.join(names[1:])}"
    note = (
        f"This table has {len(every):,} rows; shown here are {shown}. Every row is in {table.csv} in the "
        "report's supplement."
    )
    return dataclasses.replace(
        table, rows=ranked_rows(table)[:BODY_ROWS], full_rows=every, notes=[note, *table.notes]
    )


def doc_figures(report: FindingsReport) -> list[DocFigure]:
    """Every findings figure drawn in SVG and PDF (a table with no figure gives none), by the same
    matplotlib code as the findings page and its downloads; matplotlib loads only when a report draws."""
    from findings.figures import table_figure

    figures = []
    for figure in report.figures:
        table = report.table(figure.table)
        if table is None:
            continue
        svg, pdf = table_figure(table, figure.params, "svg"), table_figure(table, figure.params, "pdf")
        if svg is None or pdf is None:
            continue
        figures.append(
            DocFigure(key=figure.key, title=figure.title, table=figure.table, svg=svg.decode(), pdf=pdf)
        )
    return figures


def findings_section(report: FindingsReport, *, csv_prefix: str = "") -> Section:
    """The Findings section: the report's source, then each table (long ones cut to their top rows, see
    ``excerpt``) followed by its figures. ``csv_prefix`` starts each table's CSV name in the supplement
    (a compare report's ``study-<id>-``)."""
    figures = doc_figures(report)
    blocks: list[Any] = [
        Paragraph(
            reader_text(f"Source: {report.source_label or report.source}. {report.source_note}")
            + " Every findings table is in the report's supplement as a CSV file, all rows and columns."
        ),
        *([Paragraph(reader_text(report.reliability_note))] if report.reliability_note else []),
    ]
    if report.warning:
        blocks.append(Paragraph(reader_text(report.warning)))
    for table in report.tables:
        blocks.append(excerpt(doc_table(table, csv_prefix=csv_prefix)))
        blocks.extend(f for f in figures if f.table == table.key)
    blocks.extend(Paragraph(reader_text(note)) for note in report.notes)
    return Section(key="findings", title="Findings", blocks=blocks)
