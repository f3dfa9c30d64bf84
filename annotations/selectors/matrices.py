"""Reliability data from the database, for ``metrics.agreement`` (selector layer).

``reliability_for``: per question (or option of a multi question) the per-item value counts of its
coders x items reliability matrix, counted from one ``values_list`` query without building the
matrix; ``question_matrix``: one dense matrix per single-answer question (``nan`` = no judgement).
Codes per question kind (SPEC 4): likert -> the option's rank on the scale, Unsure missing
(ordinal); single, binary, text -> a nominal code per distinct value; each option of a multi question
-> its own 0/1 counts, counting a coder only where the option was shown to them (``shown``), or
everywhere when ``shown`` was not recorded. Only counted annotations are read: none on control items,
none by excluded annotators (``selectors.counted.counted_annotations``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import TextField
from django.db.models.functions import Cast

from annotations.models import Annotation, Study
from annotations.selectors.counted import counted_annotations, uncounted_ids
from metrics.agreement import Level, ValueCounts, value_counts_of
from protocols.schema import Question

LEVELS: dict[str, Level] = {
    "likert": "ordinal",
    "single": "nominal",
    "binary": "nominal",
    "text": "nominal",
    "multi": "nominal",
}


@dataclass
class Reliability:
    """The per-item value counts of a coders x items matrix (``metrics.agreement.value_counts``: all
    that alpha needs) with the ids of its coders and items, built without the matrix: thousands of
    coders x thousands of items, once per option of a multi question, does not fit in memory
    (issue 26)."""

    label: str  # the question key, or "key:option" for one option of a multi question
    level: Level
    counts: ValueCounts
    annotator_ids: list[int]
    item_ids: list[int]


def _rows(
    study: Study, question_key: str, annotator_ids: Iterable[int] | None
) -> list[tuple[int, int, Any, Any]]:
    queryset = counted_annotations(study).filter(question_key=question_key)
    if annotator_ids is not None:
        queryset = queryset.filter(annotator_id__in=list(annotator_ids))
    return list(queryset.values_list("annotator_id", "item_id", "value", "shown"))


def _index(values: list[int]) -> tuple[list[int], dict[int, int]]:
    ordered = sorted(set(values))
    return ordered, {value: position for position, value in enumerate(ordered)}


def reliability_for(
    study: Study,
    question: Question,
    *,
    annotator_ids: Iterable[int] | None = None,
    item_options: dict[int, list[str]] | None = None,
) -> list[Reliability]:
    """The reliability data of one question (several for a multi question, none for boxes).

    Each judgement is one (coder, item) cell of the question's matrix; the counts per item are what
    ``value_counts`` of that matrix gives (the same arrays, so the same alpha and interval).
    """
    if question.kind == "boxes":
        return []
    rows = _rows(study, question.key, annotator_ids)
    if not rows:
        return []
    coders, _ = _index([row[0] for row in rows])
    items, item_at = _index([row[1] for row in rows])
    c = np.fromiter((item_at[row[1]] for row in rows), dtype=np.int64, count=len(rows))
    level = LEVELS[question.kind]
    if question.kind != "multi":
        if question.kind == "likert":
            rank = {option.key: float(position) for position, option in enumerate(question.options)}
            codes = np.array([rank.get(row[2], np.nan) for row in rows], dtype=float)  # Unsure -> missing
        else:
            distinct: dict[Any, float] = {}
            codes = np.array(
                [distinct.setdefault(json_key(row[2]), float(len(distinct))) for row in rows], dtype=float
            )
        present = ~np.isnan(codes)
        counts = value_counts_of(c[present], codes[present], len(items))
        return [Reliability(question.key, level, counts, coders, items)]
    none_key = question.none_option.key if question.none_option is not None else None
    options = (
        [option.key for option in question.options]
        if question.options_from is None
        # The none option is in ``shown`` and in answers too: one matrix for it, last, as declared.
        else sorted({key for row in rows for key in (row[3] or row[2] or [])} - {none_key})
    )
    if none_key is not None:
        options.append(none_key)
    # One pass over the rows: per option, the items it was judged on and whether it was ticked.
    option_at = {option: position for position, option in enumerate(options)}
    judged: list[list[int]] = [[] for _ in options]
    ticked: list[list[float]] = [[] for _ in options]
    for position, row in enumerate(rows):
        shown, answer = row[3], row[2] or []
        if shown is not None:
            candidates = [option for option in dict.fromkeys(shown) if option in option_at]
        elif item_options is not None and row[1] in item_options:
            candidates = [option for option in options if option in item_options[row[1]]]
        else:
            candidates = options
        for option in candidates:
            judged[option_at[option]].append(int(c[position]))
            ticked[option_at[option]].append(1.0 if option in answer else 0.0)
    return [
        Reliability(
            f"{question.key}:{option}",
            level,
            value_counts_of(
                np.asarray(judged[at], dtype=np.int64), np.asarray(ticked[at], dtype=float), len(items)
            ),
            coders,
            items,
        )
        for at, option in enumerate(options)
    ]


@dataclass
class QuestionMatrix:
    """Every coder's answer to one single-answer question as codes: ``matrix[coder, item]`` is the
    code of the value (``nan``: no answer, or Unsure on a likert scale), ``values[code]`` the value."""

    question_key: str
    level: Level
    matrix: np.ndarray
    annotator_ids: list[int]
    item_ids: list[int]
    values: list[Any]

    def rows(self, annotator_ids: Iterable[int]) -> np.ndarray:
        position = {annotator_id: row for row, annotator_id in enumerate(self.annotator_ids)}
        return self.matrix[[position[a] for a in annotator_ids if a in position]]


def question_rows(study: Study, question_key: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every judgement of one question as (annotator ids, item ids, value JSON texts), in one order,
    counted or not (``question_matrix`` drops what does not count).

    The large-study path (100,000 items x 5 coders is 500,000 rows a question): the database joins
    the rows into text and numpy parses the ids, instead of Python building a tuple per row.

    - PostgreSQL: one string of whole rows, ``annotator,item<US>json<US>annotator,item<US>json...``
      (US is U+001F, which JSON text never holds unescaped), so one aggregate carries the three
      columns of a row together: no ``ORDER BY`` to make two aggregates agree (it sorted 500,000 rows
      a question, spilling to disk at the default ``work_mem``; the query took 1.5 times as long).
    - SQLite: the ids in one comma-separated string and the JSON texts in another (separated by US);
      both aggregates of one scan see the rows in the same order, and two strings parse faster in
      Python than one of whole rows (measured: docs/benchmarks.md, "Agreement and exports on
      PostgreSQL").

    Other databases take the ORM path.
    """
    vendor = connection.vendor
    if vendor not in ("sqlite", "postgresql"):
        rows = list(
            Annotation.objects.filter(study=study, question_key=question_key).values_list(
                "annotator_id", "item_id", Cast("value", TextField())
            )
        )
        return (
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.int64),
            [r[2] for r in rows],
        )
    table = connection.ops.quote_name(Annotation._meta.db_table)
    where = f"FROM {table} WHERE study_id = %s AND question_key = %s"
    with connection.cursor() as cursor:
        if vendor == "sqlite":
            ids_sql = "group_concat(annotator_id || ',' || item_id, ',')"
            cursor.execute(
                f"SELECT {ids_sql}, group_concat(value, char(31)) {where}", [study.pk, question_key]
            )
            ids_text, values_text = cursor.fetchone()
            texts = values_text.split("\x1f") if ids_text else []
        else:
            rows_sql = "string_agg(annotator_id || ',' || item_id || chr(31) || value::text, chr(31))"
            cursor.execute(f"SELECT {rows_sql} {where}", [study.pk, question_key])
            (joined,) = cursor.fetchone()
            parts = joined.split("\x1f") if joined else []
            if len(parts) % 2:
                raise RuntimeError(f"question {question_key!r}: a row without its value")
            ids_text, texts = ",".join(parts[0::2]), parts[1::2]
    if not ids_text:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), []
    ids = np.fromstring(ids_text, sep=",", dtype=np.int64)
    if ids.size != 2 * len(texts):
        raise RuntimeError(f"question {question_key!r}: {ids.size // 2} id pairs but {len(texts)} values")
    return ids[0::2], ids[1::2], texts


def dense_codes(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.unique(ids, return_inverse=True)`` for database ids, in linear time: a lookup table
    indexed by id (ids are positive and dense enough; above 50 million it sorts instead)."""
    if ids.size == 0 or int(ids.max()) > 50_000_000 or int(ids.min()) < 0:
        return np.unique(ids, return_inverse=True)
    present = np.flatnonzero(np.bincount(ids))
    position = np.empty(int(present[-1]) + 1, dtype=np.int64)
    position[present] = np.arange(present.size)
    return present, position[ids]


def question_matrix(
    study: Study, question: Question, *, annotator_ids: Iterable[int] | None = None
) -> QuestionMatrix | None:
    """One matrix for the whole question (likert, single, binary or text), values decoded once per
    distinct JSON text rather than once per row. ``annotator_ids`` keeps only those coders."""
    annotators, items, texts = question_rows(study, question.key)
    # What counts (selectors.counted.counted_annotations): no control items, no excluded annotators; both
    # sets are small, so they are dropped here rather than joined row by row in the database.
    excluded, controls = uncounted_ids(study)
    keep = ~np.isin(annotators, excluded) & ~np.isin(items, controls)
    if annotator_ids is not None:
        keep &= np.isin(annotators, np.fromiter(annotator_ids, dtype=np.int64))
    if not keep.all():
        annotators, items = annotators[keep], items[keep]
        texts = [text for text, kept in zip(texts, keep, strict=True) if kept]
    if not texts:
        return None
    coders, r = dense_codes(annotators)
    item_ids, c = dense_codes(items)
    # Codes in the sorted order of the distinct JSON texts, whatever order the rows came in, so that
    # a seeded bootstrap gives the same interval on any database.
    code_of = {text: code for code, text in enumerate(sorted(dict.fromkeys(texts)))}
    text_codes = np.fromiter(map(code_of.__getitem__, texts), dtype=np.int64, count=len(texts))
    decoded = [json.loads(text) for text in code_of]
    if question.kind == "likert":
        rank = {option.key: float(position) for position, option in enumerate(question.options)}
        per_text = np.array([rank.get(value, np.nan) for value in decoded])  # Unsure -> missing (ordinal)
        values: list[Any] = [option.key for option in question.options]
    else:
        per_text = np.arange(len(decoded), dtype=float)
        values = decoded
    matrix = np.full((len(coders), len(item_ids)), np.nan)
    matrix[r, c] = per_text[text_codes]
    return QuestionMatrix(
        question.key, LEVELS[question.kind], matrix, coders.tolist(), item_ids.tolist(), values
    )


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
    result: np.ndarray = winner
    return result


def json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value (lists and objects by their JSON text)."""
    if isinstance(value, list | dict):
        import json

        return json.dumps(value, sort_keys=True)
    return value
