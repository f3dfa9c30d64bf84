"""What a request may carry, decided from its headers before anything reads its body (docs/security.md,
"Request and upload size"), and which parts of it hold a null character.

``workbench.middleware.RequestLimitsMiddleware`` asks these in order and answers the refusal:

- ``body_refusal``: a body declared larger than the limit (``413``): a multipart upload may be
  ``WORKBENCH_MAX_UPLOAD_MB`` plus ``UPLOAD_FORM_OVERHEAD``; any other body
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``. A client who is not signed in (no session; for the API, no
  valid token: a ``Basic`` or made-up ``Authorization`` header counts for nothing) may send no body
  over ``WORKBENCH_MAX_ANONYMOUS_BODY_KB`` (the sign-in and join forms are far smaller; no upload
  is): ``401``. Before this check, Django's CSRF check
  parsed an anonymous 1 GB upload to a temporary file before the view could redirect to sign-in.
- ``null_character_field``: the path, a query parameter or a form field holding ``\\u0000`` (PostgreSQL
  cannot store it; a lookup with one fails): ``400`` naming the parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, QueryDict

from common.checked_input import text_problem

UPLOAD_FORM_OVERHEAD = 1024 * 1024  # multipart boundaries and the form's other fields
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Refusal:
    """A request refused before its body is read: the status to answer and a message to show."""

    status: int
    message: str


def declared_length(request: HttpRequest) -> int | None:
    """The body's declared size (``Content-Length``); 0 when absent; None when it is not a number."""
    raw = request.META.get("CONTENT_LENGTH") or "0"
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


def is_multipart(request: HttpRequest) -> bool:
    return str(request.META.get("CONTENT_TYPE", "")).lower().startswith("multipart/")


def body_limit(request: HttpRequest) -> int | None:
    """The largest body this request may declare (None: no limit set)."""
    if is_multipart(request):
        return settings.WORKBENCH_MAX_UPLOAD_BYTES + UPLOAD_FORM_OVERHEAD
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.0f} MB" if size >= 1024 * 1024 else f"{size // 1024} KB"


def body_refusal(request: HttpRequest, *, signed_in: Callable[[], bool]) -> Refusal | None:
    """Why this request's body must not be read (see the module docstring), or None.

    ``signed_in``: asked only for a body over the anonymous limit: a session user, or for the API a
    valid token (checked from the header; any other ``Authorization`` header is anonymous).
    """
    length = declared_length(request)
    if length is None:
        return Refusal(400, "The Content-Length header is not a number.")
    if length == 0:  # no body, or a chunked one, which Django does not read (WSGI gives it no length)
        return None
    if (
        request.method in BODY_METHODS
        and length > settings.WORKBENCH_MAX_ANONYMOUS_BODY_BYTES
        and not signed_in()
    ):
        limit_text = _megabytes(settings.WORKBENCH_MAX_ANONYMOUS_BODY_BYTES)
        return Refusal(401, f"Sign in before uploading files or sending more than {limit_text}.")
    limit = body_limit(request)
    if limit is not None and length > limit:
        what = "An upload" if is_multipart(request) else "A request body"
        return Refusal(413, f"{what} may be at most {_megabytes(limit)}; this one is {_megabytes(length)}.")
    return None


def _first_null(where: str, pairs: Iterable[tuple[str, str]]) -> str | None:
    for key, value in pairs:
        if text_problem(key) is not None:
            return f"a {where} name"
        if isinstance(value, str) and text_problem(value) is not None:
            return f"the {where} {key!r}"
    return None


def _pairs(data: QueryDict) -> Iterable[tuple[str, str]]:
    for key, values in data.lists():
        for value in values:
            yield key, value


def null_character_field(request: HttpRequest, *, read_form: bool) -> str | None:
    """Which part of the request holds a null character or a lone surrogate ("the path", "the query
    parameter 'source'", "the form field 'reason'"), or None. ``read_form``: also look at the form
    fields (parses the body; only once ``body_refusal`` let it through)."""
    if text_problem(request.path_info) is not None:
        return "the path"
    found = _first_null("query parameter", _pairs(request.GET))
    if found is None and read_form and request.method == "POST":
        found = _first_null("form field", _pairs(request.POST))
        if found is None:
            found = next(
                (
                    f"the name of the uploaded file {field!r}"
                    for field, upload in request.FILES.items()
                    if isinstance(upload, UploadedFile) and text_problem(upload.name or "") is not None
                ),
                None,
            )
    return found
