"""The one import rule for boxes: a selection a file gives without its boxes is checked against the
stored boxes (annotations/interchange/box_cover.py), for every import that stores answers."""

from __future__ import annotations

from typing import Any

import pytest

from annotations.interchange.box_cover import GivenSelection, boxes_cover_check
from common.errors import ImportRefused
from protocols.schema import load_preset

PROTOCOL = load_preset("stereotype-markers")
MD = {"attributes": ["hat", "poor"]}


def selection(who: str, value: Any, *, machine: bool = False, whose: str = "") -> GivenSelection:
    return GivenSelection(1, who, "attributes", value, MD, machine, where=f"line of {who}", whose=whose)


def stored_from(boxes: dict[str, Any]) -> Any:
    asked: list[tuple[str, set[Any]]] = []

    def stored(key: str, pairs: set[Any]) -> dict[Any, Any]:
        asked.append((key, pairs))
        return {(item, who): boxes[who] for item, who in pairs if who in boxes}

    stored.asked = asked  # type: ignore[attr-defined]
    return stored


def test_a_persons_selection_without_any_box_is_refused_at_its_place() -> None:
    with pytest.raises(ImportRefused) as refused:
        boxes_cover_check(
            PROTOCOL, [selection("ann", ["hat"], whose="answer of 'ann'")], set(), stored_from({})
        )
    message = str(refused.value)
    assert message.startswith("line of ann: 'attribute_boxes':") and "hat" in message
    assert message.endswith("(the file has no 'attribute_boxes' answer of 'ann')")


def test_stored_boxes_cover_a_selection_and_a_stored_box_short_of_one_option_is_refused() -> None:
    hat = {"option": "hat", "x": 1, "y": 1, "w": 5, "h": 5}
    boxes_cover_check(PROTOCOL, [selection("ann", ["hat"])], set(), stored_from({"ann": [hat]}))
    with pytest.raises(ImportRefused, match="poor"):
        boxes_cover_check(PROTOCOL, [selection("ann", ["hat", "poor"])], set(), stored_from({"ann": [hat]}))


def test_a_machine_may_answer_alone_but_not_against_its_own_stored_boxes() -> None:
    boxes_cover_check(PROTOCOL, [selection("vlm", ["hat"], machine=True)], set(), stored_from({}))
    with pytest.raises(ImportRefused, match="hat"):
        boxes_cover_check(
            PROTOCOL, [selection("vlm", ["hat"], machine=True)], set(), stored_from({"vlm": []})
        )


def test_boxes_in_the_file_and_none_of_the_above_ask_nothing_stored() -> None:
    stored = stored_from({})
    in_file = {(1, "ann", "attribute_boxes")}
    boxes_cover_check(
        PROTOCOL, [selection("ann", ["hat"]), selection("bob", ["none_of_the_above"])], in_file, stored
    )
    assert stored.asked == []  # nothing open: the stored boxes are not read
