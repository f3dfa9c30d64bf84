"""What the adjudication page shows of one item: everyone's answers as option labels, and every
annotator's boxes in that annotator's colour (an SVG overlay in the image's own pixels).

Answers are stored as option keys (``['hat', 'glasses']``); a person deciding reads the protocol's
labels, so ``answer_text`` turns a stored value into them (unknown keys are shown as they are). Boxes
are stored in original-image pixels (``{option, x, y, w, h, image}``); ``box_overlays`` groups them per
image with the image's width and height, so the page's SVG ``viewBox`` is the original size and the
browser scales the boxes with the displayed image (no script).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotations.models import Annotation, Annotator, ConsensusLabel, Item, Study
from annotations.protocols.schema import Protocol, Question
from annotations.selectors.counted import counted_annotations

# Okabe-Ito: told apart by people with the common colour-vision deficiencies.
ANNOTATOR_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


def option_labels(question: Question, metadata: Mapping[str, Any]) -> dict[str, str]:
    """Every key an answer to ``question`` may hold, with its label (Unsure and None included)."""
    labels = {option.key: option.label for option in question.options_for(dict(metadata))}
    for extra in (question.unsure, question.none_option):
        if extra is not None:
            labels[extra.key] = extra.label
    return labels


def answer_text(question: Question, metadata: Mapping[str, Any], value: Any) -> str:
    """A stored answer as a person reads it: option labels for choices, yes/no for binary, a count of
    boxes for boxes, the text itself for text."""
    if value is None:
        return "–"
    if question.kind == "binary":
        return {1: "yes", 0: "no"}.get(value, str(value)) if not isinstance(value, str) else value
    if question.kind == "boxes":
        count = len(value) if isinstance(value, list) else 0
        return f"{count} box{'es' if count != 1 else ''}"
    if question.is_choice:
        labels = option_labels(question, metadata)
        values = value if isinstance(value, list) else [value]
        if not values:
            return "(nothing selected)"
        return ", ".join(labels.get(str(v), str(v)) for v in values)
    return str(value)


def reason_text(question: Question, metadata: Mapping[str, Any], reason: str) -> str:
    """A consensus or queue reason (``tie between 'led_strip' and 'sleek'``) with each quoted option
    key read as its label (``tie between 'LED strip' and 'Sleek'``)."""
    for key, label in option_labels(question, metadata).items():
        reason = reason.replace(f"'{key}'", f"'{label}'")
    return reason


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float
    label: str
    annotator: str
    colour: str


@dataclass
class ImageOverlay:
    """One image with the boxes drawn on it, in its original pixels."""

    position: int
    width: int
    height: int
    boxes: list[Box] = field(default_factory=list)


@dataclass(frozen=True)
class LegendEntry:
    annotator: str
    kind: str
    colour: str
    boxes: int


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def box_overlays(
    *,
    protocol: Protocol,
    item: Item,
    annotations: Iterable[Annotation],
    sizes: Sequence[tuple[int, int | None, int | None]],
) -> tuple[list[ImageOverlay], list[LegendEntry]]:
    """Every boxes answer of the item drawn per image, and the legend (annotator, colour, boxes).

    ``sizes``: (position, width, height) of the item's images with files, in order; a box's ``image``
    is an index into them. Images of unknown size get no overlay (their boxes are counted in the
    legend all the same); each annotator keeps one colour over every image and question."""
    by_index = {
        index: ImageOverlay(position=position, width=width, height=height)
        for index, (position, width, height) in enumerate(sizes)
        if width and height
    }
    colours: dict[int, str] = {}
    legend: dict[int, LegendEntry] = {}
    for annotation in annotations:
        if not protocol.has_question(annotation.question_key):
            continue
        question = protocol.question(annotation.question_key)
        if question.kind != "boxes" or not isinstance(annotation.value, list):
            continue
        linked = protocol.question(question.linked_question) if question.linked_question else None
        labels = option_labels(linked, item.metadata) if linked is not None else {}
        who = annotation.annotator
        colour = colours.setdefault(who.pk, ANNOTATOR_COLOURS[len(colours) % len(ANNOTATOR_COLOURS)])
        drawn = 0
        for raw in annotation.value:
            if not isinstance(raw, Mapping):
                continue
            numbers = [_number(raw.get(name)) for name in ("x", "y", "w", "h")]
            image = raw.get("image", 0)
            overlay = by_index.get(image) if isinstance(image, int) else None
            drawn += 1
            if overlay is None or any(n is None for n in numbers):
                continue
            x, y, w, h = (float(n or 0) for n in numbers)
            option = str(raw.get("option", ""))
            overlay.boxes.append(Box(x, y, w, h, labels.get(option, option), who.name, colour))
        previous = legend.get(who.pk)
        legend[who.pk] = LegendEntry(who.name, who.kind, colour, drawn + (previous.boxes if previous else 0))
    return list(by_index.values()), list(legend.values())


def _comparable(value: Any) -> Any:
    """An answer in a form that compares by content (lists and objects as sorted JSON)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def adjudication_queue(*, study: Study) -> list[dict[str, Any]]:
    """Unresolved labels, and resolved ones a machine labeller answered differently."""
    queue: list[dict[str, Any]] = []
    labels = (
        ConsensusLabel.objects.filter(study=study, item__control_kind="", pending=False)
        .exclude(rule="adjudicated")
        .select_related("item")
    )
    resolved: dict[tuple[int, str], Any] = {}
    for label in labels:
        if not label.resolved:
            queue.append(
                {
                    "item": label.item_id,
                    "external_id": label.item.external_id,
                    "question": label.question_key,
                    "reason": label.reason or "unresolved",
                }
            )
        else:
            resolved[(label.item_id, label.question_key)] = label
    machine = (
        counted_annotations(study)
        .filter(annotator__kind=Annotator.Kind.MACHINE)
        .values_list("item_id", "question_key", "value", "annotator__name")
    )
    flagged: set[tuple[int, str]] = set()
    for item_id, question_key, value, name in machine:
        consensus = resolved.get((item_id, question_key))
        if (
            consensus is not None
            and _comparable(consensus.value) != _comparable(value)
            and (item_id, question_key) not in flagged
        ):
            flagged.add((item_id, question_key))
            queue.append(
                {
                    "item": item_id,
                    "external_id": consensus.item.external_id,
                    "question": question_key,
                    "reason": f"{name} said {value!r}, the consensus is {consensus.value!r}",
                }
            )
    return sorted(queue, key=lambda entry: (entry["item"], entry["question"]))
