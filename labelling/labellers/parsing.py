"""Find the JSON object in a model's answer: bare, inside a ```json fence, or inside prose.

Models asked for "ONLY valid JSON" still wrap it ("Here is the analysis: ```json {...} ```").
:func:`extract_json_object` tries, in order: the whole text; each fenced block (```json or
plain ```); then every ``{`` in the text, decoding the longest valid object starting there with
``json.JSONDecoder.raw_decode``. The first object found wins. Nothing is repaired: a truncated or
invalid object is not found, and :class:`NoJsonObject` says so.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


class NoJsonObject(ValueError):
    """The text holds no decodable JSON object."""


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def extract_json_object(text: str) -> dict[str, Any]:
    """Return the first JSON object (a dict) in ``text``; raise :class:`NoJsonObject` if there is none."""
    stripped = text.strip()
    found = _as_object(stripped)
    if found is not None:
        return found
    for block in _FENCE_RE.findall(text):
        found = _as_object(block.strip())
        if found is not None:
            return found
    for match in re.finditer(r"\{", text):
        try:
            value, _end = _DECODER.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    preview = stripped[:80] + ("..." if len(stripped) > 80 else "")
    raise NoJsonObject(f"no JSON object in the answer: {preview!r}")
