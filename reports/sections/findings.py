"""The report's Findings section: every table of the study's findings report as a typed ``DocTable`` and
every findings figure as a vector ``DocFigure``.

The numbers are ``metrics_report_cached``'s (the findings page, ``/api/studies/{id}/metrics/`` and
``manage.py metrics --json``), row for row and column for column, so the consistency test compares each
cell with the API's. A table's column kinds are its declared ``kinds`` (``Table.kinds``); where a table
declares none yet they are inferred from the column's name and values, conservatively
(:func:`column_kind`: anything not clearly a count, interval bound, statistic, p-value or flag is an
estimate when every value is a number, else text). The method record is the table's ``method``.
"""

from __future__ import annotations

import re
from typing import Any

from annotations.models import Study
from annotations.selectors.findings.report import metrics_report_cached
from annotations.selectors.findings.tables import Method
from reports.document import Column, DocFigure, DocTable, Paragraph, Section
from reports.figures import figure_bytes

N_NAMES = re.compile(r"^(n|count|support|correct|k)$|^n_|_n$|^n\d|_count$|^items?$|^images?$|^judgements$")
P_NAMES = re.compile(r"^p$|^p_value$|^pvalue$|_p$|^p_raw$")
P_ADJUSTED_NAMES = re.compile(r"^p_(holm|bh|adj|adjusted|corrected)|_(holm|bh|adjusted)$")
LOW_NAMES = re.compile(r"(^|_)(ci_)?low$|_lo$|^lower$")
HIGH_NAMES = re.compile(r"(^|_)(ci_)?high$|_hi$|^upper$")
STATISTIC_NAMES = re.compile(r"^(t|t_stat|t_statistic|statistic|z|chi2|u)$")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def column_kind(name: str, values: list[Any], position: int) -> str:
    """The kind of one undeclared column, from its name and its values (None values ignored)."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "flag"
    numbers = bool(present) and all(_number(v) for v in present)
    if not numbers:
        return "label" if position == 0 else "text"
    if P_ADJUSTED_NAMES.search(name):
        return "p_adjusted"
    if P_NAMES.search(name):
        return "p"
    if LOW_NAMES.search(name):
        return "low"
    if HIGH_NAMES.search(name):
        return "high"
    if STATISTIC_NAMES.search(name):
        return "statistic"
    if N_NAMES.search(name) and all(float(v).is_integer() for v in present):
        return "n"
    return "estimate"


def column_kinds(table: dict[str, Any]) -> list[str]:
    """The table's declared kinds, or inferred ones (:func:`column_kind`) where it declares none."""
    declared = table.get("kinds") or []
    if len(declared) == len(table["columns"]):
        return list(declared)
    return [
        column_kind(name, [row[i] for row in table["rows"]], i) for i, name in enumerate(table["columns"])
    ]


def method_of(table: dict[str, Any]) -> Method | None:
    """The table's method record (as the JSON report carries it), or None where it declares none."""
    method = table.get("method")
    return Method(**method) if isinstance(method, dict) else None


def doc_table(table: dict[str, Any]) -> DocTable:
    """One findings table (JSON, as the API gives it) as a typed DocTable with the same rows."""
    kinds = column_kinds(table)
    return DocTable(
        key=table["key"],
        title=table["title"],
        columns=[
            Column(name, name.replace("_", " "), kind)
            for name, kind in zip(table["columns"], kinds, strict=True)
        ],
        rows=[list(row) for row in table["rows"]],
        n=table["n_items"],
        # the reliability gate's warning first: the table reads a question people do not agree on
        notes=[*([table["warning"]] if table.get("warning") else []), *(table.get("notes") or [])],
        method=method_of(table),
        source_key=f"metrics:{table['key']}",
        empty_reason=table.get("empty_reason"),
    )


def doc_figures(report: dict[str, Any]) -> list[DocFigure]:
    """Every findings figure drawn in SVG and PDF (a table with no figure gives none)."""
    tables = {t["key"]: t for t in report["tables"]}
    figures = []
    for figure in report["figures"]:
        table = tables.get(figure["table"])
        if table is None:
            continue
        svg, pdf = figure_bytes(table, figure, "svg"), figure_bytes(table, figure, "pdf")
        if svg is None or pdf is None:
            continue
        figures.append(
            DocFigure(
                key=figure["key"], title=figure["title"], table=figure["table"], svg=svg.decode(), pdf=pdf
            )
        )
    return figures


def findings_report(study: Study, source: str | None, correction: str) -> dict[str, Any]:
    """The study's findings report, as the API gives it, its many tests corrected by ``correction``."""
    return metrics_report_cached(study=study, source=source, correction=correction)


def findings_section(report: dict[str, Any]) -> Section:
    """The Findings section: the report's source, then each table followed by its figures."""
    figures = doc_figures(report)
    blocks: list[Any] = [
        Paragraph(f"Source: {report.get('source_label') or report['source']}. {report['source_note']}"),
        *([Paragraph(report["reliability_note"])] if report.get("reliability_note") else []),
    ]
    if report.get("warning"):
        blocks.append(Paragraph(report["warning"]))
    for table in report["tables"]:
        blocks.append(doc_table(table))
        blocks.extend(f for f in figures if f.table == table["key"])
    blocks.extend(Paragraph(note) for note in report["notes"])
    return Section(key="findings", title="Findings", blocks=blocks)
