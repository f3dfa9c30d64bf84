"""Findings pages: each paper's tables and figures for one study, with CSV, PNG and SVG downloads.

Thin views: ``access`` decides who may look (the study's researchers), ``metrics_report_cached`` computes,
``annotations.views.figures`` draws. A bad ``source`` shows the page with the error, never a 500. Without
``?source=`` the report reads the protocol's default source (``findings.report.DEFAULT_SOURCES``); the page
says which source it shows and links to every source that holds labels, and an empty table says why it is
empty (its figure is then not drawn; asked for directly, it is an "empty" picture, never an error).
"""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from annotations.selectors.findings.report import metrics_report_cached
from annotations.views.figures import DRAW, FORMATS, figure_render
from annotations.views.pages import IMAGE_CSP, MAX_ROWS_SHOWN, study_for_page
from common.display import cell_display, summary_tables
from common.errors import ValidationFailed
from common.spreadsheet import csv_cell


def _source(request: HttpRequest) -> str | None:
    """The asked-for source, or None for the protocol's default."""
    return (request.GET.get("source") or "").strip()[:200] or None


def _report(request: HttpRequest, pk: int) -> tuple[Any, dict[str, Any]]:
    study = study_for_page(request, pk, researcher=True)
    try:
        return study, metrics_report_cached(study=study, source=_source(request))
    except ValidationFailed as exc:
        raise Http404(exc.message) from exc


@login_required
def study_findings(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    source = _source(request)
    try:
        report = metrics_report_cached(study=study, source=source)
    except ValidationFailed as exc:
        return render(
            request,
            "findings/study.html",
            {"study": study, "error": exc.message, "report": None, "source": source or ""},
            status=400,
        )
    query = {"source": report["source"]}
    base_url = reverse("study-findings", args=[study.pk])
    switch = [
        {"name": name, "url": f"{base_url}?{urlencode({'source': name})}"}
        for name in report["sources_available"]
        if name != report["source"]
    ]
    tables = []
    for table in report["tables"]:
        figures = []
        for figure in report["figures"]:
            if figure["table"] != table["key"] or table["key"] not in DRAW or not table["rows"]:
                continue
            params = urlencode({**query, **figure["params"]})
            base = reverse("study-findings-figure", args=[study.pk, table["key"], "png"])
            figures.append(
                {
                    "title": figure["title"],
                    "png": f"{base}?{params}",
                    "svg": reverse("study-findings-figure", args=[study.pk, table["key"], "svg"])
                    + f"?{params}",
                }
            )
        tables.append(
            {
                **table,
                "figures": figures,
                "shown_rows": [[cell_display(v) for v in row] for row in table["rows"][:MAX_ROWS_SHOWN]],
                "csv": reverse("study-findings-csv", args=[study.pk, table["key"]]) + "?" + urlencode(query),
            }
        )
    return render(
        request,
        "findings/study.html",
        {
            "study": study,
            "report": report,
            "tables": tables,
            "summary_tables": summary_tables(report["summary"]),
            "source": report["source"],
            "switch": switch,
            "max_rows": MAX_ROWS_SHOWN,
        },
    )


@login_required
def study_findings_csv(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    study, report = _report(request, pk)
    table = next((t for t in report["tables"] if t["key"] == key), None)
    if table is None:
        raise Http404("no such table for this study")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(table["columns"])
    writer.writerows([csv_cell(v) for v in row] for row in table["rows"])
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="study-{study.pk}-{key}-{report["source"][:40]}.csv"'
    )
    return response


@login_required
def study_findings_figure(request: HttpRequest, pk: int, key: str, fmt: str) -> HttpResponse:
    study, report = _report(request, pk)
    params = {k: v for k, v in request.GET.dict().items() if k != "source"}
    data = figure_render(report, key, params, fmt)
    if data is None:
        raise Http404("no such figure for this study")
    response = HttpResponse(data, content_type=FORMATS[fmt])
    disposition = "attachment" if fmt == "svg" else "inline"
    response["Content-Disposition"] = f'{disposition}; filename="study-{study.pk}-{key}.{fmt}"'
    response["Content-Security-Policy"] = IMAGE_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response
