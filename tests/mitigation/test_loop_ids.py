"""InterMit loop ids reveal nothing (docs/security.md, "InterMit loop ids"): a loop of a study the caller
may not see answers exactly as a loop that does not exist, on the pages and in the API."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.models import User
from annotations.services.studies import enrollment_add
from mitigation.models import MitigationLoop
from tests.factories import StudyFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def foreign_loop(owner: User) -> MitigationLoop:
    study = StudyFactory.create(owner=owner)
    return MitigationLoop.objects.create(
        study=study, group="nurse", axes=["gender"], weights={"gender": 1.0}, model_spec={"source": "m"}
    )


def _page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _same_page(content: bytes, pk: int) -> bytes:
    """A 404 page without the loop's id (in its path and its message: "Loop 7 does not exist or is not
    yours.") and its CSRF token (masked afresh on every render of the sign-out form)."""
    content = content.replace(f"/loops/{pk}/".encode(), b"").replace(f"Loop {pk} ".encode(), b"")
    return re.sub(rb'name="csrfmiddlewaretoken" value="[^"]*"', b"", content)


@pytest.mark.parametrize("who", ["other", "annotator"])
def test_someone_else_s_loop_answers_as_a_missing_one(
    foreign_loop, owner, other_researcher, annotator_user, who
) -> None:
    user = other_researcher if who == "other" else annotator_user
    if who == "annotator":
        enrollment_add(study=foreign_loop.study, user=annotator_user)
    missing = foreign_loop.pk + 1000
    api = client_for(user)
    for verb in ("", "step/", "close/", "nonsense/"):
        method = api.get if not verb else api.post
        found = method(f"/api/intermit/loops/{foreign_loop.pk}/{verb}")
        absent = method(f"/api/intermit/loops/{missing}/{verb}")
        assert found.status_code == absent.status_code == 404, verb
        assert found.json()["detail"].replace(f"loop {foreign_loop.pk} ", "") == absent.json()[
            "detail"
        ].replace(f"loop {missing} ", "")
    page = _page(user)
    for verb in ("", "step/", "close/"):
        visit = page.get if not verb else page.post
        seen = visit(f"/intermit/loops/{foreign_loop.pk}/{verb}")
        unseen = visit(f"/intermit/loops/{missing}/{verb}")
        assert seen.status_code == unseen.status_code == 404, verb
        assert _same_page(seen.content, foreign_loop.pk) == _same_page(unseen.content, missing)
    assert not foreign_loop.steps.exists()


def test_the_owner_still_sees_the_loop(foreign_loop, owner) -> None:
    assert client_for(owner).get(f"/api/intermit/loops/{foreign_loop.pk}/").status_code == 200
    assert _page(owner).get(f"/intermit/loops/{foreign_loop.pk}/").status_code == 200
