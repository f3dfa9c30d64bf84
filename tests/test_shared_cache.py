"""Stateless web nodes (issue 28, point 4; issue 24, L7): with ``WORKBENCH_CACHE_URL`` every web
process shares one cache, so a revoked API token is refused at once by every other process and the
API throttle counts one client's requests across processes. Real gunicorn processes on the test
database and a real Redis (skipped when none answers: tests/shared_cache.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotations.services.api_tokens import api_token_revoke
from tests.factories import UserFactory
from tests.shared_cache import web_node

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def call(url: str, key: str, method: str = "GET") -> int:
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"Token {key}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_a_token_revoked_through_one_node_is_refused_at_once_by_the_other(shared_cache: str) -> None:
    user = UserFactory.create(username="script", role="researcher")
    key = Token.objects.create(user=user).key
    env = {"WORKBENCH_CACHE_URL": shared_cache}
    with web_node(env) as node_a, web_node(env) as node_b:
        assert call(f"{node_b}/api/me/", key) == 200  # node B now holds the token in its process cache
        assert call(f"{node_a}/api/me/", key) == 200
        assert call(f"{node_a}/api/auth/token/", key, method="DELETE") == 204
        assert call(f"{node_b}/api/me/", key) == 401  # at once: no 10 s window
        assert call(f"{node_a}/api/me/", key) == 401
        assert not Token.objects.filter(key=key).exists()

        # Revoked by this process (the page's service) while both nodes hold the new token.
        second = Token.objects.create(user=user).key
        assert call(f"{node_a}/api/me/", second) == 200 and call(f"{node_b}/api/me/", second) == 200
        api_token_revoke(user=user)
        assert call(f"{node_a}/api/me/", second) == 401 and call(f"{node_b}/api/me/", second) == 401


def test_a_deactivated_account_is_refused_at_once_by_every_node(shared_cache: str) -> None:
    user = UserFactory.create(username="leaver", role="annotator")
    key = Token.objects.create(user=user).key
    with web_node({"WORKBENCH_CACHE_URL": shared_cache}) as node:
        assert call(f"{node}/api/me/", key) == 200
        user.is_active = False
        user.save()
        assert call(f"{node}/api/me/", key) == 401


def test_the_api_throttle_counts_across_nodes(shared_cache: str) -> None:
    user = UserFactory.create(username="busy", role="researcher")
    key = Token.objects.create(user=user).key
    env = {"WORKBENCH_CACHE_URL": shared_cache, "WORKBENCH_THROTTLE_USER": "4/minute"}
    with web_node(env) as node_a, web_node(env) as node_b:
        answers = [call(f"{node}/api/me/", key) for node in (node_a, node_b, node_a, node_b)]
        assert answers == [200, 200, 200, 200]
        # Each process alone has seen 2 requests; together 4 of 4 a minute: both refuse the fifth.
        assert call(f"{node_b}/api/me/", key) == 429
        assert call(f"{node_a}/api/me/", key) == 429


def test_without_a_shared_cache_the_token_page_says_how_long_a_revoked_token_lives(settings) -> None:
    settings.WORKBENCH_SHARED_CACHE = False
    user = UserFactory.create(username="ann", role="annotator")
    client = Client()
    client.force_login(user)
    made = client.post("/accounts/api-token/", {"action": "create"}, follow=True).content.decode()
    key = Token.objects.get(user=user).key
    assert key in made
    assert (
        "without a shared cache (WORKBENCH_CACHE_URL), so a revoked token may be accepted by other "
        "worker processes for up to 10 s"
    ) in made
    revoked = client.post("/accounts/api-token/", {"action": "revoke"}, follow=True).content.decode()
    assert "Your API token was revoked." in revoked and not Token.objects.filter(user=user).exists()
    assert client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401
    refused = client.post("/accounts/api-token/", {"action": "rename"})
    assert refused.status_code == 400 and "create or revoke" in refused.content.decode()


def test_with_a_shared_cache_the_token_page_says_revocation_is_immediate(shared_cache: str) -> None:
    client = Client()
    client.force_login(UserFactory.create(username="ann", role="annotator"))
    page = client.get("/accounts/api-token/").content.decode()
    assert "refused at once by every server" in page and "may be accepted" not in page


def test_the_api_revokes_only_the_callers_own_token() -> None:
    anonymous = Client().delete("/api/auth/token/")
    assert anonymous.status_code == 401
    user, other = UserFactory.create(username="a"), UserFactory.create(username="b")
    mine, theirs = Token.objects.create(user=user).key, Token.objects.create(user=other).key
    response = Client().delete("/api/auth/token/", HTTP_AUTHORIZATION=f"Token {mine}")
    assert response.status_code == 204
    assert list(Token.objects.values_list("key", flat=True)) == [theirs]
    me = Client().get("/api/me/", HTTP_AUTHORIZATION=f"Token {theirs}")
    assert json.loads(me.content)["username"] == "b"


def page(url: str, session: str) -> str:
    request = urllib.request.Request(url, headers={"Cookie": f"sessionid={session}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.read().decode())


def test_items_added_anywhere_are_counted_at_once_on_every_node(shared_cache: str, owner) -> None:
    """The task pages' "left" (a study's item count, kept in the cache): items added by another
    process show on the node at once, not when the node's own copy runs out 30 s later."""
    import re

    from annotations.services.studies import enrollment_add
    from tests.factories import ItemFactory, StudyFactory

    study = StudyFactory.create(owner=owner, status="active")
    annotator = UserFactory.create(username="counter", role="annotator")
    enrollment_add(study=study, user=annotator)
    ItemFactory.create_batch(2, study=study)
    client = Client()
    client.force_login(annotator)
    session = client.cookies["sessionid"].value

    def left(node: str) -> int:
        found = re.search(r"(\d+) left</span>", page(f"{node}/annotate/", session))
        assert found is not None
        return int(found.group(1))

    with web_node({"WORKBENCH_CACHE_URL": shared_cache}) as node:
        assert left(node) == 2  # the node counts and keeps the count in the shared cache
        ItemFactory.create_batch(3, study=study)  # this process: the saves drop the shared count
        assert left(node) == 5
