"""The per-process cache of API token lookups, and how a change reaches it in every process
(docs/api.md, "Authentication"; ``annotations/api/authentication.py`` reads and fills it).

Saving or deleting what a cached lookup holds (a token, its account, the account's annotator or
participant record) drops the account's entries in this process (Django's ``post_save`` and
``post_delete`` signals; the only job of these receivers, connected in every process by
``AnnotationsConfig.ready``). With a shared cache (``WORKBENCH_CACHE_URL``) it also writes a new
*generation* under ``GENERATION_KEY``, at once and again at commit; every authenticated API call
compares it with the generation its entry was loaded under, so the change is seen at once on every
node. A sign-in's ``last_login`` stamp writes no generation (nothing a lookup uses changed).

A save of an account that changes its password (set or reset), deactivates it or changes its role
(``role``, ``is_staff``, ``is_superuser``) also deletes its API tokens: read before the save
(``selectors.api_tokens.account_security_changes``, one query, none for a sign-in's stamp) and done
after it (``services.api_tokens.api_tokens_revoke_for_security_change``), through each token's
``post_delete`` below.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from rest_framework.authtoken.models import Token

from annotations.models import Annotator, Participant, User
from annotations.selectors.api_tokens import account_security_changes
from annotations.services.api_tokens import api_tokens_revoke_for_security_change

if TYPE_CHECKING:
    from collections.abc import Sequence

TOKEN_CACHE_SECONDS = 10.0
# With a shared cache every change the signals below see reaches every process at once (the generation),
# so an entry may live longer: its life bounds only a change made without the signals (a bulk update).
SHARED_TOKEN_CACHE_SECONDS = 60.0
TOKEN_CACHE_SIZE = 10_000
GENERATION_KEY = "api-token-generation"


class TokenEntry:
    """What one token authenticates: the rows as loaded (a fresh instance is built per request, so
    nothing a request sets on its user reaches the next) and when the entry runs out."""

    __slots__ = ("annotator", "expires", "generation", "participant", "token_created", "user", "user_id")

    def __init__(
        self,
        user: Sequence[Any],
        annotator: Sequence[Any] | None,
        participant: bool,
        token_created: Any,
        expires: float,
        generation: Any = None,
    ) -> None:
        self.user, self.annotator, self.participant = tuple(user), annotator, participant
        self.user_id, self.token_created, self.expires = user[0], token_created, expires
        self.generation = generation


entries: dict[str, TokenEntry] = {}
lock = threading.Lock()


def token_cache_clear() -> None:
    """Forget every cached token (tests; the signals below forget single accounts)."""
    with lock:
        entries.clear()


def entry_seconds() -> float:
    """How long this process keeps a token's lookup: 10 s, or 60 s with a shared cache (there a token's
    entry was reloaded by some 40% of the API calls of a busy web node at 10 s; docs/benchmarks.md,
    "Claim path at the limit")."""
    return SHARED_TOKEN_CACHE_SECONDS if settings.WORKBENCH_SHARED_CACHE else TOKEN_CACHE_SECONDS


def revocation_delay_seconds() -> float:
    """How long another process may still accept a revoked token: 0 with a shared cache, else the
    life of a process's entry (the API token page and docs/api.md say so)."""
    return 0.0 if settings.WORKBENCH_SHARED_CACHE else TOKEN_CACHE_SECONDS


def _new_generation() -> None:
    cache.set(GENERATION_KEY, uuid.uuid4().hex, None)


def _forget_everywhere() -> None:
    """With a shared cache: a new generation now (a node that loads the token from here on reads it)
    and again at commit (a node that loaded the still-uncommitted row in between drops it then)."""
    if settings.WORKBENCH_SHARED_CACHE:
        _new_generation()
        transaction.on_commit(_new_generation)


def _forget_user(user_id: Any) -> None:
    with lock:
        for key in [key for key, entry in entries.items() if entry.user_id == user_id]:
            del entries[key]
    _forget_everywhere()


@receiver(post_delete, sender=Token, dispatch_uid="workbench-token-cache-token-deleted")
def _forget_token(sender: Any, instance: Token, **kwargs: Any) -> None:
    with lock:
        entries.pop(instance.key, None)
    _forget_user(instance.user_id)


@receiver(post_save, sender=User, dispatch_uid="workbench-token-cache-user-saved")
@receiver(post_delete, sender=User, dispatch_uid="workbench-token-cache-user-deleted")
def _forget_account(sender: Any, instance: User, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if fields is not None and set(fields) == {"last_login"}:
        with lock:  # a sign-in: nothing another process's entry uses changed
            for key in [key for key, entry in entries.items() if entry.user_id == instance.pk]:
                del entries[key]
        return
    _forget_user(instance.pk)


_SECURITY_CHANGES = "_workbench_security_changes"  # set on the instance between its pre_save and post_save


@receiver(pre_save, sender=User, dispatch_uid="workbench-api-tokens-account-saving")
def _note_security_changes(sender: Any, instance: User, raw: bool = False, **kwargs: Any) -> None:
    if not raw:  # fixtures loaded as they are
        changes = account_security_changes(user=instance, update_fields=kwargs.get("update_fields"))
        setattr(instance, _SECURITY_CHANGES, changes)


@receiver(post_save, sender=User, dispatch_uid="workbench-api-tokens-account-saved")
def _revoke_on_security_changes(sender: Any, instance: User, **kwargs: Any) -> None:
    changes = instance.__dict__.pop(_SECURITY_CHANGES, None)
    if changes:
        api_tokens_revoke_for_security_change(user=instance, changes=changes)


@receiver(post_save, sender=Participant, dispatch_uid="workbench-token-cache-participant-saved")
@receiver(post_save, sender=Annotator, dispatch_uid="workbench-token-cache-annotator-saved")
@receiver(post_delete, sender=Annotator, dispatch_uid="workbench-token-cache-annotator-deleted")
def _forget_owner(sender: Any, instance: Participant | Annotator, **kwargs: Any) -> None:
    if instance.user_id is not None:
        _forget_user(instance.user_id)
