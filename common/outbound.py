"""Which URLs the server may send requests to: the one policy for every outbound request a user's
configuration points at (a VLM labeller's ``base_url``, prompt refinement's endpoint).

A URL passes when:

- its scheme is one of ``WORKBENCH_OUTBOUND_SCHEMES`` (default ``https``, ``http``) and it names a
  host;
- every address its host resolves to (DNS is asked; an IP literal is itself) is a public address,
  or the host name, or the address, is allowed by ``WORKBENCH_OUTBOUND_ALLOWED_HOSTS``: host names,
  IP addresses or networks (``127.0.0.1``, ``10.0.0.0/8``, ``llm.internal``). Loopback, private,
  link-local (the cloud metadata service at 169.254.169.254), shared, multicast, reserved and
  unspecified addresses are refused unless listed there.

``outbound_url_check`` runs when a labeller is saved (the labellers page, ``register_labeller``,
the import of a study's labellers) and again in ``common.chat_client.ChatClient`` right before each
request is sent, so a host whose DNS answer changed since (a rebinding) is refused on the worker too
(docs/security.md, "Machine labellers: who may change them, where they may call").
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings

from common.errors import ValidationFailed

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class OutboundRefused(ValidationFailed):
    """A URL the server may not call; ``message`` names the URL's host and the reason."""


def _allowed() -> tuple[set[str], list[Network]]:
    """The host names and the networks of ``WORKBENCH_OUTBOUND_ALLOWED_HOSTS``."""
    names: set[str] = set()
    networks: list[Network] = []
    for entry in getattr(settings, "WORKBENCH_OUTBOUND_ALLOWED_HOSTS", []):
        text = str(entry).strip().lower()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
        except ValueError:
            names.add(text.rstrip("."))
    return names, networks


def _public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _public(address.ipv4_mapped)
    return address.is_global and not address.is_multicast


def _addresses(host: str, port: int) -> Iterable[Address]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise OutboundRefused(f"cannot resolve the host {host!r} of the URL") from exc
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def outbound_url_check(url: str) -> str:
    """Return ``url`` if the server may send requests to it (see the module docstring), else raise
    ``OutboundRefused`` (a 400) saying why. Never shows the URL's password or query."""
    schemes = [str(s).lower() for s in getattr(settings, "WORKBENCH_OUTBOUND_SCHEMES", ["https", "http"])]
    try:
        parts = urlsplit(str(url))
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError as exc:
        raise OutboundRefused(f"the URL is not valid: {exc}") from exc
    if parts.scheme.lower() not in schemes or not host:
        raise OutboundRefused(f"the URL must be {' or '.join(f'{s}://' for s in schemes)} with a host name")
    names, networks = _allowed()
    if host in names:
        return url
    for address in _addresses(host, port):
        if _public(address) or any(address in network for network in networks):
            continue
        raise OutboundRefused(
            f"the host {host!r} is {address}, a loopback, private, link-local or reserved address; an "
            "admin allows it with WORKBENCH_OUTBOUND_ALLOWED_HOSTS"
        )
    return url
