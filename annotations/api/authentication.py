"""Token authentication that refuses participant accounts in the query that finds the token.

Participants (accounts made by invitation links, docs/crowd.md) work only through their study's
task pages; the API is closed to them. The session side is fenced by
``workbench.middleware.ParticipantScopeMiddleware``; a token is only read inside DRF, so the fence
for tokens is here, joined to the token lookup DRF makes anyway (no extra query per API call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied

if TYPE_CHECKING:
    from rest_framework.authtoken.models import Token

PARTICIPANT_REFUSED = "This account was made for one study's tasks; it cannot open this page."


class WorkbenchTokenAuthentication(TokenAuthentication):
    """DRF's ``TokenAuthentication`` (``Authorization: Token KEY``), participants refused with 403."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        model = cast("type[Token]", self.get_model())
        # The annotator comes along too: the claim and submit endpoints need it (one query fewer each).
        token = (
            model.objects.select_related("user", "user__participant", "user__annotator")
            .filter(key=key)
            .first()
        )
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        if hasattr(token.user, "participant"):
            raise PermissionDenied(PARTICIPANT_REFUSED)
        return token.user, token
