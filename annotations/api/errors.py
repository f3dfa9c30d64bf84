"""One exception handler: domain errors become 4xx responses with a clear message."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from common.checked_input import id_from_text
from common.errors import ValidationFailed, WorkbenchError
from protocols.answers import AnswerError, SubmissionError
from protocols.schema import ProtocolError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, WorkbenchError):
        body: dict[str, Any] = {"detail": exc.message}
        if isinstance(exc, ValidationFailed) and exc.details:
            body["errors"] = exc.details
        return Response(body, status=exc.status_code)
    if isinstance(exc, ProtocolError):
        return Response({"detail": str(exc), "line": exc.line, "field": exc.path}, status=400)
    if isinstance(exc, SubmissionError):
        return Response({"detail": "some answers are not valid", "errors": exc.errors}, status=400)
    if isinstance(exc, AnswerError):
        return Response({"detail": str(exc), "errors": {exc.question_key: exc.message}}, status=400)
    if isinstance(exc, OverflowError) and _id_too_large(context):
        # A detail route's id beyond what the database stores: no row has it (docs/security.md).
        return Response({"detail": "Not found."}, status=404)
    return drf_exception_handler(exc, context)


def _id_too_large(context: dict[str, Any]) -> bool:
    """Does the URL carry a whole number id that no database row can have?"""
    view = context.get("view")
    kwargs = getattr(view, "kwargs", None) or {}
    return any(
        str(value).isascii() and str(value).isdigit() and id_from_text(value) is None
        for value in kwargs.values()
    )
