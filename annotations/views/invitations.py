"""Researcher pages for crowd work: invitation links (create, list, revoke) and payment records (CSV).

Invitation links are secrets, so only those who may change the study see or make them; payment
records are shown to the study's researchers (the same rule as the progress page).
"""

from __future__ import annotations

from datetime import timedelta

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
from annotations.models import Invitation
from annotations.selectors.invitations import invitation_state
from annotations.selectors.payments import PAYMENT_COLUMNS, payment_rows
from annotations.services.invitations import (
    PLATFORM_PARAMETERS,
    attributes_from_text,
    demographics_from_text,
    invitation_create,
    invitation_revoke,
)
from annotations.services.pool_invitations import invitations_per_pool
from annotations.views.forms import InvitationForm, PoolInvitationsForm
from annotations.views.pages import form_problems, study_for_page
from common.errors import WorkbenchError
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
                    attributes=attributes_from_text(data["attributes"]),
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
        request,
        "invitations/study.html",
        {
            "study": study,
            "form": form,
            "rows": rows,
            # One Prolific link per rater pool, where the study sets pool quotas (Overlap tab).
            "pool_form": PoolInvitationsForm(prefix="pool") if study.rater_pool_quotas else None,
            "pool_quotas": sorted((study.rater_pool_quotas or {}).items()),
        },
        status=status,
    )


@login_required
@require_POST
def pool_invitations_create(request: HttpRequest, pk: int) -> HttpResponse:
    """Make one Prolific link per rater pool (``services.pool_invitations``), saying how each was sized."""
    study = study_for_page(request, pk, researcher=True, write=True)
    form = PoolInvitationsForm(request.POST, prefix="pool")
    if not form.is_valid():
        messages.error(request, f"No links made: {form_problems(form)}.")
        return redirect("study-invitations", pk=study.pk)
    data = form.cleaned_data
    try:
        made = invitations_per_pool(
            study=study,
            created_by=request_user(request),
            expires_at=timezone.now() + timedelta(days=data["valid_days"]),
            items_per_participant=data["items_per_participant"],
            completion_code=data["completion_code"],
            consent_text=data["consent_text"],
            estimated_minutes=data["estimated_minutes"],
        )
    except WorkbenchError as exc:
        messages.error(request, f"No links made: {exc.message}.")
    else:
        messages.success(
            request,
            f"{len(made)} Prolific links made, one per pool: " + "; ".join(m.sizing for m in made) + ".",
        )
    return redirect("study-invitations", pk=study.pk)


@login_required
@require_POST
def invitation_revoke_view(request: HttpRequest, pk: int, invitation_id: int) -> HttpResponse:
    invitation = access.invitation_get_for_user(user=request_user(request), study_id=pk, id=invitation_id)
    invitation_revoke(invitation=invitation)
    messages.success(request, "The link is withdrawn: nobody can join or come back through it.")
    return redirect("study-invitations", pk=pk)


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
