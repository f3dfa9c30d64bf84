"""Secrets in configuration are write-only: every copy of a configuration that leaves the server
(API, pages, admin, exports, command output, logs) goes through :func:`redact`.

A value is secret when its key names one (a word ``key``, ``token``, ``secret``, ``password``,
``authorization``, ``credential``, ``cookie``, ... in ``api_key``, ``X-Api-Key``, ``accessToken``;
not ``api_key_env``, which names an environment variable, nor ``max_tokens``), or when it is a
value of ``extra_headers`` (HTTP headers carry keys under any name). A secret is shown as
:data:`MASK` followed by its last four characters when it is long enough that they give nothing
away (16 characters or more), else as the mask alone. A password in a URL
(``https://user:pw@host``) and URL query parameters named like secrets are masked too.

The stored configuration is never changed: labellers read the real one (``labelling/services.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

MASK = "••••"
SHOW_TAIL_FROM = 16
SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "bearer",
        "signature",
        "private",
    }
)
SECRET_CONTAINERS = frozenset({"extra_headers", "headers"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _words(name: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(name)]


def is_secret_key(name: str) -> bool:
    """Does this configuration key name a secret? (``api_key`` yes; ``api_key_env``, ``max_tokens`` no)."""
    words = _words(str(name))
    if not words or words[-1] == "env":
        return False
    return any(word in SECRET_WORDS for word in words)


def mask(value: Any) -> str:
    """A secret shown: the mask, plus the last four characters of a long one."""
    text = "" if value is None else str(value)
    if len(text) >= SHOW_TAIL_FROM:
        return f"{MASK}{text[-4:]}"
    return MASK


def _mask_all(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _mask_all(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_all(inner) for inner in value]
    if value is None or value == "":
        return value
    return mask(value)


def _redact_url(text: str) -> str:
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return text
    netloc = parts.netloc
    if password:
        netloc = netloc.replace(f":{password}@", f":{MASK}@", 1)
    query = "&".join(
        f"{piece.partition('=')[0]}={MASK}" if is_secret_key(unquote_plus(piece.partition("=")[0])) else piece
        for piece in parts.query.split("&")
    )
    if netloc == parts.netloc and query == parts.query:
        return text
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(config: Any) -> Any:
    """A copy of ``config`` with every secret masked (see the module docstring); the input is untouched."""
    if isinstance(config, Mapping):
        out: dict[str, Any] = {}
        for key, value in config.items():
            if is_secret_key(str(key)) or str(key).lower() in SECRET_CONTAINERS:
                out[key] = _mask_all(value)
            else:
                out[key] = redact(value)
        return out
    if isinstance(config, list | tuple):
        return [redact(value) for value in config]
    if isinstance(config, str):
        return _redact_url(config)
    return config


def unredact(edited: Any, original: Any, *, masked_all: bool = False) -> Any:
    """An edited copy of ``redact(original)`` with every value still shown masked given its real
    value back: a form that shows a configuration redacted never echoes a secret, and keeping a
    secret needs no re-typing. A value the editor changed (or added) is taken as given."""
    if isinstance(edited, Mapping) and isinstance(original, Mapping):
        out: dict[str, Any] = {}
        for key, value in edited.items():
            if key not in original:
                out[key] = value
                continue
            secret = masked_all or is_secret_key(str(key)) or str(key).lower() in SECRET_CONTAINERS
            shown = _mask_all(original[key]) if secret else redact(original[key])
            out[key] = original[key] if value == shown else unredact(value, original[key], masked_all=secret)
        return out
    if isinstance(edited, list) and isinstance(original, list | tuple) and len(edited) == len(original):
        return [unredact(e, o, masked_all=masked_all) for e, o in zip(edited, original, strict=True)]
    if isinstance(edited, str) and not masked_all and edited == redact(original):
        return original  # a URL shown with its password masked
    return edited
