"""Checks for input from outside (requests, uploaded files) that every layer shares: JSON that a
database can store, ids and whole numbers that fit a column, text without null characters.

Each check raises ``InputRefused`` (a ``ValidationFailed``: a 400 with a message that names where the
problem is) so that the caller can prefix the file and line it was reading. Why each rule exists:

- JSON nested deeper than ``MAX_JSON_DEPTH`` is refused: Python's parser raises ``RecursionError``
  near 1,000 levels, and values nested that deep break every later step (encoding, the database).
- ``NaN``, ``Infinity`` and numbers too large for a float (``1e400``) are refused: they are not JSON,
  SQLite's ``JSON_VALID`` check and PostgreSQL's ``jsonb`` refuse them, and ``int(inf)`` overflows.
- A null character (``\\u0000``) is refused in any text or JSON string: PostgreSQL's ``text`` and
  ``jsonb`` cannot hold one. Lone UTF-16 surrogates (``\\ud800``) are refused: they cannot be encoded
  as UTF-8 for any database driver.
- Ids must be plain ASCII digits up to ``MAX_ID`` (2**63 - 1, the largest ``BigAutoField``); larger
  numbers overflow the database's integer types.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from common.errors import ValidationFailed

MAX_JSON_DEPTH = 64
MAX_ID = 2**63 - 1  # BigAutoField, BigIntegerField
MIN_BIG_INT = -(2**63)
MAX_POSITIVE_INT = 2**31 - 1  # PositiveIntegerField on every supported database


class InputRefused(ValidationFailed):
    """A value from outside that no layer may store; ``message`` says what and where."""


class MalformedJSON(InputRefused):
    """Text that is not JSON at all (a caller may then keep it as text, e.g. a CSV cell)."""


def _refuse_constant(name: str) -> Any:
    raise InputRefused(f"{name} is not a number JSON allows (NaN and Infinity are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputRefused(f"{text[:40]} is not a finite number")
    return value


def _where(path: tuple[str, ...]) -> str:
    return ".".join(path) if path else "the JSON"


def _walk(value: Any, path: tuple[str, ...], depth: int) -> Iterator[tuple[Any, tuple[str, ...], int]]:
    """Every value inside ``value`` with its path and depth, without recursion (depth is unbounded here)."""
    stack = [(value, path, depth)]
    while stack:
        current, where, level = stack.pop()
        yield current, where, level
        if isinstance(current, dict):
            stack.extend((child, (*where, str(key)), level + 1) for key, child in current.items())
            stack.extend((key, (*where, "(key)"), level + 1) for key in current if isinstance(key, str))
        elif isinstance(current, list | tuple):
            stack.extend((child, (*where, str(index)), level + 1) for index, child in enumerate(current))


_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (a null character, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a null character (\\u0000)"
    if not text.isascii() and _SURROGATE.search(text):
        return "contains a lone UTF-16 surrogate (not valid Unicode)"
    return None


def text_check(text: str, field: str) -> str:
    """``text`` unchanged, or InputRefused naming ``field`` when a database could not store it."""
    problem = text_problem(text)
    if problem is not None:
        raise InputRefused(f"{field} {problem}", {field: problem})
    return text


def json_value_check(value: Any, *, where: str = "") -> Any:
    """``value`` (already parsed, e.g. from a form or YAML) unchanged when every database can store it
    as JSON: nesting at most ``MAX_JSON_DEPTH``, finite numbers, text without null characters."""
    root = (where,) if where else ()
    for current, path, depth in _walk(value, root, 0):
        if depth > MAX_JSON_DEPTH:
            raise InputRefused(f"{_where(root)} is nested more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(current, float) and not math.isfinite(current):
            raise InputRefused(f"{_where(path)} is not a finite number (NaN and Infinity are refused)")
        if isinstance(current, str):
            problem = text_problem(current)
            if problem is not None:
                raise InputRefused(f"{_where(path)} {problem}")
    return value


def json_loads(text: str | bytes, *, where: str = "") -> Any:
    """Parse JSON text that every layer can store (see the module docstring); InputRefused otherwise,
    its message starting with ``where`` when given (e.g. "items.jsonl line 3: ...").

    Malformed JSON raises ``MalformedJSON`` (an InputRefused), with the parser's message and position.
    """
    prefix = f"{where}: " if where else ""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError as exc:
        raise InputRefused(f"{prefix}the JSON is nested more than {MAX_JSON_DEPTH} levels deep") from exc
    except json.JSONDecodeError as exc:
        raise MalformedJSON(f"{prefix}not valid JSON ({exc.msg} at character {exc.pos})") from exc
    except UnicodeDecodeError as exc:
        raise MalformedJSON(f"{prefix}not UTF-8 text") from exc
    except InputRefused as exc:
        raise InputRefused(f"{prefix}{exc.message}") from exc
    try:
        return json_value_check(value)
    except InputRefused as exc:
        raise InputRefused(f"{prefix}{exc.message}") from exc


def id_from_text(raw: Any) -> int | None:
    """An id from a URL or form value: plain ASCII digits, at most ``MAX_ID``; None for anything else
    (callers answer 404 or 400: no row can have that id)."""
    text = str(raw).strip() if raw is not None else ""
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    value = int(text)
    return value if value <= MAX_ID else None


def whole_number_from_text(raw: Any, *, low: int = 0, high: int = MAX_POSITIVE_INT) -> int | None:
    """A whole number from a form value (ASCII digits only, as ``str.isdigit`` also takes '²'), or None
    when it is not one or lies outside [low, high]."""
    text = str(raw).strip() if raw is not None else ""
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 30:
        return None
    value = -int(digits) if negative else int(digits)
    return value if low <= value <= high else None
