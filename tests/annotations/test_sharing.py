"""Sharing a study tells no one which usernames exist or what role they have (docs/security.md,
"Sharing a study"): every refusal, on the page and in the API, is the same status and message."""

from __future__ import annotations

import pytest
from django.test import Client

from annotations.models import Study, User
from tests.factories import UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def accounts(owner: User) -> dict[str, User]:
    return {
        "annotator": UserFactory.create(username="someann", role="annotator"),
        "staff": UserFactory.create(username="somestaff", role="annotator", is_staff=True),
        "researcher": UserFactory.create(username="colleague", role="researcher"),
    }


def _api_answer(study: Study, owner: User, username: str) -> tuple[int, str]:
    response = client_for(owner).post(
        f"/api/studies/{study.pk}/share/", {"username": username}, format="json"
    )
    body = response.json()
    return response.status_code, str(body.get("detail", body)).replace(repr(username), "NAME")


def _page_answer(study: Study, owner: User, username: str) -> str:
    client = Client()
    client.force_login(owner)
    page = client.post(f"/studies/{study.pk}/share/", {"username": username}, follow=True)
    assert page.status_code == 200
    text = page.content.decode()
    start = text.index('class="messages"') if 'class="messages"' in text else 0
    return text[start : text.index("</ul>", start)].replace(username, "NAME")


def test_every_refusal_answers_the_same_through_the_api_and_the_page(study, owner, accounts) -> None:
    names = ["nobody-at-all", "someann", "somestaff", "owner"]
    api = {name: _api_answer(study, owner, name) for name in names}
    assert len(set(api.values())) == 1, api
    status, message = api["nobody-at-all"]
    assert status == 400 and "no researcher named NAME" in message
    page = {name: _page_answer(study, owner, name) for name in names}
    assert len(set(page.values())) == 1, page
    assert "no researcher named" in page["someann"]
    assert not study.shared_with.exists()


def test_a_researcher_is_still_shared_with(study, owner, accounts) -> None:
    status, _ = _api_answer(study, owner, "colleague")
    assert status == 200 and list(study.shared_with.values_list("username", flat=True)) == ["colleague"]
