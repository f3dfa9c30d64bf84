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
- A whole number written with more than ``MAX_INT_DIGITS`` digits is refused while parsing, naming its
  place: no column holds it, and from 4,301 digits Python's ``int()`` raises ``ValueError`` ("Exceeds
  the limit") and takes time that grows with the square of the length.
- YAML (``yaml_loads``, ``CheckedSafeLoader``) gets the same rules, with the line: nesting deeper than
  ``MAX_JSON_DEPTH`` (PyYAML's composer recurses) and integers longer than ``MAX_INT_DIGITS`` are
  refused while parsing, then the value goes through ``json_value_check``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml

from common.errors import ValidationFailed

MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40  # 10**40 is past every integer column (2**63 ~ 9.2e18) and far below Python's limit
MAX_ID = 2**63 - 1  # BigAutoField, BigIntegerField
MIN_BIG_INT = -(2**63)
MAX_POSITIVE_INT = 2**31 - 1  # PositiveIntegerField on every supported database


class InputRefused(ValidationFailed):
    """A value from outside that no layer may store; ``message`` says what and where."""


class MalformedJSON(InputRefused):
    """Text that is not JSON at all (a caller may then keep it as text, e.g. a CSV cell)."""


class _Refused:
    """What the JSON parser put in place of a number no layer may take (NaN, Infinity, 1e400, an integer
    of too many digits), so that ``json_value_check`` can refuse it naming its place in the JSON.
    Never leaves this module: ``json_loads`` always checks what it parsed."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _refuse_constant(name: str) -> _Refused:
    return _Refused(f"is {name}: not a number JSON allows (NaN and Infinity are refused)")


def _finite_float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"is {text[:40]}: not a finite number")
    return value


def _bounded_int(text: str) -> int | _Refused:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        return _Refused(f"is a whole number of {digits:,} digits (at most {MAX_INT_DIGITS} are taken)")
    return int(text)


def _where(path: tuple[str, ...]) -> str:
    return ".".join(path) if path else "the JSON"


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
    as JSON: nesting at most ``MAX_JSON_DEPTH``, finite numbers, text without null characters.

    Walked without recursion; numbers inside lists are checked in place (an import's embeddings hold
    millions), and a place's path is built only for what is refused or holds more values."""
    root = (where,) if where else ()
    stack: list[tuple[Any, tuple[str, ...], int]] = [(value, root, 0)]
    while stack:
        current, path, depth = stack.pop()
        if isinstance(current, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH and current:
                raise InputRefused(f"{_where(root)} is nested more than {MAX_JSON_DEPTH} levels deep")
            if isinstance(current, dict):
                for key, child in current.items():
                    if isinstance(key, str):
                        _scalar_check(key, (*path, "(key)"))
                    stack.append((child, (*path, str(key)), depth + 1))
                continue
            for index, child in enumerate(current):
                kind = type(child)
                if kind is int or kind is bool or child is None:
                    continue
                if kind is float and math.isfinite(child):
                    continue
                stack.append((child, (*path, str(index)), depth + 1))
        else:
            _scalar_check(current, path)
    return value


def _scalar_check(current: Any, path: tuple[str, ...]) -> None:
    if isinstance(current, _Refused):
        raise InputRefused(f"{_where(path)} {current.reason}")
    if isinstance(current, float) and not math.isfinite(current):
        raise InputRefused(f"{_where(path)} is not a finite number (NaN and Infinity are refused)")
    if isinstance(current, str):
        problem = text_problem(current)
        if problem is not None:
            raise InputRefused(f"{_where(path)} {problem}")


def json_loads(text: str | bytes, *, where: str = "") -> Any:
    """Parse JSON text that every layer can store (see the module docstring); InputRefused otherwise,
    its message starting with ``where`` when given (e.g. "items.jsonl line 3: ...").

    Malformed JSON raises ``MalformedJSON`` (an InputRefused), with the parser's message and position.
    """
    prefix = f"{where}: " if where else ""
    value = json_parse(text, where=where)
    try:
        return json_value_check(value)
    except InputRefused as exc:
        raise InputRefused(f"{prefix}{exc.message}") from exc


def json_parse(text: str | bytes, *, where: str = "") -> Any:
    """JSON text parsed without its values checked: the caller must put what it returns through
    ``json_value_check`` (with its own ``where``, e.g. per record of an export) before any other use.
    Malformed JSON and nesting too deep for the parser are refused here."""
    prefix = f"{where}: " if where else ""
    try:
        return json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int
        )
    except RecursionError as exc:
        raise InputRefused(f"{prefix}the JSON is nested more than {MAX_JSON_DEPTH} levels deep") from exc
    except json.JSONDecodeError as exc:
        raise MalformedJSON(f"{prefix}not valid JSON ({exc.msg} at character {exc.pos})") from exc
    except UnicodeDecodeError as exc:
        raise MalformedJSON(f"{prefix}not UTF-8 text") from exc


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


class CheckedSafeLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader that refuses, with the line, nesting deeper than ``MAX_JSON_DEPTH`` (the
    composer recurses: 100,000 ``[`` raised ``RecursionError``) and integers of more than
    ``MAX_INT_DIGITS`` digits (``int()`` raises ``ValueError`` from 4,301). Both refusals are
    ``yaml.MarkedYAMLError``, which callers already report as YAML that cannot be read."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_JSON_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_JSON_DEPTH} levels deep", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_bounded_int(self, node: yaml.ScalarNode) -> Any:
        digits = sum(character.isalnum() for character in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a whole number of {digits:,} digits (at most {MAX_INT_DIGITS} are taken)",
                node.start_mark,
            )
        return self.construct_yaml_int(node)


CheckedSafeLoader.add_constructor("tag:yaml.org,2002:int", CheckedSafeLoader.construct_bounded_int)


class CheckedTextLoader(CheckedSafeLoader):
    """``CheckedSafeLoader`` that reads every plain value as the text written: ``NO`` stays "NO" (not
    False), ``010`` stays "010" (not 8), ``3`` stays "3". For labels people type (an invitation's fixed
    attributes), where YAML 1.1's guesses turned a region or group name into another value."""

    yaml_implicit_resolvers: dict[Any, Any] = {}


def yaml_loads(text: str, *, where: str = "", text_values: bool = False) -> Any:
    """YAML (or JSON) text through ``CheckedSafeLoader`` and ``json_value_check``: InputRefused naming
    ``where`` and the line (YAML that cannot be read is a ``MalformedJSON``, its message from PyYAML).
    ``text_values``: every plain scalar is the text written (``CheckedTextLoader``)."""
    prefix = f"{where}: " if where else ""
    loader = CheckedTextLoader if text_values else CheckedSafeLoader
    try:
        value = yaml.load(text, Loader=loader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        line = f"line {exc.problem_mark.line + 1}: " if exc.problem_mark is not None else ""
        raise MalformedJSON(f"{prefix}{line}not valid YAML: {exc.problem}") from exc
    except yaml.YAMLError as exc:
        raise MalformedJSON(f"{prefix}not valid YAML: {exc}") from exc
    try:
        return json_value_check(value)
    except InputRefused as exc:
        raise InputRefused(f"{prefix}{exc.message}") from exc
