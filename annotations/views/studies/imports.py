"""Imports into a study from its pages: items (files, a folder, a bucket address), annotations, a Label
Studio export; one's import jobs (status, cancel) and the manifest templates."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.interchange.import_jobs import (
    import_job_cancel,
    import_job_from_address,
    import_job_from_uploads,
    items_import_uploads,
    uploads_inline,
)
from annotations.interchange.import_kinds import items_report
from annotations.models import ImportJob
from annotations.views.forms import AnnotationUploadForm, ItemUploadForm, LabelStudioUploadForm
from annotations.views.pages import form_problems, study_for_page
from annotations.views.studies.shared import import_job_json, tab_url, to_tab
from annotations.views.uploads import UploadImport, upload_import_page
from common.errors import WorkbenchError
from protocols.manifests import FORMATS as MANIFEST_FORMATS
from protocols.manifests import manifest_template
from protocols.schema import Protocol, list_presets, load_preset


@login_required
@require_POST
def study_import_items(request: HttpRequest, pk: int) -> HttpResponse:
    """Items from one ``file`` (a zip, a manifest) or several ``files`` (images, a dropped folder;
    ``static/js/upload.js`` sends one request per batch). A request that asks for JSON (the upload
    script) gets the report or the refusal as JSON; a form post gets messages and goes back to the
    items page (``next=items``) or the study page. Every refusal links the manifest template."""
    study = study_for_page(request, pk, researcher=True)
    wants_json = request.headers.get("Accept", "").startswith("application/json")
    back = redirect("study-items", pk=pk) if request.POST.get("next") == "items" else to_tab(pk, "items")
    templates = {fmt: reverse("study-import-template", args=[pk, fmt]) for fmt in MANIFEST_FORMATS}
    form = ItemUploadForm(request.POST, request.FILES)
    address = request.POST.get("address", "").strip()
    job = None
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        if address:  # a bucket prefix or manifest: always read by a worker
            job = import_job_from_address(study=study, user=request_user(request), address=address)
        elif not form.is_valid():
            raise WorkbenchError(form_problems(form, "file", "Choose a file to import."))
        else:
            uploads = form.cleaned_data["images"] or [form.cleaned_data["file"]]
            images = bool(form.cleaned_data["images"])
            paths = request.POST.getlist("paths") if images else []
            if not uploads_inline(uploads):
                job = import_job_from_uploads(
                    study=study, user=request_user(request), uploads=uploads, paths=paths, images=images
                )
            else:
                report = items_import_uploads(study=study, uploads=uploads, paths=paths, images=images)
    except WorkbenchError as exc:
        if wants_json:
            return JsonResponse({"ok": False, "error": exc.message, "templates": templates}, status=400)
        messages.error(
            request,
            format_html(
                'Nothing was imported. {} <a href="{}">Manifest template (CSV)</a> · '
                '<a href="{}">(JSONL)</a> · <a href="{}">how imports work</a>',
                exc.message,
                templates["csv"],
                templates["jsonl"],
                reverse("docs-page", args=["import-export"]),
            ),
        )
        return back
    if job is not None:
        if wants_json:
            answer = {"ok": True, "job": import_job_json(job), "templates": templates}
            return JsonResponse(answer, status=202)
        messages.info(request, f"Import {job.pk} ({job.label}) is queued; its progress shows under Imports.")
        return redirect("study-items", pk=pk)
    if wants_json:
        return JsonResponse({"ok": True, **items_report(report), "templates": templates})
    text = f"Imported {report.created} items ({report.references} without image files)."
    if report.duplicates:
        text += f" Skipped {len(report.duplicates)} duplicates: " + ", ".join(
            f"{entry['external_id']} ({entry['reason']})" for entry in report.duplicates[:10]
        )
    messages.success(request, text)
    for warning in report.warnings():
        messages.warning(request, f"Warning: {warning}.")
    return back


@login_required
def import_job_status(request: HttpRequest, pk: int, job_id: int) -> JsonResponse:
    """An import job's status and, once done, its report (polled by the items page)."""
    study = study_for_page(request, pk, researcher=True)
    job = study.import_jobs.filter(pk=job_id, requested_by=request_user(request)).first()
    if job is None:
        raise Http404("no such import")
    return JsonResponse(import_job_json(job))


@login_required
@require_POST
def import_job_stop(request: HttpRequest, pk: int, job_id: int) -> HttpResponse:
    """Cancel one's own import job: nothing of it is imported, its upload is deleted."""
    study = study_for_page(request, pk, researcher=True)
    job = study.import_jobs.filter(pk=job_id, requested_by=request_user(request)).first()
    if job is None:
        raise Http404("no such import")
    job = import_job_cancel(job=job)
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse(import_job_json(job))
    messages.info(request, f"Import {job.pk}: {job.get_status_display().lower()}.")
    return redirect("study-items", pk=pk)


@login_required
def study_import_template(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The manifest template of this study's protocol (``protocols/manifests.py``)."""
    study = study_for_page(request, pk, researcher=True)
    return _template_response(study.protocol_obj, fmt, f"study-{study.pk}-manifest")


@login_required
def preset_import_template(request: HttpRequest, preset: str, fmt: str) -> HttpResponse:
    """The manifest template of a preset, before any study exists (linked from the create page)."""
    if preset not in list_presets():
        raise Http404("no such preset")
    return _template_response(load_preset(preset), fmt, f"{preset}-manifest")


def _template_response(protocol: Protocol, fmt: str, stem: str) -> HttpResponse:
    if fmt not in MANIFEST_FORMATS:
        raise Http404("templates are .csv or .jsonl")
    content_type = "text/csv" if fmt == "csv" else "application/x-ndjson"
    response = HttpResponse(manifest_template(protocol, fmt), content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


def _annotations_upload(data: dict[str, Any]) -> UploadImport:
    """JSONL annotations, or (``format=coco``) a COCO file's boxes into the chosen boxes question."""
    coco = data.get("format") == "coco"
    if coco and not data.get("question"):
        raise WorkbenchError("a COCO import needs the boxes question")
    return UploadImport(
        kind=ImportJob.Kind.COCO if coco else ImportJob.Kind.ANNOTATIONS,
        options={
            "question": data.get("question") or "",
            "annotator": data.get("annotator") or "",
            "kind": data.get("kind") or "",
        }
        if coco
        else {},
    )


@login_required
@require_POST
def study_import_annotations(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    form = AnnotationUploadForm(request.POST, request.FILES)
    return upload_import_page(request, study, form, _annotations_upload, back=tab_url(pk, "items"))


@login_required
@require_POST
def study_import_labelstudio(request: HttpRequest, pk: int) -> HttpResponse:
    """A Label Studio export (.json, or a .zip with its config and images) into this study."""
    study = study_for_page(request, pk, researcher=True)
    form = LabelStudioUploadForm(request.POST, request.FILES)
    return upload_import_page(
        request,
        study,
        form,
        lambda data: UploadImport(kind=ImportJob.Kind.LABELSTUDIO, files={"config": data.get("config")}),
        back=tab_url(pk, "items"),
        choose="Choose a Label Studio export.",
    )
