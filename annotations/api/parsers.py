"""The API's JSON parser: DRF's, with the checks of ``common.checked_input`` (nesting depth, finite
numbers, no null characters), so a hostile body is a 400 that says what is wrong, never a 500."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from common.checked_input import InputRefused, json_loads


class CheckedJSONParser(JSONParser):
    """``application/json`` bodies through ``common.checked_input.json_loads`` (the default parser of
    every API view, set in ``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``)."""

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return json_loads(stream.read())
        except InputRefused as exc:
            raise ParseError(f"JSON parse error - {exc.message}") from exc
