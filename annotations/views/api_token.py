"""``/accounts/api-token/``: your API token, made or revoked (docs/api.md, "Authentication")."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from annotations.access import request_user
from annotations.selectors.api_tokens import api_token_expired, api_token_expires_at, api_token_of
from annotations.services.api_tokens import api_token_get_or_create, api_token_revoke
from annotations.token_cache import revocation_delay_seconds


@login_required
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: your token (if any), when it was made and when it expires, and what ends it; POST
    ``action=create`` (a new token replaces an expired one) or ``action=revoke``."""
    user = request_user(request)
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "create":
            api_token_get_or_create(user=user)
            messages.success(request, "Your API token is ready.")
        elif action == "revoke":
            if api_token_revoke(user=user):
                messages.success(request, "Your API token was revoked.")
            else:
                messages.info(request, "You had no API token.")
        else:
            return render(
                request,
                "errors/refused.html",
                {"message": "Unknown action: use create or revoke."},
                status=400,
            )
        return redirect("api-token")
    token = api_token_of(user=user)
    return render(
        request,
        "api_token/token.html",
        {
            "token": token,
            "expires_at": api_token_expires_at(token.created) if token is not None else None,
            "expired": token is not None and api_token_expired(token.created),
            "lifetime_days": settings.WORKBENCH_API_TOKEN_DAYS,
            "revocation_delay": int(revocation_delay_seconds()),
        },
    )
