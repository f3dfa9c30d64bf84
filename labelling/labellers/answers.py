"""Check a machine's answer against its question, in the answer format humans use.

The rules are those of ``protocols/answers.py`` restated over the plain question dicts labellers
receive, so a labeller can refuse a bad answer before anything is stored:

- likert/single: one option key (likert: the ``unsure`` key too);
- multi: a list of distinct option keys; the ``none_option`` key excludes every other;
- binary: 0 or 1 (JSON integers; ``"0"``/``"1"`` strings too), plus an optional reason;
  ``reason: required`` refuses an answer without one;
- text: a string, normalised by the question's normaliser (``colour`` maps onto the basic colour
  terms of ``protocols.colours``; a string naming no colour is refused);
- boxes: a list of ``{"option", "x", "y", "w", "h"[, "image"]}`` with integer pixels, w and h > 0;
  the option is checked when the question dict carries the linked question's ``options``.

An option may be named by its key or by its label, ignoring case and surrounding spaces ("SUV" is
the option ``suv`` labelled "SUV"); that is the same option, not a coercion. Anything else raises
:class:`InvalidAnswer` whose message names what is wrong, e.g. ``option 'x' is not one of a, b``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labelling.labellers.base import Question
from protocols.colours import BASIC_COLOURS, normalise_colour

MAX_TEXT_LENGTH = 2000


class InvalidAnswer(ValueError):
    """The answer does not fit its question; the message says why."""


def choice_options(question: Question) -> list[dict[str, str]]:
    """The options an answer may name: ``options``, then ``unsure`` (likert), then ``none_option`` (multi)."""
    options = [dict(option) for option in question.get("options") or []]
    for extra in ("unsure", "none_option"):
        if question.get(extra):
            options.append(dict(question[extra]))
    return options


def choice_keys(question: Question) -> list[str]:
    return [option["key"] for option in choice_options(question)]


def _option_key(question: Question, named: Any) -> str:
    if not isinstance(named, str):
        raise InvalidAnswer(f"must name one option, got {type(named).__name__} {named!r}")
    options = choice_options(question)
    for option in options:
        if named == option["key"]:
            return option["key"]
    wanted = named.strip().casefold()
    for option in options:
        if wanted in (option["key"].casefold(), str(option.get("label", "")).strip().casefold()):
            return option["key"]
    raise InvalidAnswer(f"option '{named}' is not one of {', '.join(option['key'] for option in options)}")


def _multi(question: Question, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise InvalidAnswer(f"must be a list of options, got {type(value).__name__}")
    keys = [_option_key(question, named) for named in value]
    if len(set(keys)) != len(keys):
        raise InvalidAnswer("an option is selected twice")
    none_option = question.get("none_option")
    if none_option and none_option["key"] in keys and len(keys) > 1:
        raise InvalidAnswer(f"'{none_option['key']}' excludes every other option")
    return keys


def _binary(value: Any) -> int:
    # bool is an int subclass: a JSON true/false is not the 0/1 score the rubric asks for.
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise InvalidAnswer(f"must be 0 or 1, got {value!r}")


def _text(question: Question, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidAnswer(f"must be text, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidAnswer("is empty")
    if len(text) > MAX_TEXT_LENGTH:
        raise InvalidAnswer(f"is longer than {MAX_TEXT_LENGTH} characters")
    normaliser = question.get("normaliser") or "none"
    if normaliser == "lowercase":
        return text.lower()
    if normaliser == "colour":
        colour = normalise_colour(text)
        if colour is None:
            raise InvalidAnswer(f"'{text}' names no colour of {', '.join(BASIC_COLOURS)}")
        return colour
    return text


def _pixel(box: Mapping[str, Any], name: str) -> int:
    number = box.get(name)
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise InvalidAnswer(f"box field '{name}' must be a number of pixels, got {number!r}")
    return int(round(number))


def _boxes(question: Question, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise InvalidAnswer(f"must be a list of boxes, got {type(value).__name__}")
    boxes = []
    for box in value:
        if not isinstance(box, Mapping):
            raise InvalidAnswer(f"a box must be an object, got {box!r}")
        option = box.get("option")
        if question.get("options"):
            option = _option_key(question, option)
        elif not isinstance(option, str) or not option:
            raise InvalidAnswer("a box must name its option")
        clean: dict[str, Any] = {"option": option}
        for name in ("x", "y", "w", "h"):
            clean[name] = _pixel(box, name)
        if clean["x"] < 0 or clean["y"] < 0 or clean["w"] <= 0 or clean["h"] <= 0:
            raise InvalidAnswer(f"box {clean} must have x, y >= 0 and w, h > 0")
        if "image" in box:
            clean["image"] = _pixel(box, "image")
        boxes.append(clean)
    return boxes


def validate_answer(question: Question, value: Any, reason: Any = None) -> tuple[Any, str | None]:
    """Return ``(clean value, clean reason)`` for the question, or raise :class:`InvalidAnswer`."""
    kind = question["kind"]
    if value is None:
        raise InvalidAnswer("no answer given")
    if kind in ("single", "likert"):
        clean: Any = _option_key(question, value)
    elif kind == "multi":
        clean = _multi(question, value)
    elif kind == "binary":
        clean = _binary(value)
    elif kind == "text":
        clean = _text(question, value)
    elif kind == "boxes":
        clean = _boxes(question, value)
    else:
        raise InvalidAnswer(f"unknown question kind '{kind}'")
    clean_reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    if reason is not None and not isinstance(reason, str):
        raise InvalidAnswer(f"reason must be text, got {type(reason).__name__}")
    mode = question.get("reason") or "none"
    if kind == "binary" and mode == "required" and clean_reason is None:
        raise InvalidAnswer("a reason is required")
    if kind != "binary" or mode == "none":
        clean_reason = None  # a reason is kept only where the question asks for one
    return clean, clean_reason
