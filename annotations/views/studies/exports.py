"""Exports of a study from its page: streamed, or a background job (to storage or a bucket), and their
downloads."""

from __future__ import annotations

import mimetypes

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations.access import request_user
from annotations.downloads import raw_requested, stored_file_response, streaming_export
from annotations.interchange.exports import (
    FILE_FORMATS,
    FORMATS,
    export_filename,
    export_job_create,
    export_refusal,
    export_size,
)
from annotations.views.pages import study_for_page
from annotations.views.studies.shared import to_tab
from common.errors import WorkbenchError


@login_required
def study_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponseBase:
    """POST (the study page's export buttons, with the CSRF token) streams a small export or starts a
    background export job. GET creates nothing (docs/security.md, "No writes on GET"): it streams a
    small CSV, JSONL or COCO export, and for one that would be a background job it shows the button."""
    study = study_for_page(request, pk, researcher=True)
    if fmt not in FORMATS:
        raise Http404("unknown export format")
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    refusal = export_refusal(study, fmt)
    if refusal is not None:
        messages.error(request, f"Not exported: {refusal}.")
        return to_tab(pk, "export")
    raw = raw_requested(request.POST.get("raw") or request.GET.get("raw"))
    background = fmt in FILE_FORMATS or export_size(study) > settings.WORKBENCH_EXPORT_INLINE_LIMIT
    if request.method != "POST":
        if background:
            return render(request, "studies/export_start.html", {"study": study, "fmt": fmt, "raw": raw})
        return streaming_export(study, fmt, raw=raw)
    if background:
        export_job_create(study=study, user=request_user(request), fmt=fmt, raw=raw)
        messages.info(
            request,
            "The export is being prepared in the background: its status is below, and its link once done.",
        )
        return to_tab(pk, "export")
    return streaming_export(study, fmt, raw=raw)


@login_required
@require_POST
def study_export_bucket(request: HttpRequest, pk: int) -> HttpResponse:
    """An export job that writes its file under a bucket prefix of an allowed bucket (``target``)."""
    study = study_for_page(request, pk, researcher=True)
    fmt, target = request.POST.get("format", ""), request.POST.get("target", "").strip()
    try:
        refusal = export_refusal(study, fmt) or (
            "" if target else "give a bucket prefix, s3://bucket/prefix/"
        )
        if refusal:
            raise WorkbenchError(refusal)
        export_job_create(study=study, user=request_user(request), fmt=fmt, raw=False, target=target)
    except WorkbenchError as exc:
        if request.headers.get("Accept", "").startswith("application/json"):
            return JsonResponse({"ok": False, "error": exc.message}, status=400)
        messages.error(request, f"Not exported: {exc.message}")
        return redirect(reverse("study-detail", args=[pk]) + "#export")
    messages.info(request, f"The export is being written to {target} in the background; it appears below.")
    return redirect(reverse("study-detail", args=[pk]) + "#export")


@login_required
def export_download(request: HttpRequest, pk: int, job_id: int) -> HttpResponseBase:
    study = study_for_page(request, pk, researcher=True)
    job = study.export_jobs.filter(pk=job_id, requested_by=request_user(request), status="done").first()
    if job is None:
        raise Http404("no such finished export")
    filename = export_filename(study.pk, job.format)
    return stored_file_response(
        job.file.storage,
        job.file.name or "",
        content_type=mimetypes.guess_type(filename)[0] or "application/octet-stream",
        filename=filename,
        attachment=True,
    )
