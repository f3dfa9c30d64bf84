"""Helpers any test may use (no test module imports another test module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rest_framework.test import APIClient

    from annotations.models import User


def client_for(user: User | None) -> APIClient:
    """An API client signed in as ``user`` (None: anonymous).

    DRF takes the forced user and ignores credentials. The client still sends an ``Authorization``
    header, as every real API client does: the request limits (``workbench.middleware``), which run
    before DRF, refuse uploads from a client that sends neither a session nor credentials.
    """
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
        client.credentials(HTTP_AUTHORIZATION="Token forced-by-the-test-client")
    return client


def streamed(response: Any) -> Iterator[bytes]:
    """The body of a streaming response, chunk by chunk (the test client's stubs do not declare it)."""
    chunks: Iterator[bytes] = response.streaming_content
    return chunks
