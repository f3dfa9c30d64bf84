"""Researcher pages for crowd work: invitation links (create, list, revoke) and payment records (CSV).

Invitation links are secrets, so only those who may change the study see or make them; payment
records are shown to the study's researchers (the same rule as the progress page).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Invitation, Pool
from annotations.presenters import image_views
from annotations.protocols.colours import BASIC_COLOURS
from annotations.selectors.payments import PAYMENT_COLUMNS, payment_rows
from annotations.selectors.tasks import question_views, sample_item
from annotations.services.invitations import (
    PLATFORM_PARAMETERS,
    demographic_answers_clean,
    demographics_from_text,
    invitation_create,
    invitation_revoke,
    invitation_state,
)
from annotations.views.forms import InvitationForm
from annotations.views.pages import study_for_page
from common.errors import ValidationFailed, WorkbenchError
from common.spreadsheet import csv_lines


def invitation_link(request: HttpRequest, invitation: Invitation) -> str:
    return request.build_absolute_uri(reverse("join", kwargs={"token": invitation.token}))


@login_required
def study_invitations(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the study's invitation links and a form for a new one. POST: create one."""
    study = study_for_page(request, pk, researcher=True, write=True)
    form = InvitationForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            try:
                invitation = invitation_create(
                    study=study,
                    created_by=request_user(request),
                    label=data["label"],
                    platform=data["platform"],
                    pool=data["pool"],
                    expires_at=timezone.now() + timedelta(days=data["valid_days"]),
                    max_uses=data["max_uses"],
                    items_per_participant=data["items_per_participant"],
                    min_answered_items=data["min_answered_items"],
                    completion_code=data["completion_code"],
                    completion_url=data["completion_url"],
                    consent_text=data["consent_text"],
                    estimated_minutes=data["estimated_minutes"],
                    demographics=demographics_from_text(data["demographics"]),
                )
            except WorkbenchError as exc:
                field = next(iter(getattr(exc, "details", {}) or {}), None)
                form.add_error(field if field in form.fields else None, exc.message)
            else:
                messages.success(request, f"Invitation link created: {invitation_link(request, invitation)}")
                return redirect("study-invitations", pk=study.pk)
        status = 400
    now = timezone.now()
    invitations = study.invitations.annotate(joined=Count("participants")).order_by("-created_at", "-id")
    rows = [
        {
            "invitation": invitation,
            "state": invitation_state(invitation, now),
            "link": invitation_link(request, invitation),
            "parameters": list(PLATFORM_PARAMETERS.get(invitation.platform, {}).values()),
        }
        for invitation in invitations
    ]
    return render(
        request, "invitations/study.html", {"study": study, "form": form, "rows": rows}, status=status
    )


@login_required
@require_POST
def invitation_revoke_view(request: HttpRequest, pk: int, invitation_id: int) -> HttpResponse:
    invitation = access.invitation_get_for_user(user=request_user(request), study_id=pk, id=invitation_id)
    invitation_revoke(invitation=invitation)
    messages.success(request, "The link is withdrawn: nobody can join or come back through it.")
    return redirect("study-invitations", pk=pk)


def _preview_invitation(request: HttpRequest, pk: int, invitation_id: int) -> Invitation:
    return access.invitation_get_for_user(user=request_user(request), study_id=pk, id=invitation_id)


def _preview_urls(pk: int, invitation_id: int) -> dict[str, str]:
    kwargs = {"pk": pk, "invitation_id": invitation_id}
    return {
        "consent_url": reverse("study-invitation-preview", kwargs=kwargs),
        "begin_url": reverse("study-invitation-preview-begin", kwargs=kwargs),
        "task_url": reverse("study-invitation-preview-task", kwargs=kwargs),
        "exit_url": reverse("study-invitations", kwargs={"pk": pk}) + f"#invitation-{invitation_id}",
    }


@login_required
def invitation_preview_consent(request: HttpRequest, pk: int, invitation_id: int) -> HttpResponse:
    """The participant's consent page as they would see it, for the researcher; nothing is recorded
    (no session state, no account, no participant: the preview pages only read)."""
    invitation = _preview_invitation(request, pk, invitation_id)
    urls = _preview_urls(pk, invitation_id)
    if not invitation.consent_text:
        return redirect(urls["begin_url"])
    return render(request, "join/consent.html", {"invitation": invitation, "preview": True, **urls})


@login_required
def invitation_preview_begin(request: HttpRequest, pk: int, invitation_id: int) -> HttpResponse:
    """The demographic form as a participant sees it; a POST checks the answers with the participant's
    own rules (``demographic_answers_clean``) and stores nothing."""
    invitation = _preview_invitation(request, pk, invitation_id)
    urls = _preview_urls(pk, invitation_id)
    errors: dict[str, str] = {}
    answers: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        answers = {
            field["key"]: request.POST.get(f"d-{field['key']}", "") for field in invitation.demographics
        }
        try:
            demographic_answers_clean(fields=invitation.demographics, data=answers)
        except ValidationFailed as exc:
            errors, status = exc.details or {"": exc.message}, 400
        else:
            return redirect(urls["task_url"])
    fields = [
        {**field, "value": answers.get(field["key"], ""), "error": errors.get(field["key"], "")}
        for field in invitation.demographics
    ]
    return render(
        request,
        "join/begin.html",
        {"invitation": invitation, "fields": fields, "errors": errors, "preview": True, **urls},
        status=status,
    )


@login_required
def invitation_preview_task(request: HttpRequest, pk: int, invitation_id: int) -> HttpResponse:
    """A sample task page (the study's first item) as a participant of this link would see it; its
    form cannot be submitted and no assignment is made."""
    invitation = _preview_invitation(request, pk, invitation_id)
    study = invitation.study
    item = sample_item(study)
    context: dict[str, Any] = {
        "invitation": invitation,
        "study": study,
        "protocol": study.protocol_obj,
        "item": item,
        "preview": True,
        **_preview_urls(pk, invitation_id),
    }
    if item is not None:
        context["images"] = image_views(item)
        context["questions"] = question_views(
            study=study, item=item, expert=invitation.pool == Pool.EXPERT, answers={}
        )
        context["colours"] = BASIC_COLOURS
    return render(request, "join/preview_task.html", context)


@login_required
def payments_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """Payment records as CSV, one row per person (see ``payment_selectors``)."""
    study = study_for_page(request, pk, researcher=True)
    response = StreamingHttpResponse(
        csv_lines(payment_rows(study), PAYMENT_COLUMNS), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-payments.csv"'
    response["Cache-Control"] = "no-store"
    return response
