"""The comparison page: several studies' metrics side by side, with CSV and figure downloads.

``GET /compare/?study=1&study=2[&source=..][&condition=..][&model=..][&where=column=value]``: repeated
parameters pair by position (one value applies to every study). Thin views: ``comparison_query_parse``
reads the query, ``access.studies_get_for_user`` decides who may look (the studies' researchers: another
researcher's study is 404, an annotator 403), ``comparison_report`` aligns the cached metrics reports,
templates and ``findings.figures`` show them. Bad input shows the page with the message, never
a 500.
"""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from annotations import access
from annotations.access import request_user
from annotations.models import Study
from annotations.selectors import studies as selectors
from annotations.selectors.labels import CONSENSUS, JUDGEMENTS, machine_labellers_of, pool_source_split
from annotations.views.pages import IMAGE_CSP, MAX_ROWS_SHOWN
from common.display import cell_display
from common.errors import NotAllowed, NotFoundError, ValidationFailed
from common.query_params import query_flag
from common.spreadsheet import csv_cell
from findings.comparison import (
    MAX_SIDES,
    ComparisonSide,
    SideQuery,
    comparison_long_rows,
    comparison_query_parse,
    comparison_report,
    comparison_sides,
    side_label,
)
from findings.figures import FORMATS, comparison_figure_render, comparison_numeric_values
from findings.papers.ppi import PREFIX as PPI_PREFIX
from findings.papers.ppi import ppi_sources_of
from findings.report import JUDGEMENT_PROTOCOLS, correction_param, study_metric_kind
from metrics.multiple_testing import CORRECTION_NAMES, DEFAULT_CORRECTION

FORM_ROWS = 3


def _queries(request: HttpRequest) -> list[SideQuery]:
    get = request.GET.getlist
    return comparison_query_parse(
        studies=get("study"),
        sources=get("source"),
        conditions=get("condition"),
        models=get("model"),
        wheres=get("where"),
    )


def _sides(request: HttpRequest, queries: list[SideQuery]) -> list[ComparisonSide]:
    """The asked-for sides; raises NotFoundError / NotAllowed from ``access``."""
    studies = access.studies_get_for_user(
        user=request_user(request), ids=[q.study_id for q in queries], researcher=True
    )
    return comparison_sides(studies=studies, queries=queries)


def query_string(queries: list[SideQuery]) -> str:
    """The canonical query of some sides (every parameter once per side, so they pair by position)."""
    return urlencode(
        [
            pair
            for q in queries
            for pair in (
                ("study", q.study_id),
                ("source", q.source),
                ("condition", q.condition or ""),
                ("model", q.model or ""),
                ("where", _where_text(q.where)),
            )
        ]
    )


def _where_text(where: tuple[tuple[str, str], ...]) -> str:
    return "; ".join(f"{column}={value}" for column, value in where)


def _comparison(request: HttpRequest) -> tuple[list[SideQuery], dict[str, Any]]:
    """Parse, check access and compare; 404/403 as ``access`` says, ValidationFailed for bad input."""
    queries = _queries(request)
    sides = _sides(request, queries)
    include_partial = query_flag(request.GET.get("partial"), "partial")
    correction = correction_param(request.GET.get("correction"))
    return queries, comparison_report(sides=sides, include_partial=include_partial, correction=correction)


def _table_context(table: dict[str, Any], sides: dict[str, dict[str, Any]], query: str) -> dict[str, Any]:
    groups = [
        {"label": label, "title": sides[label]["description"], "columns": [*table["value_columns"], "n"]}
        for label in table["sides"]
    ]
    groups += [
        {
            "label": f"{label} − {table['reference']}",
            "title": "difference",
            "columns": [*table["difference_columns"], *table.get("interval_columns", [])],
            "difference": True,
        }
        for label in table["sides"][1:]
        if table["difference_columns"]
    ]
    figures = []
    for value in comparison_numeric_values(table):
        params = f"{query}&{urlencode({'value': value})}"
        figures.append(
            {
                "value": value,
                "png": reverse("compare-figure", args=[table["key"], "png"]) + f"?{params}",
                "svg": reverse("compare-figure", args=[table["key"], "svg"]) + f"?{params}",
            }
        )
    return {
        **table,
        "groups": groups,
        "figures": figures,
        "n_items_list": [(label, table["n_items"][label]) for label in table["sides"]],
        "shown_rows": [[cell_display(v) for v in row] for row in table["rows"][:MAX_ROWS_SHOWN]],
        "csv": reverse("compare-csv") + f"?{query}&{urlencode({'table': table['key']})}",
    }


def _form_rows(queries: list[SideQuery]) -> list[dict[str, Any]]:
    rows = [
        {
            "study": q.study_id,
            "source": q.source,
            "condition": q.condition or "",
            "model": q.model or "",
            "where": _where_text(q.where),
        }
        for q in queries[:MAX_SIDES]
    ]
    while len(rows) < min(MAX_SIDES, max(FORM_ROWS, len(queries) + 1)):
        rows.append({"study": None, "source": CONSENSUS, "condition": "", "model": "", "where": ""})
    return [{**row, "label": side_label(i)} for i, row in enumerate(rows)]


def _source_choices(studies: list[Study]) -> list[tuple[str, str]]:
    """The label sources of the studies a researcher may see, as (value, label) for the select: the
    people's consensus, every judgement where a study's protocol reads them, each machine labeller, and
    each labeller with a validation sample of known probabilities (``ppi:``)."""
    judgements = any(study_metric_kind(s) in JUDGEMENT_PROTOCOLS for s in studies)
    return [
        (CONSENSUS, "People: consensus"),
        *([(JUDGEMENTS, "People: every judgement")] if judgements else []),
        *((name, f"Machine labeller: {name}") for name in machine_labellers_of(studies)),
        *(
            (name, f"Machine + human sample: {name.removeprefix(PPI_PREFIX)}")
            for name in ppi_sources_of(studies)
        ),
    ]


def _check_sources(queries: list[SideQuery], sources: list[tuple[str, str]]) -> None:
    """Refuse a source that is none of the select's (a typed URL): a form error naming the side. A rater
    pool's source (``consensus@KEY=VALUE``) passes here: its side's study checks the pool exists."""
    known = [name for name, _label in sources]
    for index, query in enumerate(queries):
        if query.source not in known and pool_source_split(query.source) is None:
            raise ValidationFailed(
                f"Labels from, side {side_label(index)}: {query.source!r} is not a label source of your "
                f"studies; choose one of {', '.join(known)}.",
                {"source": "unknown"},
            )


@login_required
def compare(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    if not user.is_researcher:
        return render(
            request, "errors/forbidden.html", {"message": "Only researchers compare studies."}, status=403
        )
    choices = list(access.studies_for_user(user).order_by("name", "pk"))
    sources = _source_choices(choices)
    status, error, message, comparison, queries = 200, None, None, None, []
    try:
        queries = _queries(request)
        _check_sources(queries, sources)
        if len(queries) >= 2:
            queries, comparison = _comparison(request)
        elif queries:
            _sides(request, queries)  # a single study: still refuse one the user may not see
            message = (
                "Pick at least one more study to compare with (or the same study again with another "
                "source, condition or model)."
            )
    except ValidationFailed as exc:
        status, error = 400, exc.message
    except (Http404, NotFoundError) as exc:
        status, error = 404, str(getattr(exc, "message", exc))
    except (PermissionDenied, NotAllowed) as exc:
        status, error = 403, str(getattr(exc, "message", exc))
    chosen = {c.pk: c for c in choices if c.pk in {q.study_id for q in queries}}
    conditions, models = selectors.studies_conditions_and_models(chosen) if chosen else ([], [])
    context: dict[str, Any] = {
        "choices": choices,
        "rows": _form_rows(queries),
        "error": error,
        "message": message,
        "sources": sources,
        "conditions": conditions,
        "models": models,
        "max_sides": MAX_SIDES,
        "comparison": comparison,
        "max_rows": MAX_ROWS_SHOWN,
    }
    if comparison is not None:
        base = query_string(queries)
        correction = comparison["correction"]
        query = (
            base
            + ("&partial=1" if comparison["include_partial"] else "")
            + (f"&correction={correction}" if correction != DEFAULT_CORRECTION else "")
        )
        sides = {d["label"]: d for d in comparison["sides"]}
        context |= {
            "has_tests": any("p_adjusted [" in " ".join(t["columns"]) for t in comparison["tables"]),
            "correction_name": CORRECTION_NAMES[correction],
            "correction_switch": [
                (
                    name,
                    reverse("compare")
                    + "?"
                    + base
                    + ("&partial=1" if comparison["include_partial"] else "")
                    + ("" if value == DEFAULT_CORRECTION else f"&correction={value}"),
                )
                for value, name in CORRECTION_NAMES.items()
                if value != correction
            ],
            "include_partial": comparison["include_partial"],
            "partial_toggle": reverse("compare")
            + "?"
            + base
            + ("" if comparison["include_partial"] else "&partial=1")
            + (f"&correction={correction}" if correction != DEFAULT_CORRECTION else ""),
            "tables": [_table_context(t, sides, query) for t in comparison["tables"]],
            "only_in": [(sides[label], tables) for label, tables in comparison["only_in"].items()],
            "csv": reverse("compare-csv") + f"?{query}",
            "api": reverse("api-compare") + f"?{query}",
        }
    return render(request, "compare/compare.html", context, status=status)


def _bad_request(exc: ValidationFailed) -> HttpResponse:
    return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")


@login_required
def compare_csv(request: HttpRequest) -> HttpResponse:
    """The whole comparison as one long CSV, or with ``table=KEY`` that table as the page shows it (wide)."""
    try:
        queries, comparison = _comparison(request)
    except ValidationFailed as exc:
        return _bad_request(exc)
    key = request.GET.get("table")
    if key:
        table = next((t for t in comparison["tables"] if t["key"] == key), None)
        if table is None:
            raise Http404("no such aligned table in this comparison")
        columns, rows = table["columns"], table["rows"]
    else:
        columns, rows = comparison_long_rows(comparison)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    ids = "-".join(str(q.study_id) for q in queries)
    response["Content-Disposition"] = f'attachment; filename="compare-{ids}{"-" + key if key else ""}.csv"'
    return response


@login_required
def compare_figure(request: HttpRequest, key: str, fmt: str) -> HttpResponse:
    try:
        queries, comparison = _comparison(request)
    except ValidationFailed as exc:
        return _bad_request(exc)
    data = comparison_figure_render(comparison, key, request.GET.get("value"), fmt)
    if data is None:
        raise Http404("no such figure in this comparison")
    response = HttpResponse(data, content_type=FORMATS[fmt])
    disposition = "inline" if fmt == "png" else "attachment"
    ids = "-".join(str(q.study_id) for q in queries)
    response["Content-Disposition"] = f'{disposition}; filename="compare-{ids}-{key}.{fmt}"'
    response["Content-Security-Policy"] = IMAGE_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response
