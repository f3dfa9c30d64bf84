"""Inter-annotator agreement: Krippendorff's alpha (with a bootstrap interval) and percent agreement.

Input everywhere is a *reliability matrix*: a float numpy array of shape (coders, items), one row per
annotator (human or machine), one column per item, ``np.nan`` where that annotator gave no usable value
(did not see the item, or answered "Unsure" on a likert question). Values are numeric codes: likert
points, option indices, 0/1 per option of a multi question. Building that matrix from the database is
the caller's job (see docs/agreement.md for the level that fits each question kind).

Reference: Klaus Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", Annenberg School
for Communication, University of Pennsylvania. Notation follows that paper:

- a unit (item) u with m_u >= 2 values is *pairable*; units with fewer values are ignored;
- the coincidence matrix o_ck = sum_u (number of ordered pairs of values (c, k) from different coders
  in u) / (m_u - 1); its marginals are n_c, and n = sum_c n_c is the number of pairable values;
- expected coincidences e_ck = (n_c n_k - [c = k] n_c) / (n - 1);
- alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_ck o_ck d_ck / sum_ck (n_c n_k - [c = k] n_c) d_ck,
  with d_ck the metric's squared difference (nominal: [c != k]; ordinal: (sum_{g=c..k} n_g -
  (n_c + n_k)/2)^2; interval: (c - k)^2; ratio: ((c - k)/(c + k))^2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

import krippendorff
import numpy as np
import numpy.typing as npt

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = get_args(Level)

REASON_EMPTY = "the matrix is empty"
REASON_NO_PAIRS = "no item has two or more judgements"
REASON_ONE_VALUE = "every judgement has the same value"
REASON_NO_EXPECTED = "expected disagreement is zero: the metric sees no difference between the values present"

# Bound on the weights matrix (resamples x distinct item patterns) held in memory at once.
_BOOTSTRAP_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class AlphaResult:
    """Krippendorff's alpha for one reliability matrix.

    ``value`` is None exactly when ``undefined_reason`` is set. ``n_items`` counts the pairable items
    (two or more values), ``n_judgements`` the values in them (Krippendorff's n). The interval fields
    are None unless a bootstrap ran: ``n_resamples`` is how many resamples gave a defined alpha (the
    ones the percentile interval uses) and ``n_resamples_undefined`` how many were dropped.
    """

    value: float | None
    level: str
    n_items: int
    n_judgements: int
    undefined_reason: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None
    n_resamples: int = 0
    n_resamples_undefined: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class PercentAgreementResult:
    """Pairwise percent agreement (exact equality of values).

    ``value`` = mean over pairable items of (agreeing pairs / all pairs of that item); None with
    ``undefined_reason`` when no item has two values. ``n_pairs`` counts unordered pairs of values
    from different coders over all pairable items.
    """

    value: float | None
    n_items: int
    n_pairs: int
    undefined_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class ValueCounts:
    """Per-item value counts of a reliability matrix (the krippendorff package's ``value_counts``).

    ``counts[i, v]`` is how many coders gave ``domain[v]`` to item i, for every item (column) of the
    matrix, pairable or not; ``domain`` is sorted ascending.
    """

    counts: npt.NDArray[np.int64]
    domain: npt.NDArray[np.float64]


def value_counts(matrix: npt.ArrayLike) -> ValueCounts:
    """Count, for each item (column), how many coders gave each value; ``np.nan`` is missing.

    Raises ValueError when the matrix is not two-dimensional or holds infinite values.
    Memory is items x distinct values integers (no coders x items x values array).
    """
    data = _as_matrix(matrix)
    present = ~np.isnan(data)
    _, item_index = np.nonzero(present)
    return value_counts_of(item_index, data[present], data.shape[1])


def value_counts_of(item_index: npt.ArrayLike, values: npt.ArrayLike, n_items: int) -> ValueCounts:
    """``value_counts`` of the matrix whose judgements are ``values[j]`` given to item
    ``item_index[j]`` (0..n_items-1), one per coder and item, without building the matrix: what a
    study of thousands of coders needs (a coders x items matrix per question or option does not fit
    in memory). The judgements may come in any order; the result is the same arrays as
    ``value_counts`` of the matrix gives (items in index order, ``domain`` the sorted distinct values).
    """
    items = np.asarray(item_index, dtype=np.int64)
    data = np.asarray(values, dtype=np.float64)
    if items.shape != data.shape or items.ndim != 1:
        raise ValueError("item_index and values must be one-dimensional and of one length")
    if np.isnan(data).any() or np.isinf(data).any():
        raise ValueError("judgements must be finite values (leave missing ones out)")
    if items.size and (int(items.min()) < 0 or int(items.max()) >= n_items):
        raise ValueError("an item index lies outside 0..n_items-1")
    domain = np.unique(data)
    codes = np.searchsorted(domain, data)
    flat = np.bincount(items * len(domain) + codes, minlength=n_items * len(domain))
    return ValueCounts(counts=flat.reshape(n_items, len(domain)).astype(np.int64), domain=domain)


def krippendorff_alpha(matrix: npt.ArrayLike, *, level: Level) -> AlphaResult:
    """Krippendorff's alpha of a coders x items matrix at ``level``, computed by the ``krippendorff`` package.

    Undefined cases are detected first and returned with ``value=None`` and a reason, never raised:
    an empty matrix, no item with two or more values, a single value among the pairable values, or
    zero expected disagreement. Raises ValueError only for malformed input (unknown level, not 2-D,
    infinite values).
    """
    _check_level(level)
    prepared = _pairable(matrix, level)
    if isinstance(prepared, AlphaResult):
        return prepared
    counts, domain = prepared
    return _alpha_result(counts, domain, level)


def krippendorff_alpha_of_counts(counts: ValueCounts, *, level: Level) -> AlphaResult:
    """``krippendorff_alpha`` of the matrix whose ``value_counts`` are ``counts`` (the same result:
    alpha needs only each item's value counts, Krippendorff 2011). An empty matrix is one of no items."""
    _check_level(level)
    prepared = _pairable_counts(counts, level)
    if isinstance(prepared, AlphaResult):
        return prepared
    return _alpha_result(*prepared, level)


def alpha_from_weighted_counts(
    counts: npt.ArrayLike,
    domain: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    level: Level,
) -> npt.NDArray[np.float64]:
    """Alpha for many weightings of the same items at once, from coincidences (Krippendorff 2011).

    ``counts`` is (P, V): value counts of P distinct item patterns, each with at least two values;
    ``domain`` (V,) the sorted values; ``weights`` (B, P): how many times each pattern enters weighting
    b (a bootstrap resample's multiplicities, or the pattern frequencies for the plain estimate).
    Per weighting: o = sum_p w_p * (c_p c_p^T - diag c_p) / (m_p - 1), n_c its marginals, and
    alpha = 1 - (n - 1) * sum(o * d) / sum((n n^T - diag n) * d), with the ordinal d recomputed from
    each weighting's marginals. Returns (B,) floats, ``nan`` where the expected disagreement is zero.
    """
    _check_level(level)
    counts_f = np.asarray(counts, dtype=np.float64)
    values = np.asarray(domain, dtype=np.float64)
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    pattern_size = counts_f.sum(axis=1)
    if np.any(pattern_size < 2):
        raise ValueError("every pattern must hold at least two values")
    n_v = w @ counts_f  # (B, V) marginals of each weighting's coincidence matrix
    n = n_v.sum(axis=1)
    if level == "ordinal":
        # d depends on the marginals, so keep the full coincidence matrix per weighting.
        v = len(values)
        per_pattern = (
            counts_f[:, :, None] * counts_f[:, None, :] - counts_f[:, :, None] * np.eye(v)[None, :, :]
        ) / (pattern_size - 1)[:, None, None]
        observed = (w @ per_pattern.reshape(len(counts_f), v * v)).reshape(-1, v, v)
        # sum_{g=c..k} n_g - (n_c + n_k)/2 == M_k - M_c with M the mid-point cumulative count.
        mid = np.cumsum(n_v, axis=1) - n_v / 2
        delta = (mid[:, None, :] - mid[:, :, None]) ** 2  # (B, V, V), zero diagonal
        observed_sum = np.einsum("bck,bck->b", observed, delta)
        expected_sum = np.einsum("bc,bck,bk->b", n_v, delta, n_v)
    else:
        delta = _fixed_delta(values, level)
        # Per pattern scalar sum_ck o_ck d_ck: d is the same for every weighting, so weight scalars.
        per_pattern_obs = (
            np.einsum("pc,ck,pk->p", counts_f, delta, counts_f) - counts_f @ np.diag(delta)
        ) / (pattern_size - 1)
        observed_sum = w @ per_pattern_obs
        expected_sum = np.einsum("bc,ck,bk->b", n_v, delta, n_v) - n_v @ np.diag(delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha: npt.NDArray[np.float64] = 1.0 - (n - 1.0) * observed_sum / expected_sum
    # Every term of expected_sum is >= 0 and exactly 0 when a weighting holds one value only.
    alpha[expected_sum <= 0.0] = np.nan
    return alpha


def alpha_with_bootstrap(
    matrix: npt.ArrayLike,
    *,
    level: Level,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> AlphaResult:
    """Alpha (from the ``krippendorff`` package) with a percentile bootstrap interval over items.

    Method: the n_items pairable items are resampled with replacement ``n_resamples`` times (seeded
    ``numpy.random.default_rng(seed)``); items with fewer than two values carry no agreement
    information and are left out of the resampling. Items with identical value counts are pooled into
    patterns, so a resample is a multinomial draw of pattern multiplicities, and its alpha is computed
    from weighted coincidences by ``alpha_from_weighted_counts``. Resamples where alpha is undefined
    (e.g. every resampled value equal) are dropped and counted in ``n_resamples_undefined``. The interval
    is the (1 - confidence)/2 and (1 + confidence)/2 quantiles of the defined resampled alphas (numpy's
    linear interpolation). When alpha itself is undefined no resampling happens.
    Cost: O(n_resamples x distinct patterns) time, and memory bounded by chunking the resamples.
    """
    _check_bootstrap(level, n_resamples, confidence)
    return _bootstrap(_pairable(matrix, level), level, n_resamples, seed, confidence)


def alpha_with_bootstrap_of_counts(
    counts: ValueCounts,
    *,
    level: Level,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> AlphaResult:
    """``alpha_with_bootstrap`` of the matrix whose ``value_counts`` are ``counts``: the same point,
    the same resampling units (the pairable items) and the same seeded draws, so the same interval."""
    _check_bootstrap(level, n_resamples, confidence)
    return _bootstrap(_pairable_counts(counts, level), level, n_resamples, seed, confidence)


def _check_bootstrap(level: Level, n_resamples: int, confidence: float) -> None:
    _check_level(level)
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")


def _bootstrap(
    prepared: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | AlphaResult,
    level: Level,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> AlphaResult:
    """The point alpha and percentile interval of ``alpha_with_bootstrap`` on pairable value counts."""
    if isinstance(prepared, AlphaResult):
        return prepared
    counts, domain = prepared
    point = _alpha_result(counts, domain, level)
    patterns, frequency = _patterns(counts)
    probabilities = frequency / frequency.sum()
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _BOOTSTRAP_CHUNK_CELLS // max(len(patterns), 1)))
    if level == "ordinal":
        chunk = max(1, min(chunk, _BOOTSTRAP_CHUNK_CELLS // (len(domain) ** 2)))
    alphas: list[npt.NDArray[np.float64]] = []
    done = 0
    while done < n_resamples:
        size = min(chunk, n_resamples - done)
        weights = rng.multinomial(point.n_items, probabilities, size=size)
        alphas.append(alpha_from_weighted_counts(patterns, domain, weights, level=level))
        done += size
    resampled = np.concatenate(alphas)
    defined = resampled[~np.isnan(resampled)]
    n_undefined = int(n_resamples - defined.size)
    if defined.size == 0:
        return AlphaResult(
            value=point.value,
            level=level,
            n_items=point.n_items,
            n_judgements=point.n_judgements,
            confidence=confidence,
            n_resamples=0,
            n_resamples_undefined=n_undefined,
        )
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    return AlphaResult(
        value=point.value,
        level=level,
        n_items=point.n_items,
        n_judgements=point.n_judgements,
        ci_low=float(low),
        ci_high=float(high),
        confidence=confidence,
        n_resamples=int(defined.size),
        n_resamples_undefined=n_undefined,
    )


def percent_agreement(matrix: npt.ArrayLike) -> PercentAgreementResult:
    """Pairwise percent agreement: mean over pairable items of the share of agreeing value pairs.

    For item u with value counts c_uv and m_u = sum_v c_uv >= 2 values:
    P_u = sum_v c_uv (c_uv - 1) / (m_u (m_u - 1)) (Fleiss' per-item agreement), and the result is the
    unweighted mean of P_u over pairable items. Exact equality of values, so it suits nominal codes.
    With two coders it is the share of items on which they agree.
    """
    counts = value_counts(matrix).counts.astype(np.float64)
    size = counts.sum(axis=1)
    pairable = size >= 2
    if not pairable.any():
        return PercentAgreementResult(value=None, n_items=0, n_pairs=0, undefined_reason=REASON_NO_PAIRS)
    counts, size = counts[pairable], size[pairable]
    per_item = (counts * (counts - 1)).sum(axis=1) / (size * (size - 1))
    return PercentAgreementResult(
        value=float(per_item.mean()),
        n_items=int(pairable.sum()),
        n_pairs=int((size * (size - 1) / 2).sum()),
    )


def _patterns(counts: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct rows of ``counts`` (sorted) and how often each occurs: ``np.unique(axis=0)``, but
    on one integer key per row (the counts as digits in base max + 1) when it fits in 62 bits, which
    is ten times faster than sorting rows."""
    base = int(counts.max()) + 1
    if counts.shape[1] * np.log2(base) >= 62:
        return np.unique(counts, axis=0, return_counts=True)
    digits = base ** np.arange(counts.shape[1] - 1, -1, -1, dtype=np.int64)
    _keys, first, frequency = np.unique(counts @ digits, return_index=True, return_counts=True)
    return counts[first], frequency


def _alpha_result(
    counts: npt.NDArray[np.int64], domain: npt.NDArray[np.float64], level: Level
) -> AlphaResult:
    """The krippendorff package's alpha on already-checked pairable value counts."""
    value = float(krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level))
    return AlphaResult(value=value, level=level, n_items=int(counts.shape[0]), n_judgements=int(counts.sum()))


def _as_matrix(matrix: npt.ArrayLike) -> npt.NDArray[np.float64]:
    data = np.asarray(matrix, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"a reliability matrix is 2-D (coders x items), got {data.ndim} dimensions")
    if np.isinf(data).any():
        raise ValueError("a reliability matrix may hold finite values and nan only")
    return data


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")


def _undefined(level: str, reason: str, n_items: int = 0, n_judgements: int = 0) -> AlphaResult:
    return AlphaResult(
        value=None, level=level, n_items=n_items, n_judgements=n_judgements, undefined_reason=reason
    )


def _pairable(
    matrix: npt.ArrayLike, level: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | AlphaResult:
    """Value counts of the pairable items over the values they use, or the undefined result."""
    data = _as_matrix(matrix)
    if data.size == 0:
        return _undefined(level, REASON_EMPTY)
    return _pairable_counts(value_counts(data), level)


def _pairable_counts(
    vc: ValueCounts, level: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | AlphaResult:
    """``_pairable`` from a matrix's value counts (an empty matrix: no items)."""
    if vc.counts.shape[0] == 0:
        return _undefined(level, REASON_EMPTY)
    pairable = vc.counts.sum(axis=1) >= 2
    if not pairable.any():
        return _undefined(level, REASON_NO_PAIRS)
    counts = vc.counts[pairable]
    # Values seen only in unpairable items do not enter alpha (their n_c is 0); drop them.
    used = counts.sum(axis=0) > 0
    counts, domain = counts[:, used], vc.domain[used]
    n_items, n_judgements = int(counts.shape[0]), int(counts.sum())
    if len(domain) < 2:
        return _undefined(level, REASON_ONE_VALUE, n_items, n_judgements)
    if level == "ratio":
        # Ratio distances vanish for c + k = 0 (krippendorff's convention), e.g. values {-1, 1}.
        delta = _fixed_delta(domain, "ratio")
        n_v = counts.sum(axis=0).astype(np.float64)
        if float(n_v @ delta @ n_v) == 0.0:
            return _undefined(level, REASON_NO_EXPECTED, n_items, n_judgements)
    return counts, domain


def _fixed_delta(values: npt.NDArray[np.float64], level: str) -> npt.NDArray[np.float64]:
    """Squared-difference matrix of the metrics that do not depend on the marginals."""
    c: npt.NDArray[np.float64] = values[:, None]
    k: npt.NDArray[np.float64] = values[None, :]
    if level == "nominal":
        return np.not_equal(c, k).astype(np.float64)
    if level == "interval":
        return (c - k) ** 2
    if level == "ratio":
        total = c + k
        ratio = np.divide(c - k, total, out=np.zeros(np.broadcast(c, k).shape), where=total != 0)
        return ratio**2
    raise ValueError(f"level {level!r} has no fixed distance matrix")
