"""Validation of answers against their question: one format for humans, imports and machines.

``clean_answer`` checks one answer; ``clean_submission`` checks a whole task (required answers,
``show_if`` conditions, boxes linked to selected options). Errors name the question and say what
is wrong; nothing is coerced into a different answer (box coordinates are rounded to pixels).

Two completeness rules a protocol can turn on (docs/protocols.md, "Completeness rules"):

- ``require_all_shown`` on a multi question: a ``shown`` list must hold every option of the item
  (``options_unseen``); no ``shown`` at all means every option was shown (a labeller, an API client
  that does not page).
- ``boxes_required: each_selected`` on a boxes question: every option selected in the linked multi
  question (None of the above aside) has at least one box (``options_without_box``). ``clean_answer``
  checks it whenever it is told the selection; ``clean_submission`` also when the boxes answer is
  missing, since a task is a whole. An answer to the multi question alone, outside a task (a machine
  labeller, an imported machine line), is not refused for the boxes it does not give.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from common.checked_input import text_problem
from protocols.colours import BASIC_COLOURS, normalise_colour
from protocols.schema import Protocol, Question

MAX_TEXT_LENGTH = 2000
MAX_BOXES = 200
MAX_PIXELS = 1_000_000  # a box coordinate or size beyond this is no image's


class AnswerError(ValueError):
    def __init__(self, question_key: str, message: str) -> None:
        self.question_key = question_key
        self.message = message
        super().__init__(f"{question_key}: {message}")


class SubmissionError(ValueError):
    """Several answers failed; ``errors`` maps question key to message (shown next to each question)."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {message}" for key, message in errors.items()))


@dataclass(frozen=True)
class CleanAnswer:
    question_key: str
    value: Any
    shown: list[str] | None = None
    reason: str = ""


@dataclass(frozen=True)
class ItemContext:
    """What validation needs to know about the item: metadata and image sizes (None if unknown)."""

    metadata: Mapping[str, Any]
    image_sizes: Sequence[tuple[int, int] | None] = ()


def _choice(question: Question, value: Any, context: ItemContext) -> str:
    keys = question.choice_keys(dict(context.metadata))
    if not isinstance(value, str):
        raise AnswerError(question.key, f"must be one option key, got {type(value).__name__}")
    if value not in keys:
        raise AnswerError(question.key, f"'{value}' is not one of {', '.join(keys)}")
    return value


def _multi(
    question: Question, value: Any, shown: Any, context: ItemContext
) -> tuple[list[str], list[str] | None]:
    keys = question.choice_keys(dict(context.metadata))
    if not isinstance(value, list) or not all(isinstance(key, str) for key in value):
        raise AnswerError(question.key, "must be a list of option keys")
    unknown = [key for key in value if key not in keys]
    if unknown:
        raise AnswerError(question.key, f"'{unknown[0]}' is not one of {', '.join(keys)}")
    if len(set(value)) != len(value):
        raise AnswerError(question.key, "an option is selected twice")
    none_key = question.none_option.key if question.none_option else None
    if none_key in value and len(value) > 1:
        raise AnswerError(question.key, f"'{none_key}' excludes every other option")
    shown_list: list[str] | None = None
    if shown is not None:
        if not isinstance(shown, list) or not all(isinstance(key, str) for key in shown):
            raise AnswerError(question.key, "'shown' must be a list of option keys")
        bad = [key for key in shown if key not in keys]
        if bad:
            raise AnswerError(question.key, f"shown option '{bad[0]}' is not one of {', '.join(keys)}")
        not_shown = [key for key in value if key not in shown]
        if not_shown:
            raise AnswerError(question.key, f"'{not_shown[0]}' was selected but not shown")
        shown_list = list(dict.fromkeys(shown))
        unseen = options_unseen(question, shown_list, context.metadata)
        if unseen:
            raise AnswerError(
                question.key,
                f"every option must be shown before submitting; {_count(len(unseen), 'option')} "
                f"never shown: {_quoted(unseen)}",
            )
    return list(value), shown_list


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _quoted(keys: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(f"'{key}'" for key in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def options_unseen(question: Question, shown: Sequence[str] | None, metadata: Mapping[str, Any]) -> list[str]:
    """The item's options missing from ``shown`` when ``question.require_all_shown`` (else none).

    ``shown`` None means "every option was shown" (no paging recorded), so nothing is missing. The
    none option is not counted: the task page shows it with every page.
    """
    if not question.require_all_shown or shown is None:
        return []
    seen = set(shown)
    return [option.key for option in question.options_for(dict(metadata)) if option.key not in seen]


def options_without_box(
    question: Question, boxes: Sequence[Mapping[str, Any]], selected: Sequence[str], none_key: str | None
) -> list[str]:
    """The selected options (the none option aside) that no box supports, when the boxes question
    says ``boxes_required: each_selected`` (else none), in the order they were selected."""
    if question.boxes_required != "each_selected":
        return []
    boxed = {box.get("option") for box in boxes}
    return [key for key in selected if key != none_key and key not in boxed]


def missing_boxes_message(missing: Sequence[str], linked_key: str) -> str:
    """The refusal for ``options_without_box``: how many, and which (names every option at fault)."""
    verb = "has" if len(missing) == 1 else "have"
    return (
        f"{_count(len(missing), 'selected option')} {verb} no box: {_quoted(missing, limit=len(missing))}; "
        f"draw at least one box for each option selected in '{linked_key}'"
    )


def _binary(question: Question, value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if value in (0, 1) and isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise AnswerError(question.key, "must be 0 or 1")


def _text(question: Question, value: Any) -> str:
    if not isinstance(value, str):
        raise AnswerError(question.key, "must be text")
    problem = text_problem(value)
    if problem is not None:
        raise AnswerError(question.key, problem)
    text = value.strip()
    if len(text) > MAX_TEXT_LENGTH:
        raise AnswerError(question.key, f"is longer than {MAX_TEXT_LENGTH} characters")
    if question.required and not text:
        raise AnswerError(question.key, "is required")
    if question.normaliser == "lowercase":
        return text.lower()
    if question.normaliser == "colour" and text:
        colour = normalise_colour(text)
        if colour is None:
            raise AnswerError(
                question.key, f"'{text}' is not a colour; use one of {', '.join(BASIC_COLOURS)}"
            )
        return colour
    return text


def _number(question: Question, box: Mapping[str, Any], name: str, index: int) -> int:
    raw = box.get(name)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise AnswerError(question.key, f"box {index + 1}: '{name}' must be a number of pixels")
    if not math.isfinite(raw):  # NaN, Infinity, or 1e400 read as a float
        raise AnswerError(question.key, f"box {index + 1}: '{name}' is not a finite number")
    if abs(raw) > MAX_PIXELS:
        raise AnswerError(question.key, f"box {index + 1}: '{name}' is more than {MAX_PIXELS} pixels")
    return int(round(raw))


def _boxes(
    question: Question, value: Any, context: ItemContext, selected: Sequence[str] | None, linked: Question
) -> list[dict[str, int | str]]:
    if not isinstance(value, list):
        raise AnswerError(question.key, "must be a list of boxes")
    if len(value) > MAX_BOXES:
        raise AnswerError(question.key, f"more than {MAX_BOXES} boxes")
    allowed = [option.key for option in linked.options_for(dict(context.metadata))]
    boxes: list[dict[str, int | str]] = []
    for index, box in enumerate(value):
        if not isinstance(box, Mapping):
            raise AnswerError(question.key, f"box {index + 1} must be an object with option, x, y, w, h")
        unknown = sorted(set(box) - {"option", "x", "y", "w", "h", "image"})
        if unknown:
            raise AnswerError(question.key, f"box {index + 1}: unknown field '{unknown[0]}'")
        option = box.get("option")
        if option not in allowed:
            raise AnswerError(
                question.key, f"box {index + 1}: option '{option}' is not one of {', '.join(allowed)}"
            )
        if selected is not None and option not in selected:
            raise AnswerError(
                question.key, f"box {index + 1}: option '{option}' is not selected in '{linked.key}'"
            )
        x, y, w, h = (_number(question, box, name, index) for name in ("x", "y", "w", "h"))
        image = box.get("image", 0)
        if isinstance(image, bool) or not isinstance(image, int) or image < 0:
            raise AnswerError(question.key, f"box {index + 1}: 'image' must be an image index")
        if context.image_sizes and image >= len(context.image_sizes):
            raise AnswerError(question.key, f"box {index + 1}: the item has no image {image}")
        if w < 1 or h < 1 or x < 0 or y < 0:
            raise AnswerError(
                question.key, f"box {index + 1}: needs x, y >= 0 and a width and height of at least 1"
            )
        size = context.image_sizes[image] if image < len(context.image_sizes) else None
        if size is not None and (x + w > size[0] or y + h > size[1]):
            raise AnswerError(
                question.key, f"box {index + 1} ({x},{y},{w},{h}) is outside the {size[0]}x{size[1]} image"
            )
        clean: dict[str, int | str] = {"option": str(option), "x": x, "y": y, "w": w, "h": h}
        if "image" in box:
            clean["image"] = image
        boxes.append(clean)
    if selected is not None:
        none_key = linked.none_option.key if linked.none_option else None
        missing = options_without_box(question, boxes, selected, none_key)
        if missing:
            raise AnswerError(question.key, missing_boxes_message(missing, linked.key))
    return boxes


def clean_answer(
    question: Question,
    value: Any,
    *,
    context: ItemContext,
    protocol: Protocol | None = None,
    shown: Any = None,
    reason: Any = "",
    selected: Sequence[str] | None = None,
) -> CleanAnswer:
    """Validate one answer. ``selected``: for boxes, the options chosen in the linked multi question."""
    reason_text = "" if reason is None else reason
    if not isinstance(reason_text, str):
        raise AnswerError(question.key, "the reason must be text")
    problem = text_problem(reason_text)
    if problem is not None:
        raise AnswerError(question.key, f"the reason {problem}")
    reason_text = reason_text.strip()
    if len(reason_text) > MAX_TEXT_LENGTH:
        raise AnswerError(question.key, f"the reason is longer than {MAX_TEXT_LENGTH} characters")
    if reason_text and not (question.kind == "binary" and question.reason != "none"):
        raise AnswerError(question.key, "this question takes no reason")
    if shown is not None and question.kind != "multi":
        raise AnswerError(question.key, "'shown' applies only to multi questions")
    shown_list = None
    if question.kind in ("likert", "single"):
        clean: Any = _choice(question, value, context)
    elif question.kind == "multi":
        clean, shown_list = _multi(question, value, shown, context)
    elif question.kind == "binary":
        clean = _binary(question, value)
        if question.reason == "required" and not reason_text:
            raise AnswerError(question.key, "a reason is required")
    elif question.kind == "text":
        clean = _text(question, value)
    else:
        if protocol is None or question.linked_question is None:
            raise AnswerError(question.key, "boxes need their protocol to be checked")
        clean = _boxes(question, value, context, selected, protocol.question(question.linked_question))
    return CleanAnswer(question_key=question.key, value=clean, shown=shown_list, reason=reason_text)


def questions_to_answer(protocol: Protocol, metadata: Mapping[str, Any], *, expert: bool) -> list[Question]:
    """The questions an annotator of this pool sees for an item (``applies_if``, ``expert_only``)."""
    return [
        question for question in protocol.questions_for(dict(metadata)) if expert or not question.expert_only
    ]


def clean_submission(
    protocol: Protocol,
    answers: Mapping[str, Mapping[str, Any]],
    *,
    context: ItemContext,
    expert: bool = False,
) -> list[CleanAnswer]:
    """Validate a whole task: ``answers`` maps question key to ``{"value", "shown"?, "reason"?}``.

    Required questions that apply (and whose ``show_if`` holds) must be answered; answers to
    questions that do not apply, or are hidden by ``show_if``, are refused rather than dropped.
    A boxes question with ``boxes_required: each_selected`` needs a box for every option selected
    in its linked question whether or not the task answers it (a missing answer is no box at all);
    it is checked once the selection itself is valid. Raises :class:`SubmissionError` with every
    problem at once.
    """
    errors: dict[str, str] = {}
    cleaned: dict[str, CleanAnswer] = {}
    visible = questions_to_answer(protocol, context.metadata, expert=expert)
    visible_keys = {question.key for question in visible}
    for key in answers:
        if key not in visible_keys:
            errors[key] = (
                "is not a question of this protocol"
                if not protocol.has_question(key)
                else "does not apply to this item"
            )
    for question in visible:
        if question.show_if is not None:
            parent = cleaned.get(question.show_if["question"])
            parent_value = None if parent is None else str(parent.value)
            if parent_value not in question.show_if["in"]:
                if question.key in answers:
                    errors[question.key] = (
                        f"is asked only when '{question.show_if['question']}' is one of "
                        + ", ".join(question.show_if["in"])
                    )
                continue
        answer = answers.get(question.key)
        if answer is None or answer.get("value") is None:
            if question.required and question.kind != "boxes":
                errors[question.key] = "is required"
            elif question.kind == "boxes":
                missing = _unanswered_boxes(protocol, question, cleaned)
                if missing:
                    errors[question.key] = missing_boxes_message(missing, question.linked_question or "")
            continue
        selected = None
        if question.kind == "boxes" and question.linked_question in errors:
            continue  # boxes are checked against a valid selection only; its own error comes first
        if question.kind == "boxes" and question.linked_question is not None:
            linked = cleaned.get(question.linked_question)
            selected = linked.value if linked is not None else []
        try:
            cleaned[question.key] = clean_answer(
                question,
                answer.get("value"),
                context=context,
                protocol=protocol,
                shown=answer.get("shown"),
                reason=answer.get("reason", ""),
                selected=selected,
            )
        except AnswerError as exc:
            errors[question.key] = exc.message
    if errors:
        raise SubmissionError(errors)
    return list(cleaned.values())


def _unanswered_boxes(
    protocol: Protocol, question: Question, cleaned: Mapping[str, CleanAnswer]
) -> list[str]:
    """A task without an answer to a boxes question: the selected options that needed a box."""
    if question.linked_question is None or question.linked_question not in cleaned:
        return []
    linked = protocol.question(question.linked_question)
    none_key = linked.none_option.key if linked.none_option else None
    return options_without_box(question, [], cleaned[question.linked_question].value, none_key)


def clean_draft(
    protocol: Protocol,
    answers: Mapping[str, Mapping[str, Any]],
    *,
    context: ItemContext,
    expert: bool = False,
) -> list[CleanAnswer]:
    """Validate a draft: the answers given so far to a task, checked one by one like a submit's, but
    possibly incomplete. Unknown questions and bad values are refused as ``clean_submission`` refuses
    them; nothing is required yet (a required question, a reason, every option shown, a box for each
    selected option), and boxes need only name an option of their linked question. Raises
    :class:`SubmissionError` with every problem at once."""
    errors: dict[str, str] = {}
    cleaned: list[CleanAnswer] = []
    asked = questions_to_answer(protocol, context.metadata, expert=expert)
    visible = {question.key: question for question in asked}
    for key, answer in answers.items():
        question = visible.get(key)
        if question is None:
            errors[key] = (
                "is not a question of this protocol"
                if not protocol.has_question(key)
                else "does not apply to this item"
            )
            continue
        value = answer.get("value")
        if value is None or (isinstance(value, str) and not value.strip()):
            continue  # not answered yet
        lenient = replace(
            question,
            required=False,
            reason="optional" if question.reason == "required" else question.reason,
            require_all_shown=False,
            boxes_required="none",
        )
        try:
            cleaned.append(
                clean_answer(
                    lenient,
                    value,
                    context=context,
                    protocol=protocol,
                    shown=answer.get("shown"),
                    reason=answer.get("reason", ""),
                )
            )
        except AnswerError as exc:
            errors[key] = exc.message
    if errors:
        raise SubmissionError(errors)
    return cleaned
