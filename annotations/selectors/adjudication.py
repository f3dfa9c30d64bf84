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
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotations.models import Annotation, Annotator, ConsensusLabel, Item, Study
from annotations.selectors.counted import counted_annotations
from common.errors import ValidationFailed
from protocols.schema import Protocol, Question

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
    names: Mapping[int, str] | None = None,
) -> tuple[list[ImageOverlay], list[LegendEntry]]:
    """Every boxes answer of the item drawn per image, and the legend (annotator, colour, boxes).

    ``sizes``: (position, width, height) of the item's images with files, in order; a box's ``image``
    is an index into them. Images of unknown size get no overlay (their boxes are counted in the
    legend all the same); each annotator keeps one colour over every image and question. ``names``:
    annotator id -> the name shown (``blinded_names``; default: each annotator's own name)."""
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
        shown = (names or {}).get(who.pk, who.name)
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
            overlay.boxes.append(Box(x, y, w, h, labels.get(option, option), shown, colour))
        previous = legend.get(who.pk)
        legend[who.pk] = LegendEntry(shown, who.kind, colour, drawn + (previous.boxes if previous else 0))
    return list(by_index.values()), list(legend.values())


def _comparable(value: Any) -> Any:
    """An answer in a form that compares by content (lists and objects as sorted JSON)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


REASON_KINDS: dict[str, str] = {
    "tie": "A tie",
    "rule": "The rule is not met",
    "machine": "A machine labeller disagrees",
}


def reason_kind(reason: str, *, machine: bool = False) -> str:
    """The filterable kind of a queue reason: ``tie``, ``rule`` (another unresolved label) or ``machine``."""
    if machine:
        return "machine"
    return "tie" if reason.startswith("tie") else "rule"


@dataclass(frozen=True)
class QueueFilters:
    """What the expert narrowed the queue to (each empty for "any"), from the page's GET parameters."""

    reason: str = ""
    question: str = ""
    condition: str = ""

    def params(self) -> dict[str, str]:
        """The non-empty filters as GET parameters (kept on every link and redirect of the queue)."""
        return {name: value for name, value in vars(self).items() if value}


def queue_filters(*, study: Study, reason: str = "", question: str = "", condition: str = "") -> QueueFilters:
    """The queue's filters from user input (the page's and the API's GET parameters), stripped;
    ValidationFailed names a reason or question the study does not have."""
    reason, question, condition = reason.strip(), question.strip(), condition.strip()
    if reason and reason not in REASON_KINDS:
        raise ValidationFailed(f"reason must be one of {', '.join(REASON_KINDS)}, not {reason[:40]!r}")
    if question and not study.protocol_obj.has_question(question):
        raise ValidationFailed(f"{question[:60]!r} is not a question of this study")
    if len(condition) > 128:
        raise ValidationFailed("condition is at most 128 characters")
    return QueueFilters(reason=reason, question=question, condition=condition)


def adjudication_queue(
    *, study: Study, filters: QueueFilters | None = None, item: int | None = None
) -> list[dict[str, Any]]:
    """Unresolved labels, and resolved ones a machine labeller answered differently, in item order.

    Each entry: item (pk), external_id, condition, question, prompt, reason (as stored, option keys
    quoted), reason_text (the same with the protocol's labels) and kind (``REASON_KINDS``).
    ``filters`` keeps the entries of one reason kind, question and item condition; ``item`` those of
    one item (pending labels are never queued). Resolved labels are read only where a machine
    labeller answered, so a study without one reads its unresolved labels alone."""
    filters = filters or QueueFilters()
    protocol = study.protocol_obj
    labels = ConsensusLabel.objects.filter(study=study, item__control_kind="", pending=False).exclude(
        rule="adjudicated"
    )
    machine = counted_annotations(study).filter(annotator__kind=Annotator.Kind.MACHINE)
    if item is not None:
        labels, machine = labels.filter(item_id=item), machine.filter(item_id=item)
    if filters.question:
        labels, machine = (
            labels.filter(question_key=filters.question),
            machine.filter(question_key=filters.question),
        )
    if filters.condition:
        labels, machine = (
            labels.filter(item__condition=filters.condition),
            machine.filter(item__condition=filters.condition),
        )

    def entry(label: ConsensusLabel, reason: str, kind: str) -> dict[str, Any]:
        question = (
            protocol.question(label.question_key) if protocol.has_question(label.question_key) else None
        )
        return {
            "item": label.item_id,
            "external_id": label.item.external_id,
            "condition": label.item.condition,
            "question": label.question_key,
            "prompt": question.prompt if question is not None else "",
            "reason": reason,
            "reason_text": reason_text(question, label.item.metadata, reason)
            if question is not None
            else reason,
            "kind": kind,
        }

    queue: list[dict[str, Any]] = []
    if filters.reason != "machine":
        for label in labels.filter(resolved=False).select_related("item"):
            reason = label.reason or "unresolved"
            if filters.reason in ("", reason_kind(reason)):
                queue.append(entry(label, reason, reason_kind(reason)))
    if filters.reason in ("", "machine"):
        answers = list(machine.values_list("item_id", "question_key", "value", "annotator__name"))
        resolved: dict[tuple[int, str], ConsensusLabel] = {}
        if answers:
            resolved = {
                (label.item_id, label.question_key): label
                for label in labels.filter(
                    resolved=True, item_id__in=machine.values("item_id")
                ).select_related("item")
            }
        flagged: set[tuple[int, str]] = set()
        for item_id, question_key, value, name in answers:
            consensus = resolved.get((item_id, question_key))
            if (
                consensus is not None
                and _comparable(consensus.value) != _comparable(value)
                and (item_id, question_key) not in flagged
            ):
                flagged.add((item_id, question_key))
                reason = f"{name} said {value!r}, the consensus is {consensus.value!r}"
                queue.append(entry(consensus, reason, "machine"))
    return sorted(queue, key=lambda entry: (entry["item"], entry["question"]))


def own_answers(*, study: Study, user: Any) -> set[tuple[int, str]]:
    """(item, question) pairs the account ``user`` answered as an annotator of ``study`` (counted
    answers): a tie or an unmet rule on one of them includes their own vote."""
    if not getattr(user, "is_authenticated", False):
        return set()
    return set(
        counted_annotations(study)
        .filter(annotator__user=user, annotator__kind=Annotator.Kind.HUMAN)
        .values_list("item_id", "question_key")
    )


def queue_for_adjudicator(
    *, study: Study, user: Any, filters: QueueFilters | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The queue offered to ``user``, and the entries left to another adjudicator: a tie or an unmet
    rule that includes ``user``'s own vote is not offered to them (an expert does not break their own
    tie); a machine disagreement is (the expert's vote is not what is in question)."""
    queue = adjudication_queue(study=study, filters=filters)
    own = own_answers(study=study, user=user)
    mine = [e for e in queue if e["kind"] != "machine" and (e["item"], e["question"]) in own]
    left = {(e["item"], e["question"]) for e in mine}
    return [e for e in queue if (e["item"], e["question"]) not in left], mine


def blinded_names(annotations: Iterable[Annotation]) -> dict[int, str]:
    """Annotator id -> the name the adjudication page shows: people as "Annotator 1", "Annotator 2"...
    in a fixed order (by annotator id), so a decision is not swayed by who answered; machine labellers
    keep their names (their identity is what a disagreement is about)."""
    people = sorted({a.annotator_id for a in annotations if a.annotator.kind == Annotator.Kind.HUMAN})
    names = {annotator_id: f"Annotator {n}" for n, annotator_id in enumerate(people, start=1)}
    for a in annotations:
        names.setdefault(a.annotator_id, a.annotator.name)
    return names


def queue_choices(
    *, study: Study, queue: list[dict[str, Any]] | None = None
) -> dict[str, list[tuple[str, str]]]:
    """The values each queue filter offers, as (value, label): the reason kinds, the questions and
    the item conditions that have an open entry now. ``queue``: the study's unfiltered queue when the
    caller already read it (else it is read here)."""
    if queue is None:
        queue = adjudication_queue(study=study)
    protocol = study.protocol_obj
    kinds = {entry["kind"] for entry in queue}
    questions = sorted({entry["question"] for entry in queue})
    conditions = sorted({entry["condition"] for entry in queue})
    return {
        "reason": [(kind, label) for kind, label in REASON_KINDS.items() if kind in kinds],
        "question": [
            (key, protocol.question(key).prompt if protocol.has_question(key) else key) for key in questions
        ],
        "condition": [(condition, condition or "(none)") for condition in conditions],
    }


def next_in_queue(queue: Sequence[Mapping[str, Any]], *, after: int) -> int | None:
    """The item to adjudicate after item ``after`` in a (filtered) queue read before its decisions
    were saved: the next one, else the first one left (wrapping round), else None."""
    items = [entry["item"] for entry in queue if entry["item"] != after]
    later = [item for item in items if item > after] or items
    return later[0] if later else None


def suggested_value(question: Question, label: ConsensusLabel | None, values: Sequence[Any]) -> Any:
    """What the decision form starts with: the consensus if resolved, else the human majority (the one
    answer given more often than any other), else nothing (a tie is the expert's to break)."""
    if label is not None and label.resolved and label.value is not None:
        return label.value
    counts = Counter(_comparable(value) for value in values if value not in (None, "", []))
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    winner = ranked[0][0]
    return next(value for value in values if _comparable(value) == winner)


def _decision_options(question: Question, metadata: Mapping[str, Any], chosen: Any) -> list[dict[str, Any]]:
    """The choices of a decision form with their keys on the keyboard (1-9 for the options in order,
    0 for Unsure / None of the above, 1 yes and 0 no for binary questions, as on the task page)."""
    picked = (
        {str(value) for value in (chosen if isinstance(chosen, list) else [chosen])}
        if chosen is not None
        else set()
    )
    if question.kind == "binary":
        pairs = [("1", "yes", "1"), ("0", "no", "0")]
    else:
        pairs = [
            (option.key, option.label, str(index) if index <= 9 else "")
            for index, option in enumerate(question.options_for(dict(metadata)), start=1)
        ]
        for extra in (question.unsure, question.none_option):
            if extra is not None:
                pairs.append((extra.key, extra.label, "0"))
    return [
        {"key": key, "label": label, "digit": digit, "checked": key in picked} for key, label, digit in pairs
    ]


def adjudication_review(
    *, study: Study, item: Item, queue: Sequence[Mapping[str, Any]], show_all: bool, blind: bool = True
) -> dict[str, Any]:
    """What the adjudication page shows of one item: its flagged questions (its entries in ``queue``,
    the filtered queue; all of the item's open ones when the filters leave none) with everyone's
    answers and the decision form pre-set to the consensus or the majority, and, when ``show_all``,
    the item's other questions (no pre-set answer: a decision there is optional). ``flagged`` lists
    the keys a save must decide; ``others`` counts the questions the "show all" switch adds. ``blind``
    (the default): people are shown as "Annotator 1", "Annotator 2"... (``names``)."""
    protocol = study.protocol_obj
    entries = [entry for entry in queue if entry["item"] == item.pk] or adjudication_queue(
        study=study, item=item.pk
    )
    flagged = {entry["question"] for entry in entries}
    annotations = list(
        item.annotations.select_related("annotator").order_by(
            "question_key", "annotator__kind", "annotator_id"
        )
    )
    names = blinded_names(annotations) if blind else {a.annotator_id: a.annotator.name for a in annotations}
    answers: dict[str, list[dict[str, Any]]] = {}
    human: dict[str, list[Any]] = {}
    for annotation in annotations:
        if not protocol.has_question(annotation.question_key):
            continue
        question = protocol.question(annotation.question_key)
        answers.setdefault(annotation.question_key, []).append(
            {
                "annotator": annotation.annotator,
                "name": names[annotation.annotator_id],
                "text": answer_text(question, item.metadata, annotation.value),
                "reason": annotation.reason,
            }
        )
        if annotation.annotator.kind == Annotator.Kind.HUMAN:
            human.setdefault(annotation.question_key, []).append(annotation.value)
    labels = {
        label.question_key: label
        for label in ConsensusLabel.objects.filter(item=item).select_related("adjudicated_by")
    }
    rows: list[dict[str, Any]] = []
    others = 0
    for question in protocol.questions_for(dict(item.metadata)):
        if question.kind == "boxes":
            continue
        is_flagged = question.key in flagged
        if not is_flagged:
            others += 1
            if not show_all:
                continue
        label = labels.get(question.key)
        suggested = suggested_value(question, label, human.get(question.key, [])) if is_flagged else None
        rows.append(
            {
                "question": question,
                "flagged": is_flagged,
                "entries": [entry for entry in entries if entry["question"] == question.key],
                "options": _decision_options(question, item.metadata, suggested),
                "suggested": suggested,
                "suggested_text": answer_text(question, item.metadata, suggested)
                if suggested is not None
                else "",
                "answers": answers.get(question.key, []),
                "label": label,
                "label_text": answer_text(question, item.metadata, label.value) if label is not None else "",
                "label_reason": reason_text(question, item.metadata, label.reason or "")
                if label is not None
                else "",
            }
        )
    rows.sort(key=lambda row: not row["flagged"])  # the questions waiting for a decision first
    return {
        "rows": rows,
        "flagged": sorted(flagged),
        "others": others,
        "annotations": annotations,
        "names": names,
    }
