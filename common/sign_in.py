"""Sign-in throttling shared by every login path (docs/security.md, "Sign-in: throttling, lockout,
password hashing").

django-axes counts failed sign-ins per account name and per client address on the sign-in page, the
admin's sign-in page and the API's token endpoint (all three go through
``django.contrib.auth.authenticate``); after ``AXES_FAILURE_LIMIT`` failures within the cool-off the
account name, or the address, is refused for ``AXES_COOLOFF_TIME``. This module gives axes the
client's address (behind ``WORKBENCH_TRUSTED_PROXIES`` reverse proxies) and the answer a refused client
gets: 429 with a message that says how long to wait, as JSON for the API and as a page otherwise.

Passwords are hashed with Argon2id (``WorkbenchArgon2PasswordHasher``, first in ``PASSWORD_HASHERS``).
"""

from __future__ import annotations

import hashlib
import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.hashers import Argon2PasswordHasher
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

LOCKED_OUT_STATUS = 429


class WorkbenchArgon2PasswordHasher(Argon2PasswordHasher):
    """Argon2id with OWASP's recommended parameters (19 MiB of memory, 2 passes, 1 lane): about 0.06 s
    per sign-in on a busy 2-core machine, where Django's defaults (100 MiB, 8 lanes) took 0.6 to 1.1 s,
    no faster than the PBKDF2 it replaces. Same algorithm name (``argon2``): hashes made with other
    parameters still verify and are re-hashed with these at the next sign-in."""

    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1


def client_ip(request: HttpRequest) -> str:
    """The client's address: ``REMOTE_ADDR``, or behind N trusted reverse proxies
    (``WORKBENCH_TRUSTED_PROXIES``) the N-th address from the right of ``X-Forwarded-For`` (the one the
    outermost trusted proxy saw; the entries left of it are the client's own claims and are ignored)."""
    proxies = settings.WORKBENCH_TRUSTED_PROXIES
    remote = str(request.META.get("REMOTE_ADDR") or "")
    if proxies <= 0:
        return remote
    hops = [part.strip() for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    hops = [hop for hop in hops if hop]
    return hops[-proxies] if len(hops) >= proxies else remote


def cooloff_minutes() -> int:
    cooloff = settings.AXES_COOLOFF_TIME
    seconds = cooloff.total_seconds() if isinstance(cooloff, timedelta) else float(cooloff or 0) * 3600
    return max(1, math.ceil(seconds / 60))


def lockout_message() -> str:
    minutes = cooloff_minutes()
    return (
        "Too many failed sign-ins for this account or from this address. Signing in is paused for "
        f"{minutes} minute{'s' if minutes != 1 else ''}; try again then, or ask an admin to lift it "
        "(manage.py axes_reset_username NAME)."
    )


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """What a locked-out client gets (``AXES_LOCKOUT_CALLABLE``): 429 with ``Retry-After``."""
    message = lockout_message()
    response: HttpResponse
    if request.path_info.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=LOCKED_OUT_STATUS)
    else:
        response = render(
            request, "registration/locked_out.html", {"message": message}, status=LOCKED_OUT_STATUS
        )
    response["Retry-After"] = str(cooloff_minutes() * 60)
    return response


# --- Password reset: requests per client address and per email address -------------------------------


def password_reset_over_limit(request: HttpRequest, email: str) -> bool:
    """Count this password-reset request against the client's address (``client_ip``, as the sign-in
    lockout reads it) and against the email address it names (hashed; any case), each in a fixed
    window of ``WORKBENCH_PASSWORD_RESET_WINDOW_MINUTES``; True when either went over
    ``WORKBENCH_PASSWORD_RESET_LIMIT`` (docs/security.md, "Password reset").

    The counts live in Django's cache (``CACHES["default"]``): per process on the embedded default, so
    with N web processes a client may get up to N times the limit; shared by every process with a shared
    cache (Redis)."""
    limit = settings.WORKBENCH_PASSWORD_RESET_LIMIT
    if limit <= 0:
        return False
    window = max(1, settings.WORKBENCH_PASSWORD_RESET_WINDOW_MINUTES) * 60
    digest = hashlib.sha256(email.strip().lower().encode()).hexdigest()
    over = False
    for key in (f"password-reset:ip:{client_ip(request)}", f"password-reset:email:{digest}"):
        cache.add(key, 0, timeout=window)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=window)
            count = 1
        over = over or count > limit
    return over


def password_reset_limit_message() -> str:
    minutes = max(1, settings.WORKBENCH_PASSWORD_RESET_WINDOW_MINUTES)
    return (
        "Too many password-reset requests for this address or from this network. Try again in "
        f"{minutes} minute{'s' if minutes != 1 else ''}, or ask an admin for a link."
    )
