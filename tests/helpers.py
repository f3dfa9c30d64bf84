"""Helpers any test may use (no test module imports another test module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rest_framework.test import APIClient

    from annotations.models import User


def client_for(user: User | None) -> APIClient:
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def streamed(response: Any) -> Iterator[bytes]:
    """The body of a streaming response, chunk by chunk (the test client's stubs do not declare it)."""
    chunks: Iterator[bytes] = response.streaming_content
    return chunks
