"""An account's own API token: made on request, revoked by deleting it (docs/api.md, "Authentication").

Revoking drops the token from every web process's lookup cache through the signals of
``annotations/api/authentication.py``: at once on every node with a shared cache
(``WORKBENCH_CACHE_URL``), else within ``TOKEN_CACHE_SECONDS`` in the other processes.
"""

from __future__ import annotations

from django.db import transaction
from rest_framework.authtoken.models import Token

from annotations.models import User


@transaction.atomic
def api_token_get_or_create(*, user: User) -> Token:
    """``user``'s API token, made when they have none."""
    token, _created = Token.objects.get_or_create(user=user)
    return token


@transaction.atomic
def api_token_revoke(*, user: User) -> bool:
    """Delete ``user``'s API token; whether there was one. The next call with it answers 401."""
    deleted = False
    for token in Token.objects.filter(user=user):  # one at most; deleted one by one so the signals run
        token.delete()
        deleted = True
    return deleted
