"""``POST /api/auth/token/``: an API token for a username and password, with the sign-in throttling of
every login path (docs/security.md, "Sign-in: throttling, lockout, password hashing")."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotations.access import request_user
from annotations.api.parsers import CheckedJSONParser
from annotations.api.throttling import AnonRateThrottle
from annotations.services.api_tokens import api_token_get_or_create, api_token_revoke
from common.sign_in import lockout_response


class TokenView(ObtainAuthToken):
    """Your API token (username, password). DRF's own view turns throttling off; here a failed attempt
    counts towards the sign-in lockout (django-axes, per account name and per address, as on the
    sign-in pages: 429 once locked) and the anonymous request rate applies."""

    throttle_classes = [AnonRateThrottle]
    parser_classes = [CheckedJSONParser, FormParser, MultiPartParser]

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response | HttpResponse:  # type: ignore[override]  # a lockout answers with axes' page
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            # authenticate() ran through axes' backend, which marks the request object it was given
            # (this DRF request) when it refused a locked-out client or the failure reached the limit.
            if getattr(request, "axes_locked_out", False):
                return lockout_response(request._request)
            raise ValidationError(serializer.errors)
        token = api_token_get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})

    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Revoke the caller's own token (signed in by that token or a session): 204, then the token
        answers 401 everywhere (at once on every node with a shared cache; docs/api.md)."""
        if not request.user.is_authenticated:
            raise NotAuthenticated()
        api_token_revoke(user=request_user(request))
        return Response(status=204)
