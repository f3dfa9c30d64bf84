"""Reliability matrices from the database, for ``metrics.agreement`` (selector layer).

One matrix per question (coders x items, ``nan`` = no judgement), built with numpy from one
``values_list`` query. Codes per question kind (SPEC 4): likert -> the option's rank on the
scale, Unsure missing (ordinal); single, binary, text -> a nominal code per distinct value; each
option of a multi question -> its own 0/1 matrix, counting a coder only where the option was
shown to them (``shown``), or everywhere when ``shown`` was not recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotations.models import Annotation, Study
from annotations.protocols import Question

LEVELS = {"likert": "ordinal", "single": "nominal", "binary": "nominal", "text": "nominal", "multi": "nominal"}


@dataclass
class Reliability:
    """A coders x items matrix with the ids of its rows and columns."""

    label: str  # the question key, or "key:option" for one option of a multi question
    level: str
    matrix: np.ndarray
    annotator_ids: list[int]
    item_ids: list[int]


def _rows(study: Study, question_key: str, annotator_ids: Iterable[int] | None) -> list[tuple[int, int, Any, Any]]:
    queryset = Annotation.objects.filter(study=study, question_key=question_key)
    if annotator_ids is not None:
        queryset = queryset.filter(annotator_id__in=list(annotator_ids))
    return list(queryset.values_list("annotator_id", "item_id", "value", "shown"))


def _index(values: list[int]) -> tuple[list[int], dict[int, int]]:
    ordered = sorted(set(values))
    return ordered, {value: position for position, value in enumerate(ordered)}


def reliability_for(study: Study, question: Question, *, annotator_ids: Iterable[int] | None = None,
                    item_options: dict[int, list[str]] | None = None) -> list[Reliability]:
    """The reliability matrices of one question (several for a multi question, none for boxes)."""
    if question.kind == "boxes":
        return []
    rows = _rows(study, question.key, annotator_ids)
    if not rows:
        return []
    coders, coder_at = _index([row[0] for row in rows])
    items, item_at = _index([row[1] for row in rows])
    r = np.fromiter((coder_at[row[0]] for row in rows), dtype=np.int64, count=len(rows))
    c = np.fromiter((item_at[row[1]] for row in rows), dtype=np.int64, count=len(rows))
    level = LEVELS[question.kind]
    if question.kind != "multi":
        if question.kind == "likert":
            rank = {option.key: float(position) for position, option in enumerate(question.options)}
            codes = np.array([rank.get(row[2], np.nan) for row in rows], dtype=float)  # Unsure -> missing
        else:
            distinct: dict[Any, float] = {}
            codes = np.array([distinct.setdefault(json_key(row[2]), float(len(distinct))) for row in rows], dtype=float)
        matrix = np.full((len(coders), len(items)), np.nan)
        matrix[r, c] = codes
        return [Reliability(question.key, level, matrix, coders, items)]
    options = [option.key for option in question.options] if question.options_from is None else sorted(
        {key for row in rows for key in (row[3] or row[2] or [])})
    if question.none_option is not None:
        options.append(question.none_option.key)
    result = []
    for option in options:
        matrix = np.full((len(coders), len(items)), np.nan)
        for position, row in enumerate(rows):
            shown = row[3]
            if shown is not None and option not in shown:
                continue
            if shown is None and item_options is not None and option not in item_options.get(row[1], [option]):
                continue
            matrix[r[position], c[position]] = 1.0 if option in (row[2] or []) else 0.0
        result.append(Reliability(f"{question.key}:{option}", level, matrix, coders, items))
    return result


def json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value (lists and objects by their JSON text)."""
    if isinstance(value, list | dict):
        import json

        return json.dumps(value, sort_keys=True)
    return value
