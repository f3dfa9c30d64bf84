"""Findings pages: each paper's tables and figures for one study, with CSV, PNG, SVG and PDF downloads, and
the upload and download of the embeddings and captions the visage pull and salience read.

Thin views: ``access`` decides who may look (the study's researchers), ``findings_report_cached`` computes,
``findings.figures`` draws. A bad ``source`` shows the page with the error, never a 500. Without
``?source=`` the report reads the protocol's default source (``findings.report.DEFAULT_SOURCES``); the page
says which source it shows and links to every source that holds labels, and an empty table says why it is
empty (its figure is then not drawn; asked for directly, it is an "empty" picture, never an error).
Findings count settled items; ``?partial=1`` (a link at the top) counts partial ones too, marked so.
Where the study's people gave an attribute with 2 to 8 values (their rater pools: region, rater pool), the
page offers the findings of each pool (``?source=consensus@KEY=VALUE``) and a link comparing the pools.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.interchange.import_jobs import import_upload
from annotations.models import ImportJob
from annotations.selectors.features import features_export_lines
from annotations.selectors.labels import (
    CONSENSUS,
    JUDGEMENTS,
    labeller_named,
    machine_labellers,
    pool_source_split,
)
from annotations.selectors.pools import pool_keys
from annotations.selectors.stereotypes import stereotype_table_size
from annotations.services.findings_reliability import (
    findings_question_exclude,
    findings_question_include,
    findings_thresholds_set,
)
from annotations.services.validation_sample import validation_sample_create
from annotations.views.forms import StereotypeTableForm, UploadForm
from annotations.views.pages import (
    IMAGE_CSP,
    MAX_ROWS_SHOWN,
    form_problems,
    import_outcome_message,
    study_for_page,
)
from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT, whole_number_from_text
from common.display import cell_display, summary_tables
from common.errors import ValidationFailed, WorkbenchError
from common.query_params import query_flag
from common.reader_words import without_tooling
from common.spreadsheet import csv_cell
from findings.comparison import MAX_SIDES
from findings.figures import DRAW, FORMATS, figure_render
from findings.papers.ppi import PREFIX, ppi_min_people, width_parse
from findings.report import (
    JUDGEMENT_PROTOCOLS,
    FindingsReport,
    correction_param,
    findings_report_cached,
    labeller_words,
    source_words,
)
from findings.tables import Figure, Table
from metrics.multiple_testing import CORRECTION_NAMES, DEFAULT_CORRECTION


def _source(request: HttpRequest) -> str | None:
    """The asked-for source, or None for the protocol's default."""
    return (request.GET.get("source") or "").strip()[:200] or None


def _features(request: HttpRequest) -> dict[str, str | None]:
    """The embedding and caption sources asked for (None: the report's default)."""
    return {key: (request.GET.get(key) or "").strip()[:200] or None for key in ("embeddings", "captions")}


def _partial(request: HttpRequest) -> bool:
    """Whether the reader asked to count partial items too (``?partial=1``; ValidationFailed otherwise)."""
    return query_flag(request.GET.get("partial"), "partial")


def _report(request: HttpRequest, pk: int) -> tuple[Any, FindingsReport]:
    """The study and its findings for a download; a query the findings refuse raises ValidationFailed."""
    study = study_for_page(request, pk, researcher=True)
    features = _features(request)
    return study, findings_report_cached(
        study=study,
        source=_source(request),
        embeddings=features["embeddings"],
        captions=features["captions"],
        include_partial=_partial(request),
        width=width_parse(request.GET.get("width")),
        correction=correction_param(request.GET.get("correction")),
        min_people=_min_people(request),
    )


_SENTENCE_START = re.compile(r"(^|[.!?]\s+)([a-z])")


def page_note(text: str) -> str:
    """``text`` without what tells an API or command user how to switch (``common.reader_words``: the
    page has a control for it beside the note); a sentence that now starts with a small letter is
    capitalised, and the note ends with a full stop."""
    note = _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), without_tooling(text or "").strip())
    return note[:-1] + "." if note.endswith(";") else note


def _min_people(request: HttpRequest) -> int | None:
    """``?min_people=`` (ppi rows): None for the default; a bad value is refused (ValidationFailed)."""
    raw = request.GET.get("min_people")
    return ppi_min_people(raw) if raw else None


def _refused(exc: ValidationFailed) -> HttpResponse:
    """A download's query refused (a bad source, width, correction...): 400 and why, as the API."""
    return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")


@login_required
def study_findings(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    source = _source(request)
    try:
        features = _features(request)
        include_partial = _partial(request)
        report = findings_report_cached(
            study=study,
            source=source,
            embeddings=features["embeddings"],
            captions=features["captions"],
            include_partial=include_partial,
            width=width_parse(request.GET.get("width")),
            correction=correction_param(request.GET.get("correction")),
            min_people=_min_people(request),
        )
    except ValidationFailed as exc:
        return render(
            request,
            "findings/study.html",
            {"study": study, "error": exc.message, "report": None, "source": source or ""},
            status=400,
        )
    correction = report.correction
    query = (
        {"source": report.source}
        | {
            key: value
            for key, value in (("embeddings", report.embeddings), ("captions", report.captions))
            if value
        }
        | ({"partial": "1"} if include_partial else {})
        | ({"width": str(report.width)} if report.width else {})
        | ({"correction": correction} if correction != DEFAULT_CORRECTION else {})
        | ({"min_people": str(report.min_people)} if request.GET.get("min_people") else {})
    )
    base_url = reverse("study-findings", args=[study.pk])
    words = report.source_labels
    switch = [
        {"name": words.get(name, name), "url": f"{base_url}?{urlencode({'source': name})}"}
        for name in report.sources_available
        if name != report.source
    ]
    # The settled / settled-and-partial switch keeps every other choice of the page.
    partial_toggle = f"{base_url}?" + urlencode(
        {k: v for k, v in query.items() if k != "partial"} | ({} if include_partial else {"partial": "1"})
    )
    feature_tables = any(t.key in ("visage_pull", "visage_salience") for t in report.tables)
    pool_switch = _pool_switch(study, report, query)
    pool_sources = [p["source"] for group in pool_switch for p in group["pools"]]
    return render(
        request,
        "findings/study.html",
        {
            "study": study,
            "report": report,
            # The notes as the page says them: its own controls switch the source and the correction.
            "source_note": page_note(report.source_note),
            "correction_note": page_note(report.correction_note),
            "tables": [_shown(study.pk, table, report.figures, query) for table in report.tables],
            "summary_tables": summary_tables(report.summary),
            "source": report.source,
            "switch": switch,
            "include_partial": include_partial,
            "partial_toggle": partial_toggle,
            "has_tests": any("p_adjusted" in t.names for t in report.tables),
            "correction": correction,
            "correction_name": CORRECTION_NAMES[correction],
            "corrections": list(CORRECTION_NAMES.items()),
            "max_rows": MAX_ROWS_SHOWN,
            "can_write": access.study_can_write(request_user(request), study),
            # Each labeller in words ("vlm-x v1"), its name@version the value the form sends.
            "labellers": [(name, labeller_words(name)) for name in machine_labellers(study)],
            "source_options": [(name, words.get(name, name)) for name in report.sources]
            + [(name, source_words(name)) for name in pool_sources if name not in report.sources],
            "pool_switch": pool_switch,
            "designs": SAMPLE_DESIGNS,
            "gated": [e for e in report.reliability if not e.get("excluded")],
            "show_stereotypes": report.protocol == "stereotype-markers" or feature_tables,
            "stereotype_rows": stereotype_table_size(study),
            "show_features": bool(report.embedding_sources or report.caption_sources or feature_tables),
        },
    )


def _pool_switch(study: Any, report: FindingsReport, query: dict[str, str]) -> list[dict[str, Any]]:
    """Per attribute that forms rater pools: a link to the findings of each pool (the report's kind of human
    labels, consensus or every judgement, read from that pool), back to everyone, and to the compare page
    with the pools side by side (at most ``MAX_SIDES``). Nothing for a study without pools."""
    split = pool_source_split(report.source)
    kind = split[0] if split else report.source
    if kind not in (CONSENSUS, JUDGEMENTS):
        kind = CONSENSUS
    if kind == JUDGEMENTS and report.protocol not in JUDGEMENT_PROTOCOLS:
        kind = CONSENSUS
    base_url = reverse("study-findings", args=[study.pk])
    kept = {k: v for k, v in query.items() if k != "source"}
    groups = []
    for key, pools in pool_keys(study).items():
        sources = [f"{kind}@{key}={value}" for value in pools]
        groups.append(
            {
                "key": key,
                "pools": [
                    {
                        "value": value,
                        "people": len(ids),
                        "source": source,
                        "current": source == report.source,
                        "url": f"{base_url}?{urlencode(kept | {'source': source})}",
                    }
                    for (value, ids), source in zip(pools.items(), sources, strict=True)
                ],
                "everyone": None
                if report.source == kind
                else f"{base_url}?{urlencode(kept | {'source': kind})}",
                "compare": reverse("compare")
                + "?"
                + urlencode(
                    [("study", study.pk) for _ in sources[:MAX_SIDES]]
                    + [("source", source) for source in sources[:MAX_SIDES]]
                ),
            }
        )
    return groups


@dataclass(frozen=True)
class _TableShown:
    """A findings table as the page shows it: its first rows as text, its figures' and CSV's addresses."""

    table: Table
    rows: list[list[str]]
    figures: list[dict[str, str]]
    csv: str

    @property
    def key(self) -> str:  # the contents box (findings/_toc.html) reads key, title and rows
        return self.table.key

    @property
    def title(self) -> str:
        return self.table.title

    @property
    def headline(self) -> str:
        """What each row is (its label columns: "one per identity, attribute"), for a folded table's
        summary line: no number of one row there, which would stand without its n and interval."""
        labels = [column.name for column in self.table.columns if column.kind == "label"]
        return f"one per {', '.join(labels)}" if labels else ""


def _shown(study_pk: int, table: Table, figures: list[Figure], query: dict[str, str]) -> _TableShown:
    drawn = []
    for figure in figures:
        if figure.table != table.key or table.key not in DRAW or not table.rows:
            continue
        params = urlencode({**query, **figure.params})
        drawn.append(
            {"title": figure.title}
            | {
                fmt: reverse("study-findings-figure", args=[study_pk, table.key, fmt]) + f"?{params}"
                for fmt in ("png", "svg", "pdf")
            }
        )
    return _TableShown(
        table=table,
        rows=[[cell_display(v) for v in row] for row in table.rows[:MAX_ROWS_SHOWN]],
        figures=drawn,
        csv=reverse("study-findings-csv", args=[study_pk, table.key]) + "?" + urlencode(query),
    )


@login_required
@require_POST
def study_features_import(request: HttpRequest, pk: int) -> HttpResponse:
    """Upload a JSONL of image embeddings and captions made elsewhere (all or nothing)."""
    study = study_for_page(request, pk, researcher=True)
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        problem = form_problems(form, "file", "Choose a file to import.")
        messages.error(request, f"Nothing was imported. {problem}")
        return redirect("study-findings", pk=pk)
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        outcome = import_upload(
            study=study,
            user=request_user(request),
            kind=ImportJob.Kind.FEATURES,
            upload=form.cleaned_data["file"],
        )
    except WorkbenchError as exc:
        messages.error(request, f"Nothing was imported. {exc.message}")
    else:
        if import_outcome_message(request, outcome):
            return redirect("study-items", pk=pk)
    return redirect("study-findings", pk=pk)


@login_required
@require_POST
def study_stereotypes_import(request: HttpRequest, pk: int) -> HttpResponse:
    """Replace the study's stereotype table with an uploaded SeeGULL-style CSV, optionally with the
    visual-attribute ratings (.xlsx): the same service and checks as ``manage.py import_seegull``."""
    study = study_for_page(request, pk, researcher=True)
    form = StereotypeTableForm(request.POST, request.FILES)
    if not form.is_valid():
        problem = form_problems(form, "file", "Choose a stereotype table (CSV).")
        messages.error(request, f"Nothing was replaced. {problem}")
        return redirect(reverse("study-findings", args=[pk]) + "#stereotypes")
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        outcome = import_upload(
            study=study,
            user=request_user(request),
            kind=ImportJob.Kind.STEREOTYPES,
            upload=form.cleaned_data["file"],
            files={"ratings": form.cleaned_data.get("visual_attributes")},
        )
    except WorkbenchError as exc:
        messages.error(request, f"Nothing was replaced. {exc.message}")
    else:
        if import_outcome_message(request, outcome):
            return redirect("study-items", pk=pk)
    return redirect(reverse("study-findings", args=[pk]) + "#stereotypes")


@login_required
def study_features_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The study's embeddings and captions as the JSONL the import reads (``labeller``, ``kind`` narrow)."""
    study = study_for_page(request, pk, researcher=True)
    try:
        lines = list(
            features_export_lines(
                study, labeller=request.GET.get("labeller") or None, kind=request.GET.get("kind") or None
            )
        )
    except ValidationFailed as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    response = HttpResponse("".join(lines), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-features.jsonl"'
    return response


@login_required
def study_findings_csv(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    try:
        study, report = _report(request, pk)
    except ValidationFailed as exc:
        return _refused(exc)
    table = report.table(key)
    if table is None:
        raise Http404("no such table for this study")
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(table.names)
    writer.writerows([csv_cell(v) for v in row] for row in table.rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="study-{study.pk}-{key}-{report.source[:40]}'
        f'{"-with-partial" if report.include_partial else ""}.csv"'
    )
    # What the rows rest on (settled, partial, none), for a script that keeps the file.
    response["X-Findings-Coverage"] = report.coverage["summary"]
    return response


@login_required
def study_findings_figure(request: HttpRequest, pk: int, key: str, fmt: str) -> HttpResponse:
    try:
        study, report = _report(request, pk)
    except ValidationFailed as exc:
        return _refused(exc)
    params = {
        k: str(v)
        for k, v in request.GET.items()
        if k not in ("source", "embeddings", "captions", "partial", "width", "correction", "min_people")
    }
    data = figure_render(report, key, params, fmt)
    if data is None:
        raise Http404("no such figure for this study")
    response = HttpResponse(data, content_type=FORMATS[fmt])
    disposition = "inline" if fmt == "png" else "attachment"
    response["Content-Disposition"] = f'{disposition}; filename="study-{study.pk}-{key}.{fmt}"'
    response["Content-Security-Policy"] = IMAGE_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response


SAMPLE_DESIGNS = ("uniform", "stratified", "active")


def _refuse_read_only(request: HttpRequest, study: Any) -> None:
    if not access.study_can_write(request_user(request), study):
        raise WorkbenchError("you may read this study but not change it")


@login_required
@require_POST
def study_findings_reliability(request: HttpRequest, pk: int) -> HttpResponse:
    """Leave a question out of the findings (with the reason), take it back, or choose the study's
    reliability thresholds: the services of ``findings_reliability``; back to the page's gate."""
    target = reverse("study-findings", args=[pk]) + "#reliability"
    action = request.POST.get("action", "")
    study = study_for_page(request, pk, researcher=True)  # 404 / 403 answered by the middleware
    try:
        _refuse_read_only(request, study)
        user = request_user(request)
        question = request.POST.get("question", "")
        if action == "exclude":
            findings_question_exclude(
                study=study, question_key=question, reason=request.POST.get("reason", ""), user=user
            )
            messages.success(request, f"{question} is left out of the findings (the report says why).")
        elif action == "include":
            findings_question_include(study=study, question_key=question)
            messages.success(request, f"{question} is read by the findings again.")
        elif action == "thresholds":
            try:
                values = [float(request.POST.get(k, "")) for k in ("reliable_at", "tentative_at")]
                least = int(request.POST.get("min_items", ""))
            except ValueError as exc:
                raise ValidationFailed("thresholds must be numbers", {"thresholds": "invalid"}) from exc
            findings_thresholds_set(
                study=study, reliable_at=values[0], tentative_at=values[1], min_items=least, user=user
            )
            messages.success(request, "The study's reliability thresholds are saved.")
        else:
            raise ValidationFailed("unknown action", {"action": "unknown"})
    except WorkbenchError as exc:
        messages.error(request, f"Nothing was changed. {exc.message}")
    return redirect(target)


@login_required
@require_POST
def study_findings_sample(request: HttpRequest, pk: int) -> HttpResponse:
    """Draw the study's validation sample from the page (design, size, stratification, seed): the service
    ``manage.py sample_for_validation`` calls, with the same rules; then show the ppi: source."""
    target = reverse("study-findings", args=[pk]) + "#validation-sample"
    post = request.POST
    study = study_for_page(request, pk, researcher=True)
    try:
        _refuse_read_only(request, study)
        labeller = labeller_named(study, post.get("labeller", "")[:200])
        against = labeller_named(study, post["against"][:200]) if post.get("against") else None
        # ASCII digits within the database's range ('٣', '²' and 4,401 digits are refused, not read).
        size = whole_number_from_text(post.get("size", ""), low=1, high=MAX_POSITIVE_INT)
        seed = whole_number_from_text(post.get("seed") or "0", low=MIN_BIG_INT, high=MAX_ID)
        try:
            mix = float((post.get("mix") or "0.5")[:32])
        except ValueError:
            mix = math.nan
        if size is None or seed is None or not 0 <= mix <= 1:
            raise ValidationFailed("size and seed must be whole numbers, mix a number from 0 to 1")
        outcome = validation_sample_create(
            study=study,
            labeller=labeller,
            size=size,
            stratify_by=(post.get("stratify_by") or "condition").strip()[:200],
            seed=seed,
            design=post.get("design", ""),
            against=against,
            mix=mix,
        )
    except WorkbenchError as exc:
        messages.error(request, f"No sample was drawn. {exc.message}")
        return redirect(target)
    messages.success(
        request,
        f"Drew {outcome.get('size', size)} items for people to validate ({post.get('design')} design, seed "
        f"{seed}); the estimates below read them.",
    )
    name = post.get("labeller", "")
    return redirect(reverse("study-findings", args=[pk]) + "?" + urlencode({"source": PREFIX + name}))
