"""Researcher pages for running a batch: progress (page, polled JSON, CSV), pause/resume, enrol a pool,
and each annotator's quality with its flags (exclude and reinstate post to ``quality_views``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Annotator
from annotations.selectors import progress as batch_selectors
from annotations.selectors.payments import payment_rows
from annotations.selectors.quality import quality_report_cached
from annotations.services import studies as study_services
from annotations.views.forms import ExcludeForm
from annotations.views.pages import study_for_page
from common.errors import WorkbenchError
from common.spreadsheet import csv_lines


@login_required
def progress(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    return render(
        request,
        "progress/study.html",
        {
            "study": study,
            "totals": batch_selectors.study_progress(study),
            "imported": batch_selectors.imported_answers(study),
            "annotators": batch_selectors.annotator_progress(study),
            "can_write": access.study_can_write(request_user(request), study),
            "pools": Annotator.Pool.choices,
            "reveal": study.reveal_after_submit,
            "payments": payment_rows(study),
            "quality": quality_report_cached(study=study, fresh=request.GET.get("fresh") == "1"),
            "exclude_form": ExcludeForm(),
        },
    )


@login_required
def progress_json(request: HttpRequest, pk: int) -> JsonResponse:
    """What the progress bar polls: item states and judgements, small and cheap."""
    study = study_for_page(request, pk, researcher=True)
    response = JsonResponse(batch_selectors.study_progress(study))
    response["Cache-Control"] = "no-store"
    return response


@login_required
def progress_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """Progress as CSV: one row per item, or per annotator with ``?by=annotator``."""
    study = study_for_page(request, pk, researcher=True)
    if request.GET.get("by") == "annotator":
        columns = ["annotator", "pool", "submitted", "skipped", "leased", "median_seconds"]
        lines = csv_lines(batch_selectors.annotator_progress(study), columns)
        name = f"study-{study.pk}-progress-annotators.csv"
    else:
        columns = [
            "external_id",
            "condition",
            "expert_only",
            "submitted",
            "leased",
            "skipped",
            "needs",
            "state",
        ]
        lines = csv_lines(batch_selectors.item_progress(study), columns)
        name = f"study-{study.pk}-progress-items.csv"
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
@require_POST
def study_run(request: HttpRequest, pk: int) -> HttpResponse:
    """Pause or resume (``action``), or switch reveal-after-submit (``reveal`` = on/off)."""
    study = study_for_page(request, pk, researcher=True, write=True)
    action = request.POST.get("action", "")
    try:
        if action in ("pause", "resume"):
            study_services.study_set_running(study=study, running=action == "resume")
            messages.success(
                request,
                "Study resumed." if action == "resume" else "Study paused: no new items are handed out.",
            )
        elif action == "reveal":
            on = request.POST.get("reveal") == "on"
            study_services.study_set_reveal(study=study, reveal=on)
            messages.success(request, f"Reveal after submit is {'on' if on else 'off'}.")
        else:
            messages.error(request, "Unknown action.")
    except WorkbenchError as exc:
        messages.error(request, exc.message)
    return redirect("study-progress", pk=pk)


@login_required
@require_POST
def enroll_pool(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True, write=True)
    try:
        enrolled = study_services.enrollment_add_pool(
            study=study, pool=request.POST.get("pool", ""), by=request_user(request)
        )
    except WorkbenchError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"{len(enrolled)} annotator accounts of that pool in your other studies are enrolled.",
        )
    return redirect("study-progress", pk=pk)
