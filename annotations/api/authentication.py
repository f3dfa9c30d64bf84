"""Token authentication that refuses participant accounts, with the token -> account lookup cached.

Participants (accounts made by invitation links, docs/crowd.md) work only through their study's
task pages; the API is closed to them. The session side is fenced by
``workbench.middleware.ParticipantScopeMiddleware``; a token is only read inside DRF, so the fence
for tokens is here, joined to the token lookup DRF makes anyway (no extra query per API call).

The lookup (token, account, its annotator, whether it is a participant) is kept per process for
``TOKEN_CACHE_SECONDS`` (docs/api.md, "Authentication"): an API call then costs no query to
authenticate. What could make a cached answer wrong drops it at once in the process that made the
change: deleting a token (revoking it), saving or deleting its account (deactivating it, a new
role), a participant or annotator record made for it (``_forget_*`` below, connected to Django's
``post_save``/``post_delete``; the only job of these signals). Other worker processes see such a
change when their entry runs out, at most ``TOKEN_CACHE_SECONDS`` later.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied

from annotations.models import Annotator, Participant, User

if TYPE_CHECKING:
    from collections.abc import Sequence

PARTICIPANT_REFUSED = "This account was made for one study's tasks; it cannot open this page."
TOKEN_CACHE_SECONDS = 10.0
TOKEN_CACHE_SIZE = 10_000

_USER_FIELDS = [field.attname for field in User._meta.concrete_fields]
_ANNOTATOR_FIELDS = [field.attname for field in Annotator._meta.concrete_fields]


class _Entry:
    """What one token authenticates: the rows as loaded (a fresh instance is built per request, so
    nothing a request sets on its user reaches the next) and when the entry runs out."""

    __slots__ = ("annotator", "expires", "participant", "token_created", "user", "user_id")

    def __init__(
        self,
        user: Sequence[Any],
        annotator: Sequence[Any] | None,
        participant: bool,
        token_created: Any,
        expires: float,
    ) -> None:
        self.user, self.annotator, self.participant = tuple(user), annotator, participant
        self.user_id, self.token_created, self.expires = user[0], token_created, expires


_cache: dict[str, _Entry] = {}
_lock = threading.Lock()


def token_cache_clear() -> None:
    """Forget every cached token (tests; the signals below forget single accounts)."""
    with _lock:
        _cache.clear()


def _forget_user(user_id: Any) -> None:
    with _lock:
        for key in [key for key, entry in _cache.items() if entry.user_id == user_id]:
            del _cache[key]


@receiver(post_delete, sender=Token, dispatch_uid="workbench-token-cache-token-deleted")
def _forget_token(sender: Any, instance: Token, **kwargs: Any) -> None:
    with _lock:
        _cache.pop(instance.key, None)
    _forget_user(instance.user_id)


@receiver(post_save, sender=User, dispatch_uid="workbench-token-cache-user-saved")
@receiver(post_delete, sender=User, dispatch_uid="workbench-token-cache-user-deleted")
def _forget_account(sender: Any, instance: User, **kwargs: Any) -> None:
    _forget_user(instance.pk)


@receiver(post_save, sender=Participant, dispatch_uid="workbench-token-cache-participant-saved")
@receiver(post_save, sender=Annotator, dispatch_uid="workbench-token-cache-annotator-saved")
@receiver(post_delete, sender=Annotator, dispatch_uid="workbench-token-cache-annotator-deleted")
def _forget_owner(sender: Any, instance: Participant | Annotator, **kwargs: Any) -> None:
    if instance.user_id is not None:
        _forget_user(instance.user_id)


def _load(key: str) -> _Entry | None:
    token = (
        Token.objects.select_related("user", "user__participant", "user__annotator").filter(key=key).first()
    )
    if token is None:
        return None
    user = token.user
    annotator = getattr(user, "annotator", None)
    return _Entry(
        user=[getattr(user, name) for name in _USER_FIELDS],
        annotator=None if annotator is None else tuple(getattr(annotator, n) for n in _ANNOTATOR_FIELDS),
        participant=hasattr(user, "participant"),
        token_created=token.created,
        expires=time.monotonic() + TOKEN_CACHE_SECONDS,
    )


class WorkbenchTokenAuthentication(TokenAuthentication):
    """DRF's ``TokenAuthentication`` (``Authorization: Token KEY``), participants refused with 403."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        entry = _cache.get(key)
        if entry is None or entry.expires < time.monotonic():
            entry = _load(key)
            if entry is None:
                raise AuthenticationFailed("Invalid token.")
            with _lock:
                if len(_cache) >= TOKEN_CACHE_SIZE:
                    _cache.clear()
                _cache[key] = entry
        user = User.from_db("default", _USER_FIELDS, entry.user)
        if not user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
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
