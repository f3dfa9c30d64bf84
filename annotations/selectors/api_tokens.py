"""An account's API token, as its page shows it (``annotations/services/api_tokens.py`` writes it)."""

from __future__ import annotations

from rest_framework.authtoken.models import Token

from annotations.models import User


def api_token_of(*, user: User) -> Token | None:
    """``user``'s API token, or None when they have none."""
    return Token.objects.filter(user=user).first()
