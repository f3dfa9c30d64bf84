"""The study page (its tabs and setup checklist), its settings and the launch of a draft."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.interchange.bucket_addresses import bucket_entries
from annotations.interchange.exports import FORMATS
from annotations.models import Study
from annotations.selectors import studies as selectors
from annotations.services import studies as study_services
from annotations.views.forms import EnrollForm, ShareForm, StudySettingsForm, UploadForm
from annotations.views.pages import form_problems, study_for_page
from annotations.views.studies.shared import to_tab
from common.errors import WorkbenchError


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
    return to_tab(pk, "overview")


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
        return to_tab(pk, "settings")
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        study_services.study_update(study=study, **form.cleaned_data)
    except WorkbenchError as exc:
        messages.error(request, f"Settings not saved: {exc.message}.")
    else:
        messages.success(request, "Settings saved.")
    return to_tab(pk, "settings")
