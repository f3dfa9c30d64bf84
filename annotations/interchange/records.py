"""The one reader of JSON Lines files that every import shares (items, annotations, features, study
archives): a blank line is skipped, every other line must be a JSON object read by
``common.checked_input.json_loads`` (nesting, NaN, huge numbers, null characters refused), and a
refusal names the line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from common.checked_input import InputRefused, json_loads
from common.errors import ImportRefused


def utf8_text(data: bytes, name: str) -> str:
    """A file's text (a byte-order mark dropped), or a refusal naming the file."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc


def jsonl_objects(
    text: str,
    *,
    where: str = "",
    not_object: str = "each line must be a JSON object",
    limit: int | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line. ``where`` goes before "line N" in a refusal
    (a file's name and a space, or nothing); ``not_object`` is what a line that is not an object is
    told; more than ``limit`` objects is refused (the caller names the file)."""
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and count >= limit:
            raise ImportRefused(f"more than {limit} lines; split the file")
        try:
            record = json_loads(line, where=f"{where}line {number}")
        except InputRefused as exc:
            raise ImportRefused(exc.message) from exc
        if not isinstance(record, dict):
            raise ImportRefused(f"{where}line {number}: {not_object}")
        count += 1
        yield number, record
