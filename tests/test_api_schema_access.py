"""The OpenAPI schema and its two pages are for signed-in accounts (docs/security.md, "API schema")."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def test_the_schema_needs_a_session_or_a_token(owner) -> None:
    anonymous = Client()
    response = anonymous.get("/api/schema/")
    assert response.status_code == 401 and b"/api/studies/" not in response.content
    for page in ("/api/docs/", "/api/redoc/"):
        answer = anonymous.get(page)
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/"), page
    assert client_for(owner).get("/api/schema/").status_code == 200
    signed_in = Client()
    signed_in.force_login(owner)
    assert b"/api/studies/" in signed_in.get("/api/schema/").content
    assert signed_in.get("/api/docs/").status_code == 200
