"""Server-side requests to URLs that users give (a VLM endpoint, an image URL).

Off unless an admin sets ``WORKBENCH_ALLOW_URL_FETCH=true``; even then never to loopback,
private, link-local, multicast or reserved addresses (every address the host name resolves to is
checked). Endpoints an admin configures on the command line or in the admin are trusted and do not
pass through here.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from common.errors import NotAllowed, ValidationFailed


def outbound_url_check(url: str) -> str:
    """Return ``url`` if the server may fetch it, or raise with the reason."""
    if not settings.WORKBENCH_ALLOW_URL_FETCH:
        raise NotAllowed(
            "fetching user-given URLs is switched off (an admin can set WORKBENCH_ALLOW_URL_FETCH)"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed(f"{url!r} is not an http(s) URL")
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except socket.gaierror as exc:
        raise ValidationFailed(f"cannot resolve {parts.hostname!r}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if (
            address.is_private
            or address.is_loopback
            or address.is_link_local
            or address.is_multicast
            or address.is_reserved
            or address.is_unspecified
        ):
            raise NotAllowed(f"{parts.hostname!r} resolves to {address}, a local or private address")
    return url
