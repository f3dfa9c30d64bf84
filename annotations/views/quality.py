"""Researcher pages for quality control: settings and control items, marking one item, excluding people.

Thin views: ``access`` decides who may look or change, ``services.controls`` and ``services.quality``
do the work, ``selectors.controls`` and ``selectors.quality`` read. The per-annotator quality table
is on the progress page (``batch_views.progress``).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import ImportJob, Item, Study
from annotations.presenters import image_views
from annotations.selectors import controls as control_selectors
from annotations.selectors import quality as quality_selectors
from annotations.selectors import tasks as task_selectors
from annotations.services import controls as control_services
from annotations.services import quality as quality_services
from annotations.views.forms import ControlForm, ExcludeForm, QualitySettingsForm, ReinstateForm, UploadForm
from annotations.views.pages import study_for_page
from annotations.views.task_form import answers_from_form
from annotations.views.uploads import UploadImport, upload_import_page
from common.errors import ValidationFailed, WorkbenchError
from protocols.answers import SubmissionError
from protocols.colours import BASIC_COLOURS


def _item(request: HttpRequest, study: Study, item_id: int) -> Item:
    item = Item.objects.filter(pk=item_id, study=study).prefetch_related("images").first()
    if item is None:
        raise Http404("no such item in this study")
    return item


@login_required
def study_quality(request: HttpRequest, pk: int) -> HttpResponse:
    """Settings, control items, gold import and the exclusion history (GET); save settings (POST)."""
    study = study_for_page(request, pk, researcher=True, write=request.method == "POST")
    settings = control_selectors.quality_settings(study)
    form = QualitySettingsForm(request.POST or None, initial=settings.to_dict())
    if request.method == "POST":
        if form.is_valid():
            try:
                control_services.quality_settings_update(study=study, changes=form.cleaned_data)
            except WorkbenchError as exc:
                messages.error(request, f"Settings not saved: {exc.message}")
            else:
                messages.success(request, "Quality settings saved.")
                return redirect("study-quality", pk=pk)
        else:
            messages.error(request, "Settings not saved: see the messages next to the fields.")
    controls = (
        Item.objects.filter(study=study).exclude(control_kind="").order_by("control_kind", "external_id")
    )
    return render(
        request,
        "quality/study.html",
        {
            "study": study,
            "form": form,
            "controls": controls,
            "upload_form": UploadForm(),
            "exclusions": quality_selectors.exclusion_history(study),
            "can_write": access.study_can_write(request_user(request), study),
        },
    )


@login_required
def study_quality_json(request: HttpRequest, pk: int) -> JsonResponse:
    """The per-annotator quality report as JSON (the same as ``manage.py quality STUDY --json``)."""
    study = study_for_page(request, pk, researcher=True)
    response = JsonResponse(quality_selectors.quality_report(study=study))
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def controls_upload(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True, write=True)
    form = UploadForm(request.POST, request.FILES)
    return upload_import_page(
        request,
        study,
        form,
        UploadImport(kind=ImportJob.Kind.CONTROLS),
        back=reverse("study-quality", args=[pk]),
        refused="Nothing was marked.",
        invalid="Nothing was marked: choose a CSV or JSONL file.",
        write_checked=True,
    )


@login_required
def item_control(request: HttpRequest, pk: int, item_id: int) -> HttpResponse:
    """One item as a control: answer the questions whose answer is known, choose gold or attention check."""
    study = study_for_page(request, pk, researcher=True, write=request.method == "POST")
    item = _item(request, study, item_id)
    errors: dict[str, str] = {}
    status = 200
    form = ControlForm(request.POST or None, initial={"kind": item.control_kind or "gold", "note": item.note})
    if request.method == "POST":
        # The researcher sees every question, expert-only ones too.
        try:
            raw = answers_from_form(study=study, item=item, expert=True, data=request.POST)
        except SubmissionError as exc:
            raw, errors = {}, exc.errors
        answers = {key: answer["value"] for key, answer in raw.items()}
        if errors:
            status = 400
        elif form.is_valid():
            try:
                control_services.control_mark(
                    study=study,
                    item=item,
                    kind=form.cleaned_data["kind"],
                    answers=answers,
                    note=form.cleaned_data["note"],
                )
            except ValidationFailed as exc:
                errors, status = dict(exc.details), 400
                messages.error(request, f"Not saved: {exc.message}")
            else:
                messages.success(request, f"Item {item.external_id} is a control item.")
                return redirect("study-item-control", pk=pk, item_id=item.pk)
        else:
            status = 400
        shown = {key: {"value": value} for key, value in answers.items()}
    else:
        shown = {key: {"value": value} for key, value in item.control_answers.items()}
    questions = [
        view
        for view in task_selectors.question_views(
            study=study, item=item, expert=True, answers=shown, errors=errors
        )
        if view.kind != "boxes"
    ]
    return render(
        request,
        "quality/control.html",
        {
            "study": study,
            "item": item,
            "form": form,
            "questions": questions,
            "errors": errors,
            "images": image_views(item),
            "colours": BASIC_COLOURS,
            "can_write": access.study_can_write(request_user(request), study),
        },
        status=status,
    )


@login_required
@require_POST
def item_control_remove(request: HttpRequest, pk: int, item_id: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True, write=True)
    item = _item(request, study, item_id)
    control_services.control_unmark(study=study, item=item)
    messages.success(request, f"Item {item.external_id} is a real item again.")
    return redirect("study-items" if request.POST.get("next") == "items" else "study-quality", pk=pk)


@login_required
@require_http_methods(["GET", "POST"])
def annotator_exclude(request: HttpRequest, pk: int, annotator_id: int) -> HttpResponse:
    """Excluding is a second step: GET asks for the reason and says what excluding does; POST excludes."""
    study = study_for_page(request, pk, researcher=True, write=True)
    annotator = access.annotator_get_in_study(study=study, id=annotator_id)
    form = ExcludeForm(request.POST if request.method == "POST" else None)
    if not form.is_valid():
        context = {
            "study": study,
            "annotator": annotator,
            "answers": quality_selectors.annotator_answer_count(study=study, annotator=annotator),
            "refused": "Not excluded: say why (a reason is required)." if request.method == "POST" else "",
        }
        return render(request, "quality/exclude.html", context, status=400 if form.is_bound else 200)
    try:
        quality_services.annotator_exclude(
            study=study, annotator=annotator, user=request_user(request), reason=form.cleaned_data["reason"]
        )
    except WorkbenchError as exc:
        messages.error(request, f"Not excluded: {exc.message}")
    else:
        messages.success(
            request,
            f"{annotator.name} is excluded: their answers no longer count and the consensus was recomputed.",
        )
    return redirect("study-progress", pk=pk)


@login_required
@require_POST
def annotator_reinstate(request: HttpRequest, pk: int, annotator_id: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True, write=True)
    annotator = access.annotator_get_in_study(study=study, id=annotator_id)
    form = ReinstateForm(request.POST)
    note = form.cleaned_data["note"] if form.is_valid() else ""
    try:
        quality_services.annotator_reinstate(
            study=study, annotator=annotator, user=request_user(request), note=note
        )
    except WorkbenchError as exc:
        messages.error(request, f"Not reinstated: {exc.message}")
    else:
        messages.success(request, f"{annotator.name} is reinstated: their answers count again.")
    return redirect("study-progress", pk=pk)
