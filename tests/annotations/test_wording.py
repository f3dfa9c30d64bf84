"""Plural forms on the researcher's pages (issue 25, point 5): one item is "1 item", one annotator "1
human annotator", and an annotator who answered more than the completion code needs reads "3 answered,
2 needed" (it read "3 of 2")."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import Assignment, Study, User
from annotations.services.assignment import assignment_submit
from annotations.services.studies import enrollment_add
from tests.factories import ItemFactory, UserFactory

pytestmark = pytest.mark.django_db

WRONG = re.compile(r"\b1 (items|annotators|human annotators|annotations|judgements|rows)\b")


def _page(user: User, path: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, path
    return re.sub(r"\s+", " ", response.content.decode())


def test_one_of_each_is_singular(owner: User, study: Study) -> None:
    item = ItemFactory.create(study=study, external_id="only")
    annotator = UserFactory.create(username="solo", role="annotator")
    enrollment_add(study=study, user=annotator)
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator.annotator,
        status="leased",
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )
    assignment_submit(
        assignment=assignment, answers={"gender": {"value": "female"}, "attributes": {"value": ["hat"]}}
    )
    pages = {
        path: _page(owner, path)
        for path in (
            f"/studies/{study.pk}/",
            f"/studies/{study.pk}/items/",
            f"/studies/{study.pk}/agreement/",
            f"/studies/{study.pk}/findings/",
            "/",
        )
    }
    for path, html in pages.items():
        assert not WRONG.search(html), f"{path}: {WRONG.search(html)}"
    assert "1 item ·" in pages[f"/studies/{study.pk}/items/"]
    assert "1 item · 1 human annotator ·" in pages[f"/studies/{study.pk}/agreement/"]
    assert ">1 item</a>" in pages[f"/studies/{study.pk}/"]
    assert "by 1 annotator" in pages[f"/studies/{study.pk}/"]
