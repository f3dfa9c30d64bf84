"""An account's own API token: made on request, revoked by deleting it (docs/api.md, "Authentication").

Revoking drops the token from every web process's lookup cache through the signals of
``annotations/token_cache.py`` (a token's ``post_delete``): at once on every node with a shared cache
(``WORKBENCH_CACHE_URL``), else within ``TOKEN_CACHE_SECONDS`` in the other processes. So every
deletion here goes row by row through ``Token.delete``, never a queryset's ``update`` or raw SQL.

A token also ends without being revoked: it lives ``WORKBENCH_API_TOKEN_DAYS`` after it was made
(``annotations/api/authentication.py`` refuses it after that; making a new one replaces it), and a
change of what it acts with (the account's password, set or reset; deactivation; a new role, staff
or superuser status) deletes the account's tokens (``api_tokens_revoke_for_security_change``, called
for every save of an account by the receivers of ``annotations/token_cache.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from rest_framework.authtoken.models import Token

from annotations.models import User
from annotations.selectors.api_tokens import api_token_expired


def _tokens_delete(*, user_id: int) -> int:
    """Delete every token of an account, one by one so each ``post_delete`` drops it from the lookup
    caches (and writes the shared cache's new generation); how many there were."""
    deleted = 0
    for token in Token.objects.filter(user_id=user_id):  # one at most (Token's user is a one-to-one)
        token.delete()
        deleted += 1
    return deleted


@transaction.atomic
def api_token_get_or_create(*, user: User) -> Token:
    """``user``'s API token, made when they have none, or made anew when theirs has expired (the old
    one is deleted: a new key, a new lifetime)."""
    token = Token.objects.select_for_update().filter(user=user).first()
    if token is not None and not api_token_expired(token.created):
        return token
    if token is not None:
        token.delete()
    token, _created = Token.objects.get_or_create(user=user)
    return token


@transaction.atomic
def api_token_revoke(*, user: User) -> bool:
    """Delete ``user``'s API token; whether there was one. The next call with it answers 401."""
    return _tokens_delete(user_id=user.pk) > 0


def api_tokens_revoke_for_security_change(*, user: User, changes: Sequence[str]) -> int:
    """End the API tokens of an account whose password, activity or role just changed (``changes``:
    what changed, ``selectors.api_tokens.account_security_changes``; nothing is done when empty), so a
    token stolen before a password change or reset, or made under an earlier role, stops working at
    once (docs/security.md). Returns how many tokens were deleted. Runs inside the account's save
    (its ``post_save``): a save rolled back keeps them."""
    if not changes or user.pk is None:
        return 0
    return _tokens_delete(user_id=user.pk)
