"""The API's request rates: ``WORKBENCH_THROTTLE_USER`` per account, ``WORKBENCH_THROTTLE_ANON`` per
client address (DRF's ``user`` and ``anon`` rates, ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``), each
counted in a fixed window of the rate's period (``6000/minute``: at most 6,000 requests in each
clock minute) in the cache that every web process shares (docs/api.md, "Rates").

DRF's own throttles keep a list of every request's time in the window: a read and a write of that
list per request (two round trips to the shared cache, and up to 6,000 floats pickled each time).
Here a request costs one counter increment (``common/cache_counters.py``); for a token's account the
increment goes in the same round trip as the token generation the authentication reads anyway
(``annotations/api/authentication.py`` counts it and leaves the count on the request), so an API call
by token costs the shared cache one round trip. A refused request gets 429 with ``Retry-After``, the
seconds left in the window (DRF's exception handler writes the header from :meth:`wait`).

A fixed window lets a client that waits for a window's end send up to twice the rate across the
boundary; the rates are a guard against runaway scripts, not a quota.
"""

from __future__ import annotations

import math
import time
from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from common.cache_counters import counter_hit

# Where the authentication leaves the counts it took (``{counter key: count}``) on Django's request.
COUNTED_ATTRIBUTE = "_workbench_throttle_counts"


def parse_rate(rate: object) -> tuple[int, int] | None:
    """``"6000/minute"`` -> (6000, 60), read by DRF's own ``SimpleRateThrottle.parse_rate`` (it does not
    use its instance); None: no limit."""
    if rate is None:
        return None
    number, seconds = SimpleRateThrottle.parse_rate(None, str(rate))  # type: ignore[arg-type]
    assert number is not None and seconds is not None  # a rate that is not None parses to both
    return number, seconds


def now() -> float:
    """The throttles' clock (seconds since the epoch; the windows are clock minutes, hours...)."""
    return time.time()


def counter_key(scope: str, ident: Any, seconds: int, now: float) -> str:
    """The cache key of ``ident``'s counter in ``scope`` for the window that holds ``now``."""
    return f"throttle:{scope}:{ident}:{seconds}:{int(now // seconds)}"


def user_counter(user_id: Any, now: float) -> tuple[str, int] | None:
    """The account's counter key and window length now, or None when accounts are not limited."""
    parsed = parse_rate(api_settings.DEFAULT_THROTTLE_RATES.get(UserRateThrottle.scope))
    if parsed is None:
        return None
    return counter_key(UserRateThrottle.scope, user_id, parsed[1], now), parsed[1]


def note_count(request: Request, key: str, count: int) -> None:
    """Leave a count taken for ``request`` (by the authentication) for its throttle to use."""
    django_request = request._request
    counted = getattr(django_request, COUNTED_ATTRIBUTE, None)
    if counted is None:
        counted = {}
        setattr(django_request, COUNTED_ATTRIBUTE, counted)
    counted[key] = count


def _taken_count(request: Request, key: str) -> int | None:
    counted = getattr(request._request, COUNTED_ATTRIBUTE, None)
    return counted.pop(key, None) if counted else None


class FixedWindowRateThrottle(BaseThrottle):
    """Allow ``scope``'s rate of requests per identity in each window of the rate's period."""

    scope = ""

    def __init__(self) -> None:
        self.rate = parse_rate(api_settings.DEFAULT_THROTTLE_RATES.get(self.scope))
        self.retry_after: float | None = None

    def get_ident_key(self, request: Request) -> Any:
        """Who is counted (None: this throttle does not apply to the request)."""
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        ident = self.get_ident_key(request)
        if ident is None:
            return True
        number, seconds = self.rate
        moment = now()
        key = counter_key(self.scope, ident, seconds, moment)
        count = _taken_count(request, key)
        if count is None:
            count = counter_hit(key, seconds)
        if count <= number:
            return True
        self.retry_after = (math.floor(moment / seconds) + 1) * seconds - moment
        return False

    def wait(self) -> float | None:
        return self.retry_after


class UserRateThrottle(FixedWindowRateThrottle):
    """Per signed-in account (a token or a session), the ``user`` rate."""

    scope = "user"

    def get_ident_key(self, request: Request) -> Any:
        user = request.user
        return user.pk if user is not None and user.is_authenticated else None


class AnonRateThrottle(FixedWindowRateThrottle):
    """Per client address (``NUM_PROXIES`` trusted proxies' ``X-Forwarded-For``, as DRF's), the ``anon``
    rate, for requests without an account."""

    scope = "anon"

    def get_ident_key(self, request: Request) -> Any:
        user = request.user
        return None if user is not None and user.is_authenticated else self.get_ident(request)
