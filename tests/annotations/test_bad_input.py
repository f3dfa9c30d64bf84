"""Junk input never reaches a 500: every URL the project serves, as the study's owner (an admin, so
that nothing stops at a permission check), with nonsense query and form values."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.annotations.url_walk import INT_PARAMETERS, OTHER_PARAMETERS, PLACEHOLDER, every_url
from tests.factories import ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

JUNK_QUERY = {
    "study": ["x", "-1"],
    "source": "=x",
    "resamples": "abc",
    "fresh": "1",
    "breakdown": "annotator:",
    "condition": "zz",
    "where": "bad",
    "value": "zz",
    "table": "nope",
    "by": "x",
    "page": "x",
}
JUNK_FORM = {
    "rule": "bogus",
    "k": "x",
    "value": "",
    "question": "nope",
    "reason": "",
    "kind": "x",
    "control_rate": "abc",
    "max_uses": "-1",
    "valid_days": "x",
    "platform": "x",
    "pool": "x",
    "demographics": "- {",
    "consent": "x",
    "action": "x",
}


def test_no_url_answers_junk_with_a_server_error(_media_root) -> None:
    owner = UserFactory.create(username="boss", role="researcher", is_staff=True, is_superuser=True)
    study = StudyFactory.create(owner=owner)
    item = ItemFactory.create(study=study)
    client = Client(raise_request_exception=False)
    client.force_login(owner)

    def value(match: re.Match[str]) -> str:
        converter, name = match.groups()
        if converter == "drf_format_suffix":
            return ".json"
        if name in INT_PARAMETERS:
            return str(item.pk if "item" in name else study.pk)
        return OTHER_PARAMETERS[name]

    failures, tried = [], 0
    for template, name in every_url():
        if name == "logout" or template.startswith("/admin"):
            continue  # signing out ends the session; the admin is Django's own
        path = PLACEHOLDER.sub(value, template)
        for method, data in (("get", JUNK_QUERY), ("post", JUNK_FORM)):
            tried += 1
            status = getattr(client, method)(path, data).status_code
            if status >= 500:
                failures.append(f"{method.upper()} {path} ({name}): {status}")
    assert tried > 200
    assert failures == []


def test_a_consensus_k_that_is_not_a_number_is_refused_with_a_message(study, owner) -> None:
    client = Client()
    client.force_login(owner)
    response = client.post(f"/studies/{study.pk}/consensus/", {"rule": "at-least-k", "k": "two"}, follow=True)
    assert response.status_code == 200
    assert "Consensus not computed: &#x27;two&#x27; is not a whole number" in response.content.decode()
