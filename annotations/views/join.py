"""Joining a study through an invitation link, and the participant's completion page.

``/join/<token>/`` (entry: reads the platform's ids from the URL, signs a returning participant back
in) → ``consent/`` (when the link has consent text) → ``begin/`` (the demographic form, if any, and
a Start button; its POST creates the scoped account) → the study's task pages. Nothing is written
on a GET except the session (a link preview or prefetch never uses up the link). The half-done join
lives in the anonymous session until the account exists. See docs/crowd.md.

The researcher's **preview** of a link (``/studies/<id>/invitations/<id>/preview/``) renders the same
consent and demographic pages, and a sample task, under a banner; it writes nothing, not even the
session.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from annotations import access
from annotations.access import request_user
from annotations.models import Invitation, Participant, Pool, Study
from annotations.presenters import image_views
from annotations.selectors.invitations import InvitationRefused, invitation_check
from annotations.selectors.payments import completion_progress
from annotations.selectors.tasks import question_views, sample_item
from annotations.services.invitations import (
    PlatformIds,
    PreviewOnly,
    ResumeRefused,
    demographic_answers_clean,
    participant_join,
    participant_resume,
    platform_ids_from_query,
    resume_secret_new,
)
from common.errors import ValidationFailed
from protocols.colours import BASIC_COLOURS

SESSION_JOIN = "join"
# Set when a participant signs in through a link; the top bar then shows only their study.
SESSION_PARTICIPANT_STUDY = "participant_study"
# The browser's resume secret (docs/crowd.md, "resuming"): set when a participant joins, sent back only
# to the join links; a participant id that already joined is let back in only with it (or with the
# platform's session id).
RESUME_COOKIE = "workbench_resume"
RESUME_COOKIE_PATH = "/join/"
RESUME_COOKIE_DAYS = 180
REFUSAL_TITLES = {
    "revoked": "This link has been withdrawn",
    "expired": "This link has expired",
    "used_up": "This link has been used up",
    "inactive": "This study is not open",
}


def _invitation(token: str) -> Invitation | None:
    if len(token) > 64:
        return None
    return Invitation.objects.select_related("study").filter(token=token).first()


def _unknown(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "join/refused.html",
        {
            "title": "This link is not valid",
            "reason": "unknown",
            "message": "There is no invitation at this address. Check that the whole link was copied.",
        },
        status=404,
    )


def _refused(request: HttpRequest, exc: InvitationRefused, invitation: Invitation) -> HttpResponse:
    title = REFUSAL_TITLES.get(exc.reason, "This link cannot be used")
    if exc.reason == "inactive" and invitation.study.status == Study.Status.DRAFT:
        title = "This study is not open yet"
    return render(
        request,
        "join/refused.html",
        {
            "title": title,
            "message": exc.message,
            "reason": exc.reason,
        },
        status=exc.status_code,
    )


def _resume_refused(request: HttpRequest, exc: ResumeRefused) -> HttpResponse:
    return render(
        request,
        "join/refused.html",
        {
            "title": "This session belongs to another browser",
            "message": exc.message,
            "reason": exc.reason,
        },
        status=exc.status_code,
    )


def _resume_secret(request: HttpRequest) -> str:
    return str(request.COOKIES.get(RESUME_COOKIE, ""))[:100]


def _keep_resume_secret(response: HttpResponse, secret: str) -> HttpResponse:
    response.set_cookie(
        RESUME_COOKIE,
        secret,
        max_age=RESUME_COOKIE_DAYS * 24 * 3600,
        path=RESUME_COOKIE_PATH,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )
    return response


def _bad_link(request: HttpRequest, message: str) -> HttpResponse:
    return render(
        request,
        "join/refused.html",
        {"title": "This link is incomplete", "message": message, "reason": "bad_parameters"},
        status=400,
    )


def _enter(request: HttpRequest, participant: Participant) -> HttpResponse:
    """Sign the participant's account in (a fresh session) and send them to their study's next item."""
    if request_user(request).pk != participant.user_id:
        login(request, participant.user, backend="django.contrib.auth.backends.ModelBackend")
    request.session.pop(SESSION_JOIN, None)
    request.session[SESSION_PARTICIPANT_STUDY] = participant.study_id
    return redirect("annotate-next", pk=participant.study_id)


def _state(request: HttpRequest, token: str) -> dict[str, Any] | None:
    state = request.session.get(SESSION_JOIN)
    return state if isinstance(state, dict) and state.get("token") == token else None


def _step(request: HttpRequest, token: str) -> tuple[Invitation, dict[str, Any]] | HttpResponse:
    """The invitation and this browser's joining state for a step after the link; else where to go."""
    invitation = _invitation(token)
    if invitation is None:
        return _unknown(request)
    state = _state(request, token)
    if state is None:
        return redirect("join", token=token)  # the step was opened without the link: start at the link
    return invitation, state


def join(request: HttpRequest, token: str) -> HttpResponse:
    """The link itself: check it, read the platform ids, resume a returning participant, or start joining."""
    invitation = _invitation(token)
    if invitation is None:
        return _unknown(request)
    try:
        ids = platform_ids_from_query(platform=invitation.platform, query=request.GET)
    except PreviewOnly as exc:
        return render(request, "join/preview.html", {"invitation": invitation, "message": exc.message})
    except ValidationFailed as exc:
        return _bad_link(request, exc.message)
    user = request_user(request)
    try:
        if user.is_authenticated:
            own = access.participant_for_user(user)
            if (
                own is None
                or own.study_id != invitation.study_id
                or (ids.participant_id and own.participant_id != ids.participant_id)
            ):
                return render(request, "join/signed_in.html", {"invitation": invitation}, status=409)
            invitation_check(invitation, joining=False)
            return _enter(request, own)
        existing = participant_resume(invitation=invitation, ids=ids, resume_secret=_resume_secret(request))
        if existing is not None:
            return _enter(request, existing)
        invitation_check(invitation)
    except InvitationRefused as exc:
        return _refused(request, exc, invitation)
    except ResumeRefused as exc:
        return _resume_refused(request, exc)
    request.session[SESSION_JOIN] = {"token": token, "ids": ids.as_dict(), "consented_at": None}
    return redirect("join-consent" if invitation.consent_text else "join-begin", token=token)


def join_consent(request: HttpRequest, token: str) -> HttpResponse:
    """The study's consent text; agreeing moves on, declining ends here (no account is made)."""
    step = _step(request, token)
    if isinstance(step, HttpResponse):
        return step
    invitation, state = step
    try:
        invitation_check(invitation)
    except InvitationRefused as exc:
        return _refused(request, exc, invitation)
    if not invitation.consent_text:
        return redirect("join-begin", token=token)
    if request.method == "POST":
        if request.POST.get("consent") == "agree":
            state["consented_at"] = timezone.now().isoformat()
            request.session[SESSION_JOIN] = state
            return redirect("join-begin", token=token)
        if request.POST.get("consent") == "decline":
            request.session.pop(SESSION_JOIN, None)
            return render(request, "join/declined.html", {"invitation": invitation})
    return render(request, "join/consent.html", {"invitation": invitation})


def join_begin(request: HttpRequest, token: str) -> HttpResponse:
    """The demographic form (if the link has one) and Start; the POST makes the account and signs it in."""
    step = _step(request, token)
    if isinstance(step, HttpResponse):
        return step
    invitation, state = step
    consented_at = parse_datetime(state["consented_at"]) if state.get("consented_at") else None
    if invitation.consent_text and consented_at is None:
        return redirect("join-consent", token=token)
    errors: dict[str, str] = {}
    answers: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        answers = _posted_demographics(request, invitation)
        secret = _resume_secret(request) or resume_secret_new()
        try:
            participant, _created = participant_join(
                invitation=invitation,
                ids=PlatformIds(**state["ids"]),
                answers=answers,
                consented_at=consented_at,
                resume_secret=secret,
            )
        except InvitationRefused as exc:
            request.session.pop(SESSION_JOIN, None)
            return _refused(request, exc, invitation)
        except ResumeRefused as exc:
            request.session.pop(SESSION_JOIN, None)
            return _resume_refused(request, exc)
        except ValidationFailed as exc:
            errors, status = exc.details or {"": exc.message}, 400
        else:
            return _keep_resume_secret(_enter(request, participant), secret)
    else:
        try:
            invitation_check(invitation)
        except InvitationRefused as exc:
            return _refused(request, exc, invitation)
    fields = [
        {**field, "value": answers.get(field["key"], ""), "error": errors.get(field["key"], "")}
        for field in invitation.demographics
    ]
    return render(
        request,
        "join/begin.html",
        {"invitation": invitation, "fields": fields, "errors": errors},
        status=status,
    )


@login_required
def complete(request: HttpRequest, pk: int) -> HttpResponse:
    """The participant's last page: the completion code and the platform's completion link.

    Shown only once the task pages recorded completion (quota reached or nothing left, with the items
    the invitation requires answered); before that it sends the participant back to work, so the code
    cannot be had by typing this URL.
    """
    study = access.study_get_for_annotator(user=request_user(request), id=pk)
    participant = access.participant_for_user(request_user(request))
    if participant is None or participant.study_id != study.pk:
        raise Http404("this page is for participants who joined through an invitation")
    if participant.completed_at is None:
        return redirect("annotate-next", pk=study.pk)
    progress = completion_progress(participant)
    return render(
        request,
        "join/complete.html",
        {
            "study": study,
            "participant": participant,
            "invitation": participant.invitation,
            "done": progress.answered,
        },
    )


# --- The researcher's preview of a link: the same pages, nothing recorded ---------------------------


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
        answers = _posted_demographics(request, invitation)
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


def _posted_demographics(request: HttpRequest, invitation: Invitation) -> dict[str, str]:
    """The demographic form's answers as posted (``d-<key>`` fields), by the invitation's field keys."""
    return {field["key"]: request.POST.get(f"d-{field['key']}", "") for field in invitation.demographics}
