"""Researcher pages for studies: create, look at, import into, export, share, enrol.

Views are thin: forms check shape, services do the work, ``access`` decides who may do it.
"""

from __future__ import annotations

import json
import mimetypes
import re
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    JsonResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.downloads import raw_requested, stored_file_response, streaming_export
from annotations.interchange.bucket_addresses import bucket_entries
from annotations.interchange.exports import (
    FILE_FORMATS,
    FORMATS,
    export_filename,
    export_job_create,
    export_refusal,
    export_size,
)
from annotations.interchange.import_jobs import (
    import_job_cancel,
    import_job_from_address,
    import_job_from_uploads,
    import_job_summary,
    import_upload,
    items_import_uploads,
    labelstudio_new_study,
    uploads_inline,
)
from annotations.interchange.import_kinds import items_report
from annotations.models import ImportJob, Item, Study
from annotations.protocols.manifests import FORMATS as MANIFEST_FORMATS
from annotations.protocols.manifests import example_items, manifest_template
from annotations.protocols.papers import paper_of, preset_label
from annotations.protocols.schema import Protocol, ProtocolError, list_presets, load_preset
from annotations.selectors import studies as selectors
from annotations.selectors import tasks as task_selectors
from annotations.services import studies as study_services
from annotations.views.forms import (
    AnnotationUploadForm,
    BulkEnrollForm,
    EnrollForm,
    ItemUploadForm,
    LabelStudioCreateForm,
    LabelStudioUploadForm,
    ShareForm,
    StudyCreateForm,
    StudySettingsForm,
    UnenrollForm,
    UploadForm,
)
from annotations.views.pages import form_problems, import_outcome_message, item_image_page, study_for_page
from common.errors import WorkbenchError


@login_required
def study_create(request: HttpRequest) -> HttpResponse:
    if not request_user(request).is_researcher:
        return render(
            request, "errors/forbidden.html", {"message": "Only researchers create studies."}, status=403
        )
    form = StudyCreateForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["preset"]:
                protocol = study_services.protocol_resolve(preset=data["preset"])
            else:
                upload = data["protocol_file"]
                text = upload.read().decode("utf-8", errors="strict")
                protocol = study_services.protocol_resolve(protocol_text=text, source=upload.name)
            study = study_services.study_create(
                owner=request_user(request),
                name=data["name"],
                description=data["description"],
                protocol=protocol,
                preset=data["preset"] or "",
                overlap=data["overlap"],
                lease_minutes=data["lease_minutes"],
                status=Study.Status.DRAFT,
            )
        except UnicodeDecodeError:
            form.add_error("protocol_file", "The protocol file is not UTF-8 text.")
        except (WorkbenchError, ProtocolError) as exc:
            form.add_error("protocol_file" if not data["preset"] else None, str(getattr(exc, "message", exc)))
        else:
            messages.success(request, f"Study “{study.name}” created.")
            return redirect("study-detail", pk=study.pk)
    return render(
        request,
        "studies/create.html",
        {"form": form, "previews": _preset_previews(), "selected": form["preset"].value()},
    )


def _preset_previews() -> list[dict[str, Any]]:
    """Each preset as the create page previews it: its questions for an example item (two when the
    item's metadata selects other questions), drawn from the task page's question views."""
    previews = []
    for key in list_presets():
        protocol = load_preset(key)
        study = Study(protocol=protocol.to_dict())
        examples = []
        for example in example_items(protocol):
            item = Item(study=study, text=example["text"] or "", metadata=example["metadata"])
            selecting = {
                q.applies_if["field"]: example["metadata"].get(q.applies_if["field"])
                for q in protocol.questions
                if q.applies_if
            }
            examples.append(
                {
                    "selecting": selecting,
                    "questions": task_selectors.question_views(
                        study=study, item=item, expert=True, answers={}
                    ),
                }
            )
        previews.append(
            {
                "key": key,
                "label": preset_label(protocol),
                "protocol": protocol,
                "paper": paper_of(protocol),
                "examples": examples,
                "n_questions": len(protocol.questions),
            }
        )
    return previews


@login_required
@require_POST
def study_create_labelstudio(request: HttpRequest) -> HttpResponse:
    """A new study from a Label Studio export and its labeling config (the protocol)."""
    if not request_user(request).is_researcher:
        return render(
            request, "errors/forbidden.html", {"message": "Only researchers create studies."}, status=403
        )
    form = LabelStudioCreateForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, f"No study was created. {form_problems(form)}")
        return redirect("study-create")
    try:
        outcome = labelstudio_new_study(
            user=request_user(request),
            name=form.cleaned_data["name"],
            upload=form.cleaned_data["file"],
            config=form.cleaned_data.get("config"),
        )
    except WorkbenchError as exc:
        messages.error(request, f"No study was created. {exc.message}")
        return redirect("study-create")
    if outcome.job is not None:
        job = outcome.job
        messages.info(
            request,
            f"Study “{job.study.name}” created from the labeling config; its Label Studio tasks are "
            f"imported in the background (import {job.pk}: its progress shows under Imports).",
        )
        return redirect("study-items", pk=job.study_id)
    report = outcome.report or {}
    messages.success(
        request,
        f"Study “{report['study_name']}” created from {report['tasks']} Label Studio tasks: "
        f"{report['answers'].get('created', 0)} answers, {report['answers'].get('skips', 0)} skips.",
    )
    return redirect("study-detail", pk=report["study"])


def _to_tab(pk: int, tab: str) -> HttpResponse:
    """Back to one tab of the study page (its ``#fragment``)."""
    return redirect(reverse("study-detail", kwargs={"pk": pk}) + f"#{tab}")


@login_required
def study_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The study page: tabs (sections without JavaScript) and the setup checklist on the Overview."""
    study = study_for_page(request, pk, researcher=True)
    can_write = access.study_can_write(request_user(request), study)
    context = {
        "study": study,
        "protocol": study.protocol_obj,
        "summary": selectors.study_summary(study),
        "setup": selectors.study_setup(study),
        "launch_refusal": selectors.launch_refusal(study) if study.status == Study.Status.DRAFT else "",
        "can_write": can_write,
        "is_owner": request_user(request).is_admin or study.owner_id == request_user(request).pk,
        "enrollments": study.enrollments.select_related("user").order_by("user__username"),
        "export_jobs": study.export_jobs.filter(requested_by=request_user(request))[:5],
        # The bucket export form only where this study and account may write somewhere.
        "buckets": [
            str(entry)
            for entry in bucket_entries(study_id=study.pk, user_id=request_user(request).pk, write=True)
        ],
        # Invitation links are secrets: only those who may change the study see them (as on their page).
        "invitations": study.invitations.order_by("-created_at", "-id")[:20] if can_write else [],
        "upload_form": UploadForm(),
        "enroll_form": EnrollForm(),
        "share_form": ShareForm(),
        "settings_form": StudySettingsForm(
            initial={
                "name": study.name,
                "description": study.description,
                "overlap": study.overlap,
                "lease_minutes": study.lease_minutes,
                "status": study.status,
            }
        ),
        "formats": FORMATS,
    }
    return render(request, "studies/detail.html", context)


@login_required
@require_POST
def study_launch(request: HttpRequest, pk: int) -> HttpResponse:
    """Launch a draft: refused, with the reason, until it has items and someone to judge them."""
    study = study_for_page(request, pk, researcher=True, write=True)
    try:
        study_services.study_launch(study=study)
    except WorkbenchError as exc:
        messages.error(request, f"Not launched: {exc.message}.")
    else:
        messages.success(request, "Study launched: annotators and invitation links now get items.")
    return _to_tab(pk, "overview")


@login_required
def enroll_candidates(request: HttpRequest, pk: int) -> JsonResponse:
    """Accounts this researcher may enrol in the study whose username or name starts with ``q`` (at most
    ``ENROLL_SUGGESTIONS``; username and name only), for the People tab's autocomplete."""
    study = study_for_page(request, pk, researcher=True, write=True)
    prefix = request.GET.get("q", "")[:150].strip()
    rows = access.enroll_candidates(by=request_user(request), study=study, prefix=prefix)
    response = JsonResponse({"results": rows})
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def study_settings(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    form = StudySettingsForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "Settings not saved: " + form_problems(form),
        )
        return _to_tab(pk, "settings")
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        study_services.study_update(study=study, **form.cleaned_data)
    except WorkbenchError as exc:
        messages.error(request, f"Settings not saved: {exc.message}.")
    else:
        messages.success(request, "Settings saved.")
    return _to_tab(pk, "settings")


def _import_annotations(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    form = AnnotationUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        problem = form_problems(form, "file", "Choose a file to import.")
        messages.error(request, f"Nothing was imported. {problem}")
        return _to_tab(pk, "items")
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        coco = form.cleaned_data.get("format") == "coco"
        if coco and not form.cleaned_data.get("question"):
            raise WorkbenchError("a COCO import needs the boxes question")
        outcome = import_upload(
            study=study,
            user=request_user(request),
            kind=ImportJob.Kind.COCO if coco else ImportJob.Kind.ANNOTATIONS,
            upload=form.cleaned_data["file"],
            options={
                "question": form.cleaned_data.get("question") or "",
                "annotator": form.cleaned_data.get("annotator") or "",
                "kind": form.cleaned_data.get("kind") or "",
            }
            if coco
            else {},
        )
    except WorkbenchError as exc:
        messages.error(request, f"Nothing was imported. {exc.message}")
        return _to_tab(pk, "items")
    if import_outcome_message(request, outcome):
        return redirect("study-items", pk=pk)
    return _to_tab(pk, "items")


@login_required
@require_POST
def study_import_items(request: HttpRequest, pk: int) -> HttpResponse:
    """Items from one ``file`` (a zip, a manifest) or several ``files`` (images, a dropped folder;
    ``static/js/upload.js`` sends one request per batch). A request that asks for JSON (the upload
    script) gets the report or the refusal as JSON; a form post gets messages and goes back to the
    items page (``next=items``) or the study page. Every refusal links the manifest template."""
    study = study_for_page(request, pk, researcher=True)
    wants_json = request.headers.get("Accept", "").startswith("application/json")
    back = redirect("study-items", pk=pk) if request.POST.get("next") == "items" else _to_tab(pk, "items")
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
            answer = {"ok": True, "job": _import_job_json(job), "templates": templates}
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


def _import_job_json(job: ImportJob) -> dict[str, Any]:
    return {
        "id": job.pk,
        "kind": job.kind,
        "kind_label": job.get_kind_display(),
        "label": job.label,
        "summary": import_job_summary(job),
        "status": job.status,
        "error": job.error,
        "report": job.report,
        "worker_note": job.worker_note,
        "status_url": reverse("study-import-job", args=[job.study_id, job.pk]),
        "cancel_url": reverse("study-import-job-cancel", args=[job.study_id, job.pk]),
    }


@login_required
def import_job_status(request: HttpRequest, pk: int, job_id: int) -> JsonResponse:
    """An import job's status and, once done, its report (polled by the items page)."""
    study = study_for_page(request, pk, researcher=True)
    job = study.import_jobs.filter(pk=job_id, requested_by=request_user(request)).first()
    if job is None:
        raise Http404("no such import")
    return JsonResponse(_import_job_json(job))


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
        return JsonResponse(_import_job_json(job))
    messages.info(request, f"Import {job.pk}: {job.get_status_display().lower()}.")
    return redirect("study-items", pk=pk)


@login_required
def study_import_template(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The manifest template of this study's protocol (``annotations/protocols/manifests.py``)."""
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


@login_required
@require_POST
def study_import_annotations(request: HttpRequest, pk: int) -> HttpResponse:
    return _import_annotations(request, pk)


@login_required
@require_POST
def study_import_labelstudio(request: HttpRequest, pk: int) -> HttpResponse:
    """A Label Studio export (.json, or a .zip with its config and images) into this study."""
    study = study_for_page(request, pk, researcher=True)
    form = LabelStudioUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        problem = form_problems(form, "file", "Choose a Label Studio export.")
        messages.error(request, f"Nothing was imported. {problem}")
        return _to_tab(pk, "items")
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        outcome = import_upload(
            study=study,
            user=request_user(request),
            kind=ImportJob.Kind.LABELSTUDIO,
            upload=form.cleaned_data["file"],
            files={"config": form.cleaned_data.get("config")},
        )
    except WorkbenchError as exc:
        messages.error(request, f"Nothing was imported. {exc.message}")
        return _to_tab(pk, "items")
    if import_outcome_message(request, outcome):
        return redirect("study-items", pk=pk)
    return _to_tab(pk, "items")


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
        return _to_tab(pk, "export")
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
        return _to_tab(pk, "export")
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


@login_required
@require_POST
def study_enroll(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    form = EnrollForm(request.POST)
    by = request_user(request)
    if form.is_valid():
        if not access.study_can_write(by, study):
            messages.error(request, "You may read this study but not change it.")
        else:
            try:
                user = access.enrollable_account_get(by=by, username=form.cleaned_data["username"])
                study_services.enrollment_add(study=study, user=user, pool=form.cleaned_data["pool"], by=by)
            except WorkbenchError as exc:
                messages.error(request, exc.message)
            else:
                messages.success(
                    request, f"{user.username} is enrolled in the {form.cleaned_data['pool']} pool."
                )
    else:
        messages.error(request, f"No one was enrolled. {form_problems(form)}")
    return _to_tab(pk, "people")


@login_required
@require_POST
def study_enroll_bulk(request: HttpRequest, pk: int) -> HttpResponse:
    """Enrol several accounts (one per line, or separated by commas or spaces), all or none."""
    study = study_for_page(request, pk, researcher=True)
    form = BulkEnrollForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No one was enrolled. {form_problems(form)}")
        return _to_tab(pk, "people")
    names = re.split(r"[\s,;]+", form.cleaned_data["usernames"])
    try:
        enrolled = study_services.enrollments_add_many(
            study=study, usernames=names, pool=form.cleaned_data["pool"], by=request_user(request)
        )
    except WorkbenchError as exc:
        messages.error(request, f"{exc.message[:1].upper()}{exc.message[1:]}.")
    else:
        messages.success(
            request,
            f"{len(enrolled)} account{pluralize(len(enrolled))} enrolled in the "
            f"{form.cleaned_data['pool']} pool: {', '.join(e.user.username for e in enrolled)}.",
        )
    return _to_tab(pk, "people")


@login_required
@require_POST
def study_unenroll(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    form = UnenrollForm(request.POST)
    # Looked up among this study's enrolments only: whether an account exists elsewhere stays unsaid.
    user = selectors.enrolled_account(study, form.cleaned_data["username"] if form.is_valid() else "")
    try:
        if user is None:
            raise WorkbenchError("No such account is enrolled here.")
        released = study_services.enrollment_remove(study=study, user=user, by=request_user(request))
    except WorkbenchError as exc:
        messages.error(request, f"Not unenrolled: {exc.message}.")
    else:
        back = f" {released} item{pluralize(released)} they held went back to the queue." if released else ""
        messages.success(
            request,
            f"{user.username} is unenrolled: they get no more items of this study; their answers stay.{back}",
        )
    return _to_tab(pk, "people")


@login_required
@require_POST
def study_share(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    form = ShareForm(request.POST)
    if form.is_valid():
        try:
            access.study_get_for_owner(user=request_user(request), id=study.pk)
            other = study_services.study_share(study=study, username=form.cleaned_data["username"])
        except WorkbenchError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Shared with {other.username}.")
    return _to_tab(pk, "people")


@login_required
def study_items(request: HttpRequest, pk: int) -> HttpResponse:
    """The items grid with each item's provenance and metadata, and the upload (``static/js/upload.js``).

    Filters (GET, each checked: a value the study's items do not have is refused with a message and
    ignored): ``condition``, ``model``; ``blank=1`` (``0``) keeps the items with (without) a blank or
    single-colour image, as flagged at import. Paginated, 48 a page; the links keep the filters."""
    study = study_for_page(request, pk, researcher=True)
    conditions, models = selectors.items_filter_choices(study)
    problems = []
    chosen: dict[str, str] = {}
    for name, allowed in (("condition", conditions), ("model", models)):
        value = request.GET.get(name, "")
        if value and value not in allowed:
            problems.append(f"No item of this study has the {name} “{value}”; showing every {name}.")
        elif value:
            chosen[name] = value
    blank_raw = request.GET.get("blank", "")
    blank = {"1": True, "0": False}.get(blank_raw)
    if blank_raw and blank is None:
        problems.append("The blank filter is 1 (only blank) or 0 (without blank).")
    if blank is not None:
        chosen["blank"] = blank_raw
    queryset = selectors.items_page(study, blank=blank)
    if "condition" in chosen:
        queryset = queryset.filter(condition=chosen["condition"])
    if "model" in chosen:
        queryset = queryset.filter(model_name=chosen["model"])
    page = Paginator(queryset, 48).get_page(request.GET.get("page"))
    return render(
        request,
        "studies/items.html",
        {
            "study": study,
            "page": page,
            "cards": [(item, _item_details(item)) for item in page],
            "condition": chosen.get("condition", ""),
            "model": chosen.get("model", ""),
            "blank": chosen.get("blank", ""),
            "conditions": conditions,
            "models": models,
            "problems": problems,
            # The bucket import form only where this study and account may read somewhere.
            "buckets": [
                str(entry) for entry in bucket_entries(study_id=study.pk, user_id=request_user(request).pk)
            ],
            "n_blank": selectors.blank_items_count(study),
            "filters": ("&" + urlencode(chosen)) if chosen else "",
            "without_blank": urlencode({k: v for k, v in chosen.items() if k != "blank"}),
            "can_write": access.study_can_write(request_user(request), study),
            "upload_limit": settings.WORKBENCH_MAX_UPLOAD_BYTES,
            "import_jobs": [
                _import_job_json(job)
                for job in study.import_jobs.filter(requested_by=request_user(request))[:5]
            ],
            "templates": {fmt: reverse("study-import-template", args=[pk, fmt]) for fmt in MANIFEST_FORMATS},
        },
        status=400 if problems else 200,
    )


def _item_details(item: Item) -> list[tuple[str, str]]:
    """What an item carries, as (name, text) rows for its card: seed, then every metadata field (lists
    joined, objects as JSON, long values cut); the template escapes them."""
    rows = [("seed", str(item.seed))] if item.seed is not None else []
    for key, value in (item.metadata or {}).items():
        if isinstance(value, list):
            text = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = json.dumps(value, ensure_ascii=False)
        else:
            text = str(value)
        rows.append((str(key), text if len(text) <= 200 else text[:199] + "…"))
    return rows


@login_required
def item_image(request: HttpRequest, pk: int, position: int) -> HttpResponseBase:
    """An item's image file, to users who may see the item; sandboxed and cached privately."""
    return item_image_page(request, pk, position, display=False)
