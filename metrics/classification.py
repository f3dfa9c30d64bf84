"""A labeller against a reference: accuracy, Cohen's kappa, per-class precision/recall/F1, confusion matrix.

Typical use (SPEC 4): the reference is the human consensus of one question, the prediction is one
machine labeller's answer, one pair per item. Pairs where either side is missing (``None`` or a float
``nan``) are left out and counted in ``n_excluded``. Everything returned is a plain dataclass whose
``to_dict()`` is JSON-serialisable as long as the labels and group keys are.

Formulas (n = number of complete pairs, C the confusion matrix with rows = reference, columns =
prediction, in ``labels`` order):

- accuracy = trace(C) / n;
- Cohen's kappa (Cohen 1960): p_o = trace(C) / n, p_e = sum_k (row_k / n)(col_k / n),
  kappa = (p_o - p_e) / (1 - p_e); undefined when the reference or the prediction holds fewer than two
  classes (then kappa is 0, or 0/0, whatever the labeller does: a number that says nothing, so it is None
  with the reason, and so is its interval);
- per class k: precision = C_kk / col_k, recall = C_kk / row_k, F1 = 2 C_kk / (row_k + col_k)
  (equal to the harmonic mean of precision and recall whenever both are defined, and 0 for a class that
  is present but never predicted, or predicted but never present); macro F1 = the mean F1 over the
  classes whose F1 is defined, undefined when the reference holds fewer than two classes;
- intervals of kappa and macro F1 (``confusion_intervals``): 95% percentile bootstrap over the compared
  items, 2,000 seeded resamples drawn from the confusion matrix (a multinomial of its cell shares).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

REASON_NO_PAIRS = "no pair has both a reference and a predicted label"
REASON_ONE_CLASS_REFERENCE = (
    "the reference holds one class: kappa is 0 whatever the labeller does (fewer than two classes)"
)
REASON_ONE_CLASS_PREDICTED = (
    "the prediction holds one class: kappa is 0 whatever the reference is (fewer than two classes)"
)
REASON_ONE_CLASS_F1 = "the reference holds one class: macro F1 needs two or more"


def kappa_one_class_reason(row: np.ndarray, col: np.ndarray) -> str | None:
    """Why kappa is undefined for a confusion matrix with these row (reference) and column (prediction)
    sums: fewer than two classes on either side; None when both sides hold two or more."""
    if int(np.count_nonzero(row)) < 2:
        return REASON_ONE_CLASS_REFERENCE
    if int(np.count_nonzero(col)) < 2:
        return REASON_ONE_CLASS_PREDICTED
    return None


@dataclass(frozen=True)
class ClassMetrics:
    """Precision, recall and F1 of one class; a None metric has its reason in ``undefined_reasons``.

    ``support`` = how many reference labels are this class (row sum), ``predicted`` = how many
    predictions are (column sum), ``true_positives`` = the diagonal cell.
    """

    label: Hashable
    precision: float | None
    recall: float | None
    f1: float | None
    support: int
    predicted: int
    true_positives: int
    undefined_reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClassificationReport:
    """Agreement of a prediction with a reference over the complete pairs.

    ``confusion[i][j]`` counts pairs whose reference is ``labels[i]`` and prediction ``labels[j]``.
    ``accuracy``/``kappa`` are None exactly when their ``*_undefined_reason`` is set.
    """

    labels: list[Hashable]
    n_pairs: int
    n_excluded: int
    accuracy: float | None
    kappa: float | None
    confusion: list[list[int]]
    per_class: list[ClassMetrics]
    accuracy_undefined_reason: str | None = None
    kappa_undefined_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (nested dataclasses included)."""
        return asdict(self)


@dataclass(frozen=True)
class GroupReport:
    """The report of one group (a condition, a subgroup, or a tuple such as (category, model, condition))."""

    group: Hashable
    report: ClassificationReport

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field."""
        return asdict(self)


def is_missing(value: object) -> bool:
    """True for ``None`` and float ``nan``, the two spellings of "no label"."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def classification_report(
    reference: Sequence[Hashable],
    predicted: Sequence[Hashable],
    *,
    labels: Sequence[Hashable] | None = None,
) -> ClassificationReport:
    """Compare ``predicted`` with ``reference`` pair by pair (formulas in the module docstring).

    ``labels`` fixes the order of the confusion matrix and per-class rows; by default the sorted set of
    labels seen in the complete pairs. A label outside an explicit ``labels`` raises ValueError, as do
    sequences of different lengths.
    """
    if len(reference) != len(predicted):
        raise ValueError(f"reference has {len(reference)} labels but predicted has {len(predicted)}")
    pairs = [
        (r, p) for r, p in zip(reference, predicted, strict=True) if not (is_missing(r) or is_missing(p))
    ]
    n_excluded = len(reference) - len(pairs)
    order = _label_order(pairs, labels)
    index = {label: i for i, label in enumerate(order)}
    for r, p in pairs:
        for label in (r, p):
            if label not in index:
                raise ValueError(f"label {label!r} is not in labels {list(order)!r}")
    confusion = np.zeros((len(order), len(order)), dtype=np.int64)
    if pairs:
        rows = np.fromiter((index[r] for r, _ in pairs), dtype=np.int64, count=len(pairs))
        cols = np.fromiter((index[p] for _, p in pairs), dtype=np.int64, count=len(pairs))
        np.add.at(confusion, (rows, cols), 1)
    return _report_from_confusion(order, confusion, n_excluded)


def classification_by_group(
    reference: Sequence[Hashable],
    predicted: Sequence[Hashable],
    groups: Sequence[Hashable],
    *,
    labels: Sequence[Hashable] | None = None,
) -> list[GroupReport]:
    """One ``classification_report`` per group, in sorted group order, all with the same label order.

    ``groups[i]`` is the group of pair i (e.g. the item's condition ``gender:women``, or a tuple
    ``(category, model, condition)`` for the ssi Table 3 shape). The shared label order is ``labels``
    or the sorted labels seen in all complete pairs, so matrices of different groups line up.
    """
    if not len(reference) == len(predicted) == len(groups):
        raise ValueError("reference, predicted and groups must have the same length")
    if labels is None:
        complete = [
            (r, p) for r, p in zip(reference, predicted, strict=True) if not (is_missing(r) or is_missing(p))
        ]
        labels = _label_order(complete, None)
    members: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    return [
        GroupReport(
            group=group,
            report=classification_report(
                [reference[i] for i in members[group]], [predicted[i] for i in members[group]], labels=labels
            ),
        )
        for group in _sorted(members)
    ]


def classification_from_codes(
    reference: np.ndarray,
    predicted: np.ndarray,
    values: Sequence[Hashable],
    *,
    groups: np.ndarray | None = None,
    group_values: Sequence[Hashable] | None = None,
) -> tuple[ClassificationReport, list[GroupReport]]:
    """``classification_report`` and ``classification_by_group`` for large inputs already coded.

    ``reference[i]``/``predicted[i]`` are positions in ``values`` (``nan`` = missing), ``groups[i]``
    a position in ``group_values``. The result equals the plain functions' on the decoded labels (same
    label order: the sorted values seen in complete pairs; groups in sorted order), but the counting
    is one ``numpy.bincount`` instead of a Python loop per pair.
    """
    reference = np.asarray(reference, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    if reference.shape != predicted.shape:
        raise ValueError(f"reference has {reference.size} labels but predicted has {predicted.size}")
    complete = ~(np.isnan(reference) | np.isnan(predicted))
    r, p = reference[complete].astype(np.int64), predicted[complete].astype(np.int64)
    seen = np.unique(np.concatenate([r, p]))  # codes seen in complete pairs, recoded 0..m-1 below
    by_label = {values[int(code)]: int(code) for code in seen}
    labels = _sorted(by_label)
    position = np.zeros(len(values), dtype=np.int64)
    position[[by_label[label] for label in labels]] = np.arange(len(labels))
    m = len(labels)

    def confusion(mask: np.ndarray | slice) -> np.ndarray:
        return np.bincount(position[r[mask]] * m + position[p[mask]], minlength=m * m).reshape(m, m)

    overall = _report_from_confusion(labels, confusion(slice(None)), int((~complete).sum()))
    if groups is None or group_values is None:
        return overall, []
    g = np.asarray(groups, dtype=np.int64)
    g_complete = g[complete]
    by_group = []
    for value in _sorted({group_values[int(code)] for code in np.unique(g)}):
        code = list(group_values).index(value)
        by_group.append(
            GroupReport(
                group=value,
                report=_report_from_confusion(
                    labels, confusion(g_complete == code), int(((g == code) & ~complete).sum())
                ),
            )
        )
    return overall, by_group


def _report_from_confusion(
    order: list[Hashable], confusion: np.ndarray, n_excluded: int
) -> ClassificationReport:
    n = int(confusion.sum())
    row = confusion.sum(axis=1)
    col = confusion.sum(axis=0)
    diagonal = np.diag(confusion)
    per_class = []
    for k, label in enumerate(order):
        reasons: dict[str, str] = {}
        tp, support, pred = int(diagonal[k]), int(row[k]), int(col[k])
        precision = tp / pred if pred else None
        if precision is None:
            reasons["precision"] = "the class is never predicted"
        recall = tp / support if support else None
        if recall is None:
            reasons["recall"] = "the class never occurs in the reference"
        f1 = 2 * tp / (support + pred) if support + pred else None
        if f1 is None:
            reasons["f1"] = "the class occurs in neither the reference nor the prediction"
        per_class.append(ClassMetrics(label, precision, recall, f1, support, pred, tp, reasons))
    if n == 0:
        return ClassificationReport(
            labels=list(order),
            n_pairs=0,
            n_excluded=n_excluded,
            accuracy=None,
            kappa=None,
            confusion=confusion.tolist(),
            per_class=per_class,
            accuracy_undefined_reason=REASON_NO_PAIRS,
            kappa_undefined_reason=REASON_NO_PAIRS,
        )
    p_o = float(diagonal.sum()) / n
    p_e = float((row / n) @ (col / n))
    kappa: float | None
    kappa_reason: str | None = None
    if math.isclose(p_e, 1.0, rel_tol=0.0, abs_tol=1e-12):
        kappa = None
        kappa_reason = "chance agreement is 1: reference and prediction use one and the same label"
    elif (one_class := kappa_one_class_reason(row, col)) is not None:
        kappa = None
        kappa_reason = one_class
    else:
        kappa = (p_o - p_e) / (1.0 - p_e)
    return ClassificationReport(
        labels=list(order),
        n_pairs=n,
        n_excluded=n_excluded,
        accuracy=p_o,
        kappa=kappa,
        confusion=confusion.tolist(),
        per_class=per_class,
        kappa_undefined_reason=kappa_reason,
    )


def _label_order(
    pairs: Sequence[tuple[Hashable, Hashable]], labels: Sequence[Hashable] | None
) -> list[Hashable]:
    if labels is not None:
        order = list(labels)
        if len(set(order)) != len(order):
            raise ValueError("labels must not repeat")
        return order
    return _sorted({label for pair in pairs for label in pair})


def _sorted(values: Any) -> list[Hashable]:
    """Sorted when the values are mutually comparable, else by (type name, repr) so the order is stable."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=lambda v: (type(v).__name__, repr(v)))


# The bootstrap of ``confusion_intervals``: resamples and the seed that makes a report repeatable.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261127


@dataclass(frozen=True)
class ConfusionIntervals:
    """95% percentile-bootstrap intervals of Cohen's kappa and of macro F1 from one confusion matrix.

    ``macro_f1`` is the mean F1 over the classes whose F1 is defined; a bound pair is (None, None) when
    fewer than half of the resamples define the statistic (``reason`` says why)."""

    macro_f1: float | None
    kappa: tuple[float | None, float | None]
    macro_f1_interval: tuple[float | None, float | None]
    resamples: int
    reason: str | None = None


def _kappa_f1(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kappa and macro F1 of each of a stack of confusion matrices (B x m x m); nan where undefined."""
    n = draws.sum(axis=(1, 2)).astype(float)
    rows, cols = draws.sum(axis=2), draws.sum(axis=1)
    diagonal = np.diagonal(draws, axis1=1, axis2=2)
    p_o = diagonal.sum(axis=1) / n
    p_e = (rows * cols).sum(axis=1) / (n * n)
    one_class = ((rows > 0).sum(axis=1) < 2) | ((cols > 0).sum(axis=1) < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(
            np.isclose(p_e, 1.0, rtol=0.0, atol=1e-12) | one_class, np.nan, (p_o - p_e) / (1.0 - p_e)
        )
        f1 = np.where(rows + cols > 0, 2.0 * diagonal / (rows + cols), np.nan)
    defined = ~np.isnan(f1)
    macro = np.where(
        defined.any(axis=1) & ((rows > 0).sum(axis=1) >= 2),
        np.nansum(f1, axis=1) / np.maximum(defined.sum(axis=1), 1),
        np.nan,
    )
    return kappa, macro


def confusion_intervals(
    confusion: Sequence[Sequence[int]] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> ConfusionIntervals:
    """Percentile-bootstrap intervals of kappa and macro F1 over items, from the confusion matrix alone.

    Resampling the n compared items with replacement is drawing the matrix's n counts from the
    multinomial of its cell shares, so each resample is one ``multinomial`` draw (seeded: the same
    matrix gives the same intervals). The interval is the (1 - confidence)/2 and (1 + confidence)/2
    percentiles of the resamples that define the statistic."""
    matrix = np.asarray(confusion, dtype=np.int64)
    n = int(matrix.sum())
    if n == 0:
        return ConfusionIntervals(None, (None, None), (None, None), 0, REASON_NO_PAIRS)
    point_kappa, point_macro = _kappa_f1(matrix[None, :, :])
    macro_f1 = None if np.isnan(point_macro[0]) else float(point_macro[0])
    rng = np.random.default_rng(seed)
    shape = matrix.shape
    draws = rng.multinomial(n, matrix.ravel() / n, size=resamples).reshape(resamples, *shape)
    kappas, macros = _kappa_f1(draws)
    tails = [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2]

    def interval(values: np.ndarray) -> tuple[float | None, float | None]:
        finite = values[~np.isnan(values)]
        if finite.size * 2 < resamples:
            return None, None
        low, high = np.percentile(finite, tails)
        return float(low), float(high)

    kappa = interval(kappas)
    row, col = matrix.sum(axis=1), matrix.sum(axis=0)
    one_class = kappa_one_class_reason(row, col)
    reason = (
        one_class
        if one_class is not None
        else "chance agreement is 1 in most resamples: kappa has no interval"
        if kappa == (None, None) and not np.isnan(point_kappa[0])
        else None
    )
    if int(np.count_nonzero(row)) < 2:
        return ConfusionIntervals(None, (None, None), (None, None), resamples, reason or REASON_ONE_CLASS_F1)
    return ConfusionIntervals(macro_f1, kappa, interval(macros), resamples, reason)
