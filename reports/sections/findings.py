"""The report's Findings section: every table of the study's findings report as a typed ``DocTable`` and
every findings figure as a vector ``DocFigure``.

The numbers are ``findings_report_cached``'s (the findings page, ``/api/studies/{id}/metrics/`` and
``manage.py metrics --json``), row for row and column for column, so the consistency test compares each
cell with the API's. Each column keeps the kind its findings table declares (``findings.tables.Column``);
the method record is the table's ``method``.
"""

from __future__ import annotations

from typing import Any

from findings.report import FindingsReport
from findings.tables import Table, jsonable
from reports.document import Column, DocFigure, DocTable, Paragraph, Section


def doc_table(table: Table) -> DocTable:
    """One findings table as a DocTable with the same rows; each column keeps its declared kind."""
    return DocTable(
        key=table.key,
        title=table.title,
        columns=[Column(c.name, c.name.replace("_", " "), c.kind) for c in table.columns],
        rows=[list(row) for row in jsonable(table.rows)],
        n=table.n_items,
        # the reliability gate's warning first: the table reads a question people do not agree on
        notes=[*([table.warning] if table.warning else []), *table.notes],
        method=table.method,
        source_key=f"metrics:{table.key}",
        empty_reason=table.empty_reason,
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


def findings_section(report: FindingsReport) -> Section:
    """The Findings section: the report's source, then each table followed by its figures."""
    figures = doc_figures(report)
    blocks: list[Any] = [
        Paragraph(f"Source: {report.source_label or report.source}. {report.source_note}"),
        *([Paragraph(report.reliability_note)] if report.reliability_note else []),
    ]
    if report.warning:
        blocks.append(Paragraph(report.warning))
    for table in report.tables:
        blocks.append(doc_table(table))
        blocks.extend(f for f in figures if f.table == table.key)
    blocks.extend(Paragraph(note) for note in report.notes)
    return Section(key="findings", title="Findings", blocks=blocks)
