"""The study page's People tab: enrolling accounts (one, several, the autocomplete), unenrolling, sharing."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.selectors import studies as selectors
from annotations.services import studies as study_services
from annotations.views.forms import BulkEnrollForm, EnrollForm, ShareForm, UnenrollForm
from annotations.views.pages import form_problems, study_for_page
from annotations.views.studies.shared import to_tab
from common.errors import WorkbenchError


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
    return to_tab(pk, "people")


@login_required
@require_POST
def study_enroll_bulk(request: HttpRequest, pk: int) -> HttpResponse:
    """Enrol several accounts (one per line, or separated by commas or spaces), all or none."""
    study = study_for_page(request, pk, researcher=True)
    form = BulkEnrollForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"No one was enrolled. {form_problems(form)}")
        return to_tab(pk, "people")
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
    return to_tab(pk, "people")


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
    return to_tab(pk, "people")


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
    return to_tab(pk, "people")
