"""Token authentication that refuses participant accounts, with the token -> account lookup cached.

Participants (accounts made by invitation links, docs/crowd.md) work only through their study's
task pages; the API is closed to them. The session side is fenced by
``workbench.middleware.ParticipantScopeMiddleware``; a token is only read inside DRF, so the fence
for tokens is here, joined to the token lookup DRF makes anyway (no extra query per API call).

The lookup (token, account, its annotator, whether it is a participant) is kept per process for
``TOKEN_CACHE_SECONDS`` in ``annotations/token_cache.py`` (docs/api.md, "Authentication"): an API
call then costs no query to authenticate. What could make a cached answer wrong drops it at once in
the process that made the change: deleting a token (revoking it), saving or deleting its account
(deactivating it, a new role), a participant or annotator record made for it (the receivers of
``annotations/token_cache.py``, connected to Django's ``post_save``/``post_delete``).

Other processes: with a shared cache (``WORKBENCH_CACHE_URL``, Redis) the same signals also write a
new *generation* (``GENERATION_KEY``) into it, once at once and again when the transaction commits;
every API call reads that one key (one round trip, no query) and drops its entry when the
generation differs from the one read before the entry was loaded, so a revoked token, a deactivated
account or a new participant is refused at once on every web node. There an entry lives
``SHARED_TOKEN_CACHE_SECONDS`` (every change the signals see arrives through the generation; the life
bounds only a change made without them, such as a bulk ``update()``). When the token's account is
known from its entry and the view limits accounts' rates, the same round trip also counts the request
for the account's rate (``annotations/api/throttling.py``): one round trip per API call. A sign-in's
``last_login`` stamp changes nothing the lookup uses and writes no generation. Without a shared
cache, other processes see such a change when their entry runs out, at most ``TOKEN_CACHE_SECONDS``
later (the API token page says so: ``annotations.token_cache.revocation_delay_seconds``).

A token lives ``WORKBENCH_API_TOKEN_DAYS`` after it was made (``Token.created``, held by the cached
entry: no query): after that it answers 401 ``TOKEN_EXPIRED`` until its owner makes a new one, which
replaces it. A password change or reset, deactivation or a role change deletes the account's tokens
(``annotations/services/api_tokens.py``), so a token taken before them is refused at once.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.request import Request

from annotations.api import throttling
from annotations.api.throttling import UserRateThrottle, note_count, user_counter
from annotations.models import Annotator, User
from annotations.selectors.api_tokens import TOKEN_EXPIRED, api_token_expired
from annotations.token_cache import (
    GENERATION_KEY,
    TOKEN_CACHE_SECONDS,
    TOKEN_CACHE_SIZE,
    TokenEntry,
    entries,
    entry_seconds,
    lock,
    token_cache_clear,
)
from common.cache_counters import read_and_count

__all__ = ["TOKEN_CACHE_SECONDS", "WorkbenchTokenAuthentication", "token_cache_clear"]

PARTICIPANT_REFUSED = "This account was made for one study's tasks; it cannot open this page."

_USER_FIELDS = [field.attname for field in User._meta.concrete_fields]
_ANNOTATOR_FIELDS = [field.attname for field in Annotator._meta.concrete_fields]


def _load(key: str, generation: Any) -> TokenEntry | None:
    token = (
        Token.objects.select_related("user", "user__participant", "user__annotator").filter(key=key).first()
    )
    if token is None:
        return None
    user = token.user
    annotator = getattr(user, "annotator", None)
    return TokenEntry(
        user=[getattr(user, name) for name in _USER_FIELDS],
        annotator=None if annotator is None else tuple(getattr(annotator, n) for n in _ANNOTATOR_FIELDS),
        participant=hasattr(user, "participant"),
        token_created=token.created,
        expires=time.monotonic() + entry_seconds(),
        generation=generation,
    )


def _limits_accounts(request: Request | None) -> bool:
    """Does the view this request goes to count accounts' requests (``UserRateThrottle``)?"""
    view = (getattr(request, "parser_context", None) or {}).get("view")
    classes = getattr(view, "throttle_classes", ())
    return any(getattr(c, "scope", None) == UserRateThrottle.scope for c in classes)


def _shared_generation(request: Request | None, entry: TokenEntry | None) -> Any:
    """The generation in the shared cache, and, for a token whose account the entry names and a view
    that limits accounts, the request counted for that account's rate in the same round trip."""
    if entry is not None and request is not None and _limits_accounts(request):
        counter = user_counter(entry.user_id, throttling.now())  # the throttle's own clock
        if counter is not None:
            generation, count = read_and_count(GENERATION_KEY, *counter)
            note_count(request, counter[0], count)
            return generation
    return cache.get(GENERATION_KEY)


class WorkbenchTokenAuthentication(TokenAuthentication):
    """DRF's ``TokenAuthentication`` (``Authorization: Token KEY``), participants refused with 403."""

    request: Request | None = None

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        self.request = request  # one instance per request (DRF makes them in ``get_authenticators``)
        return super().authenticate(request)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        entry = entries.get(key)
        # The shared generation is read before the rows are (docs at the top: no change is missed).
        generation = _shared_generation(self.request, entry) if settings.WORKBENCH_SHARED_CACHE else None
        if entry is None or entry.expires < time.monotonic() or entry.generation != generation:
            entry = _load(key, generation)
            if entry is None:
                raise AuthenticationFailed("Invalid token.")
            with lock:
                if len(entries) >= TOKEN_CACHE_SIZE:
                    entries.clear()
                entries[key] = entry
        user = User.from_db("default", _USER_FIELDS, entry.user)
        if not user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        if api_token_expired(entry.token_created):
            raise AuthenticationFailed(TOKEN_EXPIRED)
        if entry.participant:
            raise PermissionDenied(PARTICIPANT_REFUSED)
        # As ``select_related`` leaves them: the annotator along (the claim and submit endpoints need
        # it), and no participant (reading ``user.participant`` then costs no query either).
        user._state.fields_cache["participant"] = None
        user._state.fields_cache["annotator"] = None
        if entry.annotator is not None:
            annotator = Annotator.from_db("default", _ANNOTATOR_FIELDS, entry.annotator)
            user._state.fields_cache["annotator"] = annotator
            annotator._state.fields_cache["user"] = user
        token = Token(key=key, user_id=user.pk, created=entry.token_created)
        token._state.adding, token._state.db = False, "default"
        token._state.fields_cache["user"] = user
        return user, token
