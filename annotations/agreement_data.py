"""Reliability matrices from the database, for ``metrics.agreement`` (selector layer).

One matrix per question (coders x items, ``nan`` = no judgement), built with numpy from one
``values_list`` query. Codes per question kind (SPEC 4): likert -> the option's rank on the
scale, Unsure missing (ordinal); single, binary, text -> a nominal code per distinct value; each
option of a multi question -> its own 0/1 matrix, counting a coder only where the option was
shown to them (``shown``), or everywhere when ``shown`` was not recorded. Only counted annotations
are read: none on control items, none by excluded annotators (``selectors.counted_annotations``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotations.models import Study
from annotations.protocols import Question
from annotations.selectors import counted_annotations

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
    queryset = counted_annotations(study).filter(question_key=question_key)
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


@dataclass
class QuestionMatrix:
    """Every coder's answer to one single-answer question as codes: ``matrix[coder, item]`` is the
    code of the value (``nan``: no answer, or Unsure on a likert scale), ``values[code]`` the value."""

    question_key: str
    level: str
    matrix: np.ndarray
    annotator_ids: list[int]
    item_ids: list[int]
    values: list[Any]

    def rows(self, annotator_ids: Iterable[int]) -> np.ndarray:
        position = {annotator_id: row for row, annotator_id in enumerate(self.annotator_ids)}
        return self.matrix[[position[a] for a in annotator_ids if a in position]]


def question_matrix(study: Study, question: Question) -> QuestionMatrix | None:
    """One query for the whole question (likert, single, binary or text), values decoded once per
    distinct JSON text rather than once per row (the large-study path)."""
    import json

    from django.db.models import TextField
    from django.db.models.functions import Cast

    rows = list(counted_annotations(study).filter(question_key=question.key)
                .values_list("annotator_id", "item_id", Cast("value", TextField())))
    if not rows:
        return None
    coders, coder_at = _index([row[0] for row in rows])
    items, item_at = _index([row[1] for row in rows])
    texts: dict[str, float] = {}
    values: list[Any] = []
    rank = ({option.key: float(position) for position, option in enumerate(question.options)}
            if question.kind == "likert" else None)
    for text in {row[2] for row in rows}:
        value = json.loads(text)
        if rank is not None:
            texts[text] = rank.get(value, np.nan)  # Unsure -> missing on the ordinal scale
        else:
            texts[text] = float(len(values))
            values.append(value)
    if rank is not None:
        values = [option.key for option in question.options]
    matrix = np.full((len(coders), len(items)), np.nan)
    r = np.fromiter((coder_at[row[0]] for row in rows), dtype=np.int64, count=len(rows))
    c = np.fromiter((item_at[row[1]] for row in rows), dtype=np.int64, count=len(rows))
    matrix[r, c] = np.fromiter((texts[row[2]] for row in rows), dtype=float, count=len(rows))
    return QuestionMatrix(question.key, LEVELS[question.kind], matrix, coders, items, values)


def plurality(matrix: np.ndarray, n_values: int) -> np.ndarray:
    """Per column the most frequent code (``nan`` where there is no answer or a tie for the top):
    the vectorised form of ``metrics.consensus.majority`` without ``absolute``."""
    if matrix.size == 0:
        return np.full(matrix.shape[1], np.nan)
    counts = np.zeros((n_values, matrix.shape[1]), dtype=np.int64)
    for code in range(n_values):
        counts[code] = (matrix == code).sum(axis=0)
    top = counts.max(axis=0)
    winner = counts.argmax(axis=0).astype(float)
    tied = (counts == top).sum(axis=0) > 1
    winner[(top == 0) | tied] = np.nan
    return winner


def json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value (lists and objects by their JSON text)."""
    if isinstance(value, list | dict):
        import json

        return json.dumps(value, sort_keys=True)
    return value
