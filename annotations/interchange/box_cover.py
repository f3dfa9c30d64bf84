"""The one import rule for ``boxes_required: each_selected`` when a file gives a selection without its
boxes (docs/protocols.md): every import that stores answers (JSONL annotations, Label Studio, COCO, a
study's own export) checks it here.

Boxes given in the file were checked against their selection when each answer was cleaned
(``protocols/answers.py``). A selection the file gives without that annotator's boxes on that item is
checked against the boxes already stored for them, and the file is refused at the selection's place
when an option has no box, as a task page's submit is. A machine annotator with no boxes at all may
answer the multi question alone (a labeller need not draw).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from common.errors import ImportRefused
from protocols.answers import missing_boxes_message, options_without_box
from protocols.schema import Protocol


@dataclass(frozen=True)
class GivenSelection:
    """One annotator's answer to a multi question, as an import file gives it."""

    item_id: int
    annotator: Hashable  # how the caller names the annotator (and finds their stored boxes)
    question_key: str
    value: Any
    metadata: dict[str, Any]  # the item's (which questions apply)
    machine: bool
    where: str  # the selection's place in the file ("line 12", "task 3, result 2")
    whose: str = ""  # said after the reason when set ("answer of 'ann' on item 'x'")


# (boxes question key, the (item id, annotator) pairs) -> their stored boxes answers (absent: none).
StoredBoxes = Callable[[str, set[tuple[int, Hashable]]], dict[tuple[int, Hashable], Any]]


def boxes_cover_check(
    protocol: Protocol,
    selections: Iterable[GivenSelection],
    in_file: Collection[tuple[int, Hashable, str]],
    stored_boxes: StoredBoxes,
) -> None:
    """Refuse (ImportRefused) the first selection whose options are not each covered by a box, where
    the file (``in_file``: (item id, annotator, question key) of every answer it gives) has no boxes
    answer of that annotator on that item; ``stored_boxes`` reads the stored ones, once per question."""
    given = list(selections)
    for boxes_question in protocol.questions:
        if boxes_question.kind != "boxes" or boxes_question.boxes_required != "each_selected":
            continue
        linked = protocol.question(boxes_question.linked_question or "")
        none_key = linked.none_option.key if linked.none_option else None
        open_selections = [
            s
            for s in given
            if s.question_key == linked.key
            and (s.item_id, s.annotator, boxes_question.key) not in in_file
            and boxes_question.applies_to(s.metadata)
            and options_without_box(boxes_question, [], s.value, none_key)
        ]
        if not open_selections:
            continue
        stored = stored_boxes(boxes_question.key, {(s.item_id, s.annotator) for s in open_selections})
        for selection in open_selections:
            boxes = stored.get((selection.item_id, selection.annotator))
            if boxes is None and selection.machine:
                continue
            missing = options_without_box(
                boxes_question, boxes if isinstance(boxes, list) else [], selection.value, none_key
            )
            if missing:
                where = "the file has no" if boxes is None else "the stored and the file's"
                raise ImportRefused(
                    f"{selection.where}: '{boxes_question.key}': {missing_boxes_message(missing, linked.key)}"
                    + (f" ({where} '{boxes_question.key}' {selection.whose})" if selection.whose else "")
                )
