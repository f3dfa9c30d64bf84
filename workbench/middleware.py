"""A content-security policy on every response (Django 5.2 has none built in), ``no-store`` on API
answers, domain errors as 404/403 pages, the fence that keeps participant accounts (made by
invitation links) inside their study's annotate pages, and the limits on what a request may carry
(checked before its body is read)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.handlers.exception import response_for_exception
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve

from annotations.access import participant_study_id, token_signs_in
from common.errors import NotAllowed, NotFoundError
from common.file_storage import bucket_origin
from common.request_limits import Refusal, body_refusal, null_character_field

PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

API_CACHE_CONTROL = "private, no-store"


class ContentSecurityPolicyMiddleware:
    """Adds the page policy unless the view set its own (file downloads set a sandbox)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            origin = bucket_origin()
            # Images redirected to presigned URLs load from the bucket (docs/deploy.md, "Object storage").
            response["Content-Security-Policy"] = (
                PAGE_POLICY.replace("img-src 'self'", f"img-src 'self' {origin}") if origin else PAGE_POLICY
            )
        return response


class ApiNoStoreMiddleware:
    """Every answer under ``/api/`` that sets no ``Cache-Control`` of its own gets ``private,
    no-store``: API answers carry task data and presigned URLs (a task's ``direct_url``) that no
    browser or proxy cache should keep. Answers that chose their caching (an item image, a redirect to
    a presigned URL) keep theirs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path_info.startswith("/api/") and not response.has_header("Cache-Control"):
            response["Cache-Control"] = API_CACHE_CONTROL
        return response


class DomainErrorMiddleware:
    """Pages raise the domain's errors as the API does; this turns them into Django's 404 and 403.

    ``NotFoundError`` -> 404, ``NotAllowed`` -> 403, rendered by Django's own handlers (so the error
    templates and ``handler404``/``handler403`` apply). The API never gets here: DRF's exception
    handler (``annotations.api.errors``) answers its errors first.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, NotFoundError):
            return response_for_exception(request, Http404(exception.message))
        if isinstance(exception, NotAllowed):
            return response_for_exception(request, PermissionDenied(exception.message))
        return None


# What an account made by an invitation (a participant) may open: its study's annotate flow and
# sign-out. Everything else the app serves (researcher pages, admin, API, generation, other
# studies) is refused before the view runs. The views still check access themselves: these names
# only let the request reach them (annotations/access.py keeps a participant in its own study).
PARTICIPANT_URL_NAMES = frozenset(
    {
        "annotate-next",
        "annotate-mine",
        "annotate-task",
        "annotate-skip",
        "annotate-skip-undo",
        "annotate-ahead",
        "annotate-reveal",
        "annotate-complete",
        "item-image",
        "item-image-display",
        "join",
        "join-consent",
        "join-begin",
        "logout",
    }
)
# Pages a participant may land on by habit (the top bar, the login redirect): sent to their study.
PARTICIPANT_REDIRECTS = frozenset({"home", "annotate-dashboard"})


class ParticipantScopeMiddleware:
    """Keeps participant accounts (``annotations.models.Participant``) inside their study's annotate pages.

    Costs one indexed query for an annotator's signed-in request to a URL outside the allow-list (none
    for the annotate pages themselves, none for researchers). Tokens are refused to participants by
    ``annotations.api.authentication.WorkbenchTokenAuthentication``.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refused = self._refusal(request)
        return refused if refused is not None else self.get_response(request)

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        user = getattr(request, "user", None)
        if not (user is not None and user.is_authenticated):
            return None  # anonymous (or a token, checked by DRF): the views' own checks apply
        try:
            name = resolve(request.path_info).view_name
        except Resolver404:
            return None
        if name in PARTICIPANT_URL_NAMES:
            return None
        study_id = _participant_study(request)
        if study_id is None:
            return None
        if name in PARTICIPANT_REDIRECTS:
            return redirect("annotate-next", pk=study_id)
        message = "This account was made for one study's tasks; it cannot open this page."
        if request.path_info.startswith("/api/"):
            return JsonResponse({"detail": message}, status=403)
        return render(request, "errors/forbidden.html", {"message": message}, status=403)


def _participant_study(request: HttpRequest) -> int | None:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        # Participant accounts are annotators (services/invitations.py); researchers and admins cost no query.
        return participant_study_id(user.pk) if user.role == user.Role.ANNOTATOR else None
    # A token is read only inside DRF, after this middleware: annotations/api/authentication.py
    # refuses participants' tokens there, in the query that finds the token.
    return None


class RequestLimitsMiddleware:
    """Refuses, from the headers and before anything reads the body, what ``common/request_limits.py``
    decides: a body over the limits (413), a body over a few KB (an upload) from a client who is not
    signed in (401; a page redirects to the sign-in page), and null characters in the path, a query
    parameter or a form field (400 naming it). Sits right after ``AuthenticationMiddleware``: it needs to know
    who is signed in, and Django's CSRF check would parse the body next."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = self._null_characters(request, read_form=False)
        if refusal is None:
            # Under /api/ a valid token counts as signed in (checked from the header: any other
            # Authorization header is anonymous); a page's CSRF check would parse the body, so there
            # only a session does.
            token = request.path_info.startswith("/api/") and "HTTP_AUTHORIZATION" in request.META
            session = request.user.is_authenticated
            refusal = body_refusal(
                request,
                signed_in=lambda: (
                    session or (token and token_signs_in(str(request.META["HTTP_AUTHORIZATION"])))
                ),
            )
            if refusal is None:
                refusal = self._null_characters(request, read_form=session or not token)
        if refusal is None:
            return self.get_response(request)
        return _refused(request, refusal)

    @staticmethod
    def _null_characters(request: HttpRequest, *, read_form: bool) -> Refusal | None:
        where = null_character_field(request, read_form=read_form)
        if where is None:
            return None
        return Refusal(400, f"{where[0].upper()}{where[1:]} contains a null character or invalid Unicode.")


def _refused(request: HttpRequest, refusal: Refusal) -> HttpResponse:
    """The refusal as JSON for the API, the sign-in page for a page's 401, else a short page. (The WSGI
    server, not the app, decides about the connection: gunicorn drains at most 64 KB of an unread
    body before it closes the connection.)"""
    if request.path_info.startswith("/api/"):
        response = JsonResponse({"detail": refusal.message}, status=refusal.status)
        if refusal.status == 401:
            response["WWW-Authenticate"] = 'Token realm="api"'  # as DRF's own 401
        return response
    if refusal.status == 401:
        return redirect_to_login(request.get_full_path())
    return render(request, "errors/refused.html", {"message": refusal.message}, status=refusal.status)
