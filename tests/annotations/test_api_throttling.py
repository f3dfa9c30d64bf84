"""The API's request rates (annotations/api/throttling.py): fixed-window counters per account and per
address, 429 with Retry-After past the rate, and, on the shared cache, one round trip to Redis per
API call by token (the token generation and the account's count in one pipeline; issue 38, point 4).
The Redis tests use a real Redis and skip when none answers (tests/shared_cache.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from annotations.api import throttling
from annotations.api.throttling import AnonRateThrottle, UserRateThrottle, counter_key, parse_rate
from annotations.services.studies import enrollment_add
from tests.factories import ItemFactory, UserFactory

pytestmark = pytest.mark.django_db

ANSWERS = {
    "answers": {
        "gender": {"value": "male"},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }
}


@pytest.fixture
def rates(settings: Any) -> Iterator[None]:
    """3 requests a minute per account, 2 per address (DRF reloads its settings on the change)."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": "3/minute", "anon": "2/minute"},
    }
    yield


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The throttle's clock, set by the test (seconds since the epoch)."""
    now = [1_000_000.5]  # 20 s into a minute window that began at 999,960 (16,666 x 60)
    monkeypatch.setattr(throttling, "now", lambda: now[0])
    return now


def _token_client(username: str, role: str = "researcher") -> APIClient:
    user = UserFactory.create(username=username, role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_a_rate_reads_as_drf_reads_it() -> None:
    assert parse_rate("6000/minute") == (6000, 60)
    assert parse_rate("60/min") == (60, 60)
    assert parse_rate("5/second") == (5, 1)
    assert parse_rate("100/hour") == (100, 3600)
    assert parse_rate("1000/day") == (1000, 86400)
    assert parse_rate(None) is None


def test_an_account_gets_its_rate_then_429_with_retry_after_until_the_window_ends(
    rates: None, clock: list[float]
) -> None:
    busy, other = _token_client("busy"), _token_client("other")
    assert [busy.get("/api/me/").status_code for _ in range(3)] == [200, 200, 200]
    refused = busy.get("/api/me/")
    assert refused.status_code == 429
    # The window (999,960 to 1,000,020) has 19.5 s left: DRF rounds up.
    assert refused["Retry-After"] == "20"
    assert "throttled" in refused.json()["detail"].lower()
    assert other.get("/api/me/").status_code == 200  # counted per account
    busy_id = Token.objects.get(user__username="busy").user_id
    assert cache.get(counter_key("user", busy_id, 60, clock[0])) == 4  # one count per request
    clock[0] = 1_000_019.9
    assert busy.get("/api/me/").status_code == 429
    assert busy.get("/api/me/")["Retry-After"] == "1"
    clock[0] = 1_000_020.0  # the next window
    assert [busy.get("/api/me/").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_a_signed_in_session_is_counted_for_its_account_too(rates: None, clock: list[float]) -> None:
    client = APIClient()
    client.force_login(UserFactory.create(username="browser", role="researcher"))
    assert [client.get("/api/me/").status_code for _ in range(4)] == [200, 200, 200, 429]


def test_no_rate_means_no_limit(settings: Any, clock: list[float]) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": None, "anon": None},
    }
    client = _token_client("unlimited")
    assert {client.get("/api/me/").status_code for _ in range(5)} == {200}
    user_id = Token.objects.get(user__username="unlimited").user_id
    assert cache.get(counter_key("user", user_id, 60, clock[0])) is None  # nothing counted


def test_requests_without_an_account_are_counted_per_address(
    rates: None, clock: list[float], settings: Any
) -> None:
    class Open(APIView):
        permission_classes: list[Any] = []
        throttle_classes = [AnonRateThrottle, UserRateThrottle]

        def get(self, request: Any) -> Response:
            return Response({})

    factory = APIRequestFactory()
    answers = [Open.as_view()(factory.get("/", REMOTE_ADDR="192.0.2.1")).status_code for _ in range(3)]
    assert answers == [200, 200, 429]
    assert Open.as_view()(factory.get("/", REMOTE_ADDR="192.0.2.2")).status_code == 200
    # Behind one trusted proxy the client is the address it appended.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    forwarded = [
        Open.as_view()(factory.get("/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}"))
        for n in (7, 7, 7, 8)
    ]
    assert [response.status_code for response in forwarded] == [200, 200, 429, 200]
    assert forwarded[2]["Retry-After"] == "20"


# --- On the shared cache: one round trip per API call by token -------------------------------------


class RoundTrips:
    """Counts what redis-py sends: a command or a whole pipeline is one round trip."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import redis.connection

        self.count = 0
        sent = redis.connection.AbstractConnection.send_packed_command

        def counted(connection: Any, command: Any, check_health: bool = True) -> Any:
            self.count += 1
            return sent(connection, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)

    def during(self, call: Any) -> tuple[Any, int]:
        before = self.count
        result = call()
        return result, self.count - before


def test_a_claim_a_submit_and_a_get_cost_one_round_trip_each(
    shared_cache: str, monkeypatch: pytest.MonkeyPatch, study: Any, annotator_user: Any
) -> None:
    for n in range(3):
        ItemFactory.create(study=study, external_id=f"r{n}")
    enrollment_add(study=study, user=annotator_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=annotator_user).key}")
    assert client.get("/api/me/").status_code == 200  # the token's entry is cached in this process
    trips = RoundTrips(monkeypatch)
    me, sent = trips.during(lambda: client.get("/api/me/"))
    assert me.status_code == 200 and sent == 1
    claimed, sent = trips.during(lambda: client.post(f"/api/studies/{study.pk}/assignments/next/"))
    assert claimed.status_code == 200 and sent == 1
    submitted, sent = trips.during(
        lambda: client.post(f"/api/assignments/{claimed.json()['id']}/submit/", ANSWERS, format="json")
    )
    assert submitted.status_code == 200 and sent == 1
    # Three requests counted once each for the account (the throttle used the authentication's count).
    window = [key for key in _redis_keys() if f"throttle:user:{annotator_user.pk}:" in key]
    assert len(window) == 1 and int(cache._cache.get_client().get(window[0])) == 4  # type: ignore[attr-defined]


def _redis_keys() -> list[str]:
    return [key.decode() for key in cache._cache.get_client().keys("*throttle*")]  # type: ignore[attr-defined]


def test_on_the_shared_cache_the_rate_holds_and_counts_each_request_once(
    shared_cache: str, rates: None, clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _token_client("scripted")
    trips = RoundTrips(monkeypatch)
    answers = [trips.during(lambda: client.get("/api/me/")) for _ in range(4)]
    # The first call loads the token (a generation read, then the throttle's own count): two round trips;
    # afterwards one each.
    assert [response.status_code for response, _ in answers] == [200, 200, 200, 429]
    assert [sent for _, sent in answers] == [2, 1, 1, 1]
    assert answers[3][0]["Retry-After"] == "20"
    # A revoked token is still refused at once (the generation is read in the same round trip).
    Token.objects.filter(user__username="scripted").delete()
    assert client.get("/api/me/").status_code == 401


def test_a_view_that_does_not_limit_accounts_does_not_count_them(
    shared_cache: str, rates: None, clock: list[float]
) -> None:
    client = _token_client("revoker")
    assert [client.get("/api/me/").status_code for _ in range(2)] == [200, 200]
    (key,) = _redis_keys()
    assert int(cache._cache.get_client().get(key)) == 2  # type: ignore[attr-defined]
    # /api/auth/token/ limits addresses (the sign-in rate), not accounts: the account's count stays.
    assert client.delete("/api/auth/token/").status_code == 204
    assert int(cache._cache.get_client().get(key)) == 2  # type: ignore[attr-defined]
