"""Helpers any test may use (no test module imports another test module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rest_framework.test import APIClient

    from annotations.models import User


def client_for(user: User | None) -> APIClient:
    """An API client signed in as ``user`` (None: anonymous).

    DRF takes the forced user and ignores credentials. The client still sends the user's real token,
    as every real API client does: the request limits (``workbench.middleware``), which run before
    DRF, refuse uploads from a client without a session or a valid token.
    """
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        from rest_framework.authtoken.models import Token

        client.force_authenticate(user)
        token, _created = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def streamed(response: Any) -> Iterator[bytes]:
    """The body of a streaming response, chunk by chunk (the test client's stubs do not declare it)."""
    chunks: Iterator[bytes] = response.streaming_content
    return chunks


def metrics_json(**kwargs: Any) -> dict[str, Any]:
    """``findings_report(**kwargs)`` as the metrics API gives it (its JSON)."""
    from findings.report import findings_report

    return findings_report(**kwargs).to_json()
