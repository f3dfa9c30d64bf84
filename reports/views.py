"""The Report tab (``/studies/<pk>/report/``): the study's report previewed as HTML, its options
(label source, correction, studies to compare with) and its downloads (docs/reports.md, "Formats,
downloads and the API").

The study's researchers only; anyone else, annotators of the study included, gets 404
(``reports.jobs.report_study_get``). The tab answers without building the report (its options are
checked, nothing more); the preview, the report's own HTML page, comes after it from
``/studies/<pk>/report/preview/`` (same checks, same options), which ``static/js/study.js`` fetches
and sets as the ``srcdoc`` of an ``<iframe sandbox>``: it runs nothing, its styles stay out of the
app's page, and the app's content-security policy (``workbench.middleware``) and ``X-Frame-Options:
DENY`` apply unchanged (the frame is not loaded from a URL, so no page of the app need be frameable).
md, html and heds of a small study are made in the request; tex and pdf, and every format of a large
study (``report_is_large``), go through a :class:`~reports.models.ReportJob`, listed on the page with
its state and download link, which ``study.js`` follows from the API until every job has ended.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotations import access
from annotations.access import request_user
from annotations.views.pages import IMAGE_CSP
from common.errors import ValidationFailed
from findings.report import default_source, sources_available
from reports.downloads import report_file_response, report_supplement_response
from reports.formats import FORMATS
from reports.jobs import (
    CORRECTIONS,
    INLINE_FORMATS,
    ReportOptions,
    report_bundle,
    report_is_large,
    report_job_create,
    report_job_get_for_user,
    report_jobs_for_user,
    report_options_check,
    report_render,
    report_study_get,
)
from reports.models import ReportJob

FORMAT_NOTES = {
    "md": "Markdown for GitHub (figures as SVG files: a zip)",
    "html": "one self-contained page",
    "tex": "LaTeX with its figures (a zip)",
    "pdf": "PDF",
    "heds": "the HEDS 3.0 datasheet (JSON)",
}
COMPARE_CHOICES = 200
# The preview's own answer, should it be opened by itself (a reader without JavaScript): nothing runs
# and nothing loads (a sandbox, no source but its inline style sheet and data: images, never framed),
# and no cache keeps it (it is a study's data).
PREVIEW_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; sandbox"
PREVIEW_CACHE_CONTROL = "private, no-store"


def _options(request: HttpRequest, study: Any, data: Any, fmt: str) -> ReportOptions:
    return report_options_check(
        user=request_user(request),
        study=study,
        fmt=fmt,
        source=(data.get("source") or "")[:300],
        correction=data.get("correction") or "holm",
        compare=data.getlist("compare"),
    )


def _query(options: ReportOptions) -> str:
    pairs: list[tuple[str, str]] = [("correction", options.correction)]
    if options.source:
        pairs.append(("source", options.source))
    pairs.extend(("compare", str(other.pk)) for other in options.compare)
    return urlencode(pairs)


@login_required
@require_GET
def study_report(request: HttpRequest, pk: int) -> HttpResponse:
    study = report_study_get(user=request_user(request), id=pk)
    try:
        options = _options(request, study, request.GET, "html")
    except ValidationFailed as exc:
        return _tab_page(request, study, None, error=exc.message)
    return _tab_page(request, study, options)


@login_required
@require_GET
def study_report_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """The preview of the Report tab: the report's HTML page for the options of the tab's query (the
    tab's checks: 404 to all but the study's researchers, 400 with the reason for a refused option,
    409 for a large study, whose report is made in the background only). Every answer is sandboxed
    and kept by no cache; the reason of a refusal is plain text, which the tab shows."""
    study = report_study_get(user=request_user(request), id=pk)
    try:
        options = _options(request, study, request.GET, "html")
    except ValidationFailed as exc:
        return _preview_answer(exc.message, status=400)
    if report_is_large(study):
        return _preview_answer(
            "This study is large: its report is made in the background. Download the HTML above to read it.",
            status=409,
        )
    try:
        rendered = report_render(study, options)
    except ValidationFailed as exc:
        return _preview_answer(exc.message, status=400)
    return _preview_answer(rendered.body, content_type="text/html; charset=utf-8")


def _preview_answer(
    body: str | bytes, *, status: int = 200, content_type: str = "text/plain; charset=utf-8"
) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type, status=status)
    response["Content-Security-Policy"] = PREVIEW_CSP
    response["Cache-Control"] = PREVIEW_CACHE_CONTROL
    return response


def _tab_page(
    request: HttpRequest, study: Any, options: ReportOptions | None, *, error: str = ""
) -> HttpResponse:
    """The Report tab for ``options`` (None: options refused with ``error``; the tab answers 400 with
    the reason and the default options). The preview is not built here: the page names its URL."""
    user = request_user(request)
    large = report_is_large(study)
    if options is None:
        options = ReportOptions(fmt="html", source=None, correction="holm", compare=[])
    chosen = {other.pk for other in options.compare}
    sources = sources_available(study)
    if options.source and options.source not in sources:
        sources = [options.source, *sources]
    others = access.studies_for_user(user).exclude(pk=study.pk).order_by("name", "pk")[:COMPARE_CHOICES]
    context = {
        "study": study,
        "options": options,
        "error": error,
        "preview_url": f"{reverse('study-report-preview', args=[study.pk])}?{_query(options)}",
        "large": large,
        "formats": [
            {"name": fmt, "note": FORMAT_NOTES.get(fmt, ""), "inline": fmt in INLINE_FORMATS and not large}
            for fmt in FORMATS
        ],
        "corrections": CORRECTIONS,
        "sources": sources,
        "default_source": default_source(study).source,
        "compare_choices": [
            {"pk": other.pk, "name": other.name, "chosen": other.pk in chosen} for other in others
        ],
        "jobs": report_jobs_for_user(user=user, study=study)[:10],
    }
    return render(request, "reports/study.html", context, status=400 if error else 200)


@login_required
@require_POST
def study_report_make(request: HttpRequest, pk: int) -> HttpResponseBase:
    """A download button: the file now (md, html, heds of a small study), or a report job queued and
    the Report tab again, where the job shows."""
    user = request_user(request)
    study = report_study_get(user=user, id=pk)
    page = reverse("study-report", args=[study.pk])
    try:
        options = _options(request, study, request.POST, (request.POST.get("format") or "")[:16])
    except ValidationFailed as exc:
        return _tab_page(request, study, None, error=exc.message)
    if options.fmt in INLINE_FORMATS and not report_is_large(study):
        try:
            rendered = report_render(study, options)
        except ValidationFailed as exc:
            messages.error(request, exc.message)
            return redirect(f"{page}?{_query(options)}")
        stem = rendered.filename.rsplit(".", 1)[0]
        filename, content_type, data = report_bundle(rendered, stem)
        response = HttpResponse(data, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        response["Content-Security-Policy"] = IMAGE_CSP
        return response
    job = report_job_create(study=study, user=user, options=options)
    messages.info(
        request, f"Report {job.pk} ({options.fmt}) is queued; it shows below with its download link."
    )
    return redirect(f"{page}?{_query(options)}#report-jobs")


@login_required
@require_GET
def study_report_download(request: HttpRequest, pk: int, job_id: int) -> HttpResponseBase:
    """A finished report job's file (the requester's own; a presigned redirect on S3)."""
    user = request_user(request)
    study = report_study_get(user=user, id=pk)
    found = report_job_get_for_user(user=user, study=study, id=job_id)
    if found.status != ReportJob.Status.DONE or not found.file.name:
        messages.error(request, f"Report {found.pk} is {found.get_status_display().lower()}, not ready.")
        return redirect(reverse("study-report", args=[study.pk]) + "#report-jobs")
    return report_file_response(found)


@login_required
def study_report_supplement(request: HttpRequest, pk: int, job_id: int) -> HttpResponseBase:
    """A finished report job's supplement: every findings table in full, one CSV each, in a zip."""
    user = request_user(request)
    study = report_study_get(user=user, id=pk)
    found = report_job_get_for_user(user=user, study=study, id=job_id)
    if found.status != ReportJob.Status.DONE or not found.supplement.name:
        messages.error(request, f"Report {found.pk} has no supplement ready.")
        return redirect(reverse("study-report", args=[study.pk]) + "#report-jobs")
    return report_supplement_response(found)
