"""The task page's form turned into answers: shared by the annotator's task page (``views/annotate.py``)
and the researcher's control item page (``views/quality.py``). Not a page module."""

from __future__ import annotations

from typing import Any

from django.http import QueryDict

from annotations.models import Item, Study
from common.checked_input import InputRefused, json_loads
from protocols.answers import SubmissionError, questions_to_answer


def answers_from_form(
    *, study: Study, item: Item, expert: bool, data: QueryDict
) -> dict[str, dict[str, Any]]:
    """Turn the task page's form into ``clean_submission``'s input (shape only; no rules applied).

    Field names: ``q-KEY`` (value; several for multi; JSON for boxes), ``shown-KEY`` (multi: the
    comma-separated options this person was shown), ``reason-KEY`` (binary). Questions hidden by
    ``show_if`` (the page disables their fields) are left out here the same way; expert-only
    questions are read only for ``expert`` (of the expert pool in this study, or the researcher). Boxes
    that are not
    JSON a database can store (``common.checked_input``: too deep, NaN, 1e400) raise SubmissionError,
    shown next to the question like any refused answer.
    """
    answers: dict[str, dict[str, Any]] = {}
    unreadable: dict[str, str] = {}
    for question in questions_to_answer(study.protocol_obj, item.metadata, expert=expert):
        name = f"q-{question.key}"
        if question.show_if is not None:
            parent = answers.get(question.show_if["question"])
            if parent is None or str(parent.get("value")) not in question.show_if["in"]:
                continue
        if question.kind == "multi":
            values = data.getlist(name)
            if not values:
                continue
            shown_raw = data.get(f"shown-{question.key}")
            answer: dict[str, Any] = {"value": values}
            if shown_raw is not None:
                answer["shown"] = [key for key in shown_raw.split(",") if key]
            answers[question.key] = answer
        elif question.kind == "boxes":
            raw = data.get(name, "").strip()
            if not raw:
                continue
            try:
                boxes = json_loads(raw)
            except InputRefused as exc:
                unreadable[question.key] = exc.message
                continue
            if boxes == [] and not question.required:
                continue
            answers[question.key] = {"value": boxes}
        else:
            raw_value = data.get(name)
            if raw_value is None or (
                question.kind == "text" and not raw_value.strip() and not question.required
            ):
                continue
            answer = {"value": raw_value}
            reason = data.get(f"reason-{question.key}", "")
            if reason.strip():
                answer["reason"] = reason
            answers[question.key] = answer
    if unreadable:
        raise SubmissionError(unreadable)
    return answers
