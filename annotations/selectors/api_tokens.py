"""An account's API token, as its page shows it, and how long a token lives
(``annotations/services/api_tokens.py`` writes it; docs/api.md, "Authentication")."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotations.models import User

# What a token is refused with once it has lived ``WORKBENCH_API_TOKEN_DAYS`` (a 401).
TOKEN_EXPIRED = "Token expired: make a new one on the API token page (/accounts/api-token/)."

# What of an account a token's holder acts with: changing any of them (or the password) ends its tokens.
SECURITY_FIELDS = ("is_active", "role", "is_staff", "is_superuser")


def api_token_lifetime() -> timedelta:
    """How long a token is accepted after it was made (``WORKBENCH_API_TOKEN_DAYS``)."""
    return timedelta(days=settings.WORKBENCH_API_TOKEN_DAYS)


def api_token_expires_at(created: datetime) -> datetime:
    """When a token made at ``created`` stops being accepted."""
    return created + api_token_lifetime()


def api_token_expired(created: datetime, now: datetime | None = None) -> bool:
    """Whether a token made at ``created`` has lived its lifetime (no query: the token lookup cache
    holds ``created``)."""
    return api_token_expires_at(created) <= (now or timezone.now())


def api_token_of(*, user: User) -> Token | None:
    """``user``'s API token, or None when they have none."""
    return Token.objects.filter(user=user).first()


def account_security_changes(*, user: User, update_fields: Any = None) -> list[str]:
    """What a save of ``user`` about to be written changes of what its API tokens act with: its password
    (set by ``set_password``, or made unusable), being active, its role, staff or superuser status,
    compared with the stored row (read before the save: one query). [] for a new account, and with no
    query for a save of fields none of which matter (a sign-in's ``last_login`` stamp).

    A password hash upgraded at sign-in is no change: Django's ``check_password`` clears ``_password``
    before it saves the new hash, which stays usable."""
    if user._state.adding or user.pk is None:
        return []
    fields = None if update_fields is None else set(update_fields)
    if fields is not None and not fields & {"password", *SECURITY_FIELDS}:
        return []
    stored = User.objects.filter(pk=user.pk).values("password", *SECURITY_FIELDS).first()
    if stored is None:
        return []
    changed = [
        name
        for name in SECURITY_FIELDS
        if (fields is None or name in fields) and getattr(user, name) != stored[name]
    ]
    if fields is None or "password" in fields:
        new_password = getattr(user, "_password", None) is not None  # AbstractBaseUser.set_password
        unusable = user.password != stored["password"] and not user.has_usable_password()
        if new_password or unusable:
            changed.insert(0, "password")
    return changed
