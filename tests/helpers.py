"""Helpers any test may use (no test module imports another test module)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rest_framework.test import APIClient

    from annotations.models import User


def client_for(user: User | None) -> APIClient:
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client
