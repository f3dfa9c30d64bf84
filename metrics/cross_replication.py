"""Cross-replication reliability between two pools of raters (pure functions; docs/agreement.md).

Reference: Ka Wong, Praveen Paritosh and Lora Aroyo (ACL 2021), "Cross-replication Reliability - An
Empirical Approach to Interpreting Inter-rater Reliability". Two pools (e.g. in-region and
North-American raters) rate the same items; the question is whether a rating of one pool agrees with a
rating of the other as often as chance from the two pools' value distributions would make it.

Input: per item, per pool, the counts of each value (``counts_a[i, v]``: how many ratings of pool A gave
``domain[v]`` to item i; what SeeGULL releases). Only the items rated by both pools enter (the *common*
items; ``n_items`` counts them). With n_A(i), n_B(i) the pools' ratings of item i and d the question's
distance:

- D_o = (1/n) sum_i sum_{c,k} nA_ic nB_ik d(c, k) / (n_A(i) n_B(i)): the mean over items of the mean
  disagreement between a rating of pool A and a rating of pool B on that item;
- D_e = sum_{c,k} pA_c pB_k d(c, k), with pA, pB each pool's share of each value over all its ratings of
  the common items: the same disagreement between ratings drawn from the two pools' overall distributions;
- kappa_x = 1 - D_o / D_e; undefined (None with a reason) when D_e = 0 or fewer than 2 items;
- normalised kappa_x = kappa_x / sqrt(alpha_A alpha_B), with each pool's Krippendorff's alpha on the same
  common items (``metrics.agreement``), defined where both alphas are defined and positive;
- majority agreement: among the common items where both pools have a strict majority (a value given by
  more than half of that pool's ratings of the item; a tie or a spread has none and the item is left
  out and counted in ``majority_excluded``), the share where the two majorities are the same value.

d: nominal [c != k]; interval (c - k)^2; ordinal Krippendorff's ordinal distance
(sum_{g=c..k} m_g - (m_c + m_k)/2)^2 with m the value counts of both pools' ratings of the common items
together (the ones alpha of the two pools pooled would use). kappa_x does not change when d is scaled.

Intervals: a percentile bootstrap over the common items (``n_resamples`` resamples with replacement,
``numpy.random.default_rng(seed)``); each resample recomputes kappa_x (the ordinal d from the resample's
own counts), both alphas, the normalised form and majority agreement. Resamples where a statistic is
undefined are dropped from its interval and counted. Items with the same counts in both pools are pooled
into patterns, so a resample is one multinomial draw over patterns (as ``metrics.agreement``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from metrics.agreement import (
    AlphaResult,
    Level,
    ValueCounts,
    alpha_from_weighted_counts,
    krippendorff_alpha_of_counts,
)

CROSS_LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval")

REASON_NO_ITEMS = "no item was rated by both pools"
REASON_ONE_ITEM = "only 1 item was rated by both pools; kappa_x needs at least 2"
REASON_NO_EXPECTED = (
    "expected disagreement is zero: both pools gave one and the same value to every item they share"
)
REASON_NO_MAJORITY = "no item has a strict majority in both pools"

# Bound on the cells (resamples x patterns x values^2) held in memory at once by the bootstrap.
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class Estimate:
    """One statistic with its percentile bootstrap interval.

    ``value`` is None exactly when ``undefined_reason`` is set; ``low``/``high`` are None when no
    bootstrap ran or no resample gave a defined value. ``n_resamples`` counts the resamples behind the
    interval, ``n_resamples_undefined`` those dropped because the statistic was undefined in them.
    """

    value: float | None
    low: float | None = None
    high: float | None = None
    undefined_reason: str | None = None
    n_resamples: int = 0
    n_resamples_undefined: int = 0


@dataclass(frozen=True)
class CrossReplicationResult:
    """kappa_x, its normalised form and the pools' majority agreement on the items both pools rated.

    ``n_items``: common items; ``n_ratings_a``/``n_ratings_b``: the pools' ratings of them.
    ``alpha_a``/``alpha_b``: each pool's alpha on the common items (the normalisation's alphas).
    ``majority_n_items``: common items where both pools have a strict majority (majority agreement's n),
    ``majority_n_agree`` of them with the same majority, ``majority_excluded`` = n_items -
    majority_n_items; ``differing``: positions (in the input's item order) of the items whose pool
    majorities differ.
    """

    level: str
    n_items: int
    n_ratings_a: int
    n_ratings_b: int
    kappa_x: Estimate
    observed_disagreement: float | None
    expected_disagreement: float | None
    alpha_a: AlphaResult
    alpha_b: AlphaResult
    normalised: Estimate
    majority: Estimate
    majority_n_items: int
    majority_n_agree: int
    majority_excluded: int
    differing: tuple[int, ...] = field(default=())
    confidence: float = 0.95
    seed: int = 0
    n_resamples_requested: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict of every field (``differing`` as a list)."""
        data = asdict(self)
        data["differing"] = list(self.differing)
        return data


def shared_counts(
    items_a: list[int], counts_a: ValueCounts, items_b: list[int], counts_b: ValueCounts
) -> tuple[list[int], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Two pools' value counts on one item list (the union, sorted) and one value domain (the union).

    ``items_x[i]`` is the item of row i of ``counts_x.counts``; an item a pool never rated gets a row of
    zeros. Returns (item ids, counts of A, counts of B, domain).
    """
    if len(items_a) != counts_a.counts.shape[0] or len(items_b) != counts_b.counts.shape[0]:
        raise ValueError("each pool needs one item id per row of its counts")
    items = sorted(set(items_a) | set(items_b))
    domain = np.union1d(counts_a.domain, counts_b.domain).astype(np.float64)
    row_of = {item: row for row, item in enumerate(items)}

    def placed(item_ids: list[int], vc: ValueCounts) -> npt.NDArray[np.int64]:
        out = np.zeros((len(items), len(domain)), dtype=np.int64)
        if vc.counts.size:
            rows = np.fromiter((row_of[item] for item in item_ids), dtype=np.int64, count=len(item_ids))
            columns = np.searchsorted(domain, vc.domain)
            out[np.ix_(rows, columns)] = vc.counts
        return out

    return items, placed(items_a, counts_a), placed(items_b, counts_b), domain


def cross_replication(
    counts_a: npt.ArrayLike,
    counts_b: npt.ArrayLike,
    domain: npt.ArrayLike,
    *,
    level: Level,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> CrossReplicationResult:
    """kappa_x of pools A and B with its normalised form and majority agreement (module docstring).

    ``counts_a``, ``counts_b``: (items, values) non-negative counts on the sorted ``domain``; items a
    pool did not rate have a row of zeros and are left out. ``n_resamples`` 0: no intervals. Never
    raises on data that leaves a statistic undefined; raises ValueError on malformed input.
    """
    a, b, values = _checked(counts_a, counts_b, domain, level, n_resamples, confidence)
    common = (a.sum(axis=1) > 0) & (b.sum(axis=1) > 0)
    positions = np.flatnonzero(common)
    a, b = a[common], b[common]
    n_items = int(positions.size)
    alpha_a = krippendorff_alpha_of_counts(ValueCounts(a, values), level=level)
    alpha_b = krippendorff_alpha_of_counts(ValueCounts(b, values), level=level)

    kappa_reason = REASON_NO_ITEMS if n_items == 0 else REASON_ONE_ITEM if n_items == 1 else None
    observed = expected = kappa = None
    if n_items:
        d_o, d_e = _disagreements(a, b, values, np.ones((1, n_items)), level)
        observed, expected = float(d_o[0]), float(d_e[0])
        if kappa_reason is None and expected <= 0.0:
            kappa_reason = REASON_NO_EXPECTED
        if kappa_reason is None:
            kappa = 1.0 - observed / expected
    normalised_reason = _normalised_reason(kappa, kappa_reason, alpha_a, alpha_b)
    normalised = (
        None
        if normalised_reason is not None or kappa is None
        else kappa / float(np.sqrt(alpha_a.value * alpha_b.value))  # type: ignore[operator]
    )
    major_a, major_b = _majority(a), _majority(b)
    both = (major_a >= 0) & (major_b >= 0)
    agree = both & (major_a == major_b)
    n_major, n_agree = int(both.sum()), int(agree.sum())
    majority = n_agree / n_major if n_major else None
    differing = tuple(int(p) for p in positions[both & ~agree])

    intervals: dict[str, tuple[float | None, float | None, int, int]] = {}
    if n_resamples and n_items >= 1:
        intervals = _bootstrap(a, b, values, level, n_resamples, seed, confidence)

    def estimate(name: str, value: float | None, reason: str | None) -> Estimate:
        if value is None:
            return Estimate(value=None, undefined_reason=reason)
        low, high, used, dropped = intervals.get(name, (None, None, 0, 0))
        return Estimate(value=value, low=low, high=high, n_resamples=used, n_resamples_undefined=dropped)

    return CrossReplicationResult(
        level=level,
        n_items=n_items,
        n_ratings_a=int(a.sum()),
        n_ratings_b=int(b.sum()),
        kappa_x=estimate("kappa_x", kappa, kappa_reason),
        observed_disagreement=observed,
        expected_disagreement=expected,
        alpha_a=alpha_a,
        alpha_b=alpha_b,
        normalised=estimate("normalised", normalised, normalised_reason),
        majority=estimate("majority", majority, REASON_NO_ITEMS if n_items == 0 else REASON_NO_MAJORITY),
        majority_n_items=n_major,
        majority_n_agree=n_agree,
        majority_excluded=n_items - n_major,
        differing=differing,
        confidence=confidence,
        seed=seed,
        n_resamples_requested=n_resamples,
    )


def _checked(
    counts_a: npt.ArrayLike,
    counts_b: npt.ArrayLike,
    domain: npt.ArrayLike,
    level: str,
    n_resamples: int,
    confidence: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    if level not in CROSS_LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(CROSS_LEVELS)}")
    if n_resamples < 0:
        raise ValueError("n_resamples must be 0 (no interval) or more")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    values = np.asarray(domain, dtype=np.float64)
    raw_a, raw_b = np.asarray(counts_a), np.asarray(counts_b)
    if raw_a.ndim != 2 or raw_a.shape != raw_b.shape or raw_a.shape[1] != values.size:
        raise ValueError("counts of both pools must be (items, values) arrays of one shape, values = domain")
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(np.diff(values) <= 0):
        raise ValueError("the domain must be finite, strictly increasing values")
    a, b = raw_a.astype(np.int64), raw_b.astype(np.int64)
    if np.any(a != raw_a) or np.any(b != raw_b) or np.any(a < 0) or np.any(b < 0):
        raise ValueError("counts must be non-negative whole numbers")
    return a, b, values


def _distance(
    values: npt.NDArray[np.float64], level: str, marginals: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """d(c, k) per weighting: (B, V, V). ``marginals`` (B, V): both pools' value counts (ordinal only)."""
    if level == "ordinal":
        mid = np.cumsum(marginals, axis=1) - marginals / 2.0
        distance: npt.NDArray[np.float64] = (mid[:, None, :] - mid[:, :, None]) ** 2
        return distance
    c, k = values[:, None], values[None, :]
    fixed = np.not_equal(c, k).astype(np.float64) if level == "nominal" else (c - k) ** 2
    return np.broadcast_to(fixed, (marginals.shape[0], *fixed.shape))


def _disagreements(
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    level: str,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(D_o, D_e) for each row of ``weights`` (B, P): how many times each item (or pattern) of ``a``,
    ``b`` (P, V; every row with at least one rating in each) enters that weighting."""
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    share_a = fa / fa.sum(axis=1, keepdims=True)
    share_b = fb / fb.sum(axis=1, keepdims=True)
    v = values.size
    per_item = (share_a[:, :, None] * share_b[:, None, :]).reshape(len(fa), v * v)
    items = weights.sum(axis=1)
    mean_pairs = (weights @ per_item).reshape(-1, v, v) / items[:, None, None]
    marginal_a, marginal_b = weights @ fa, weights @ fb
    distance = _distance(values, level, marginal_a + marginal_b)
    pool_a = marginal_a / marginal_a.sum(axis=1, keepdims=True)
    pool_b = marginal_b / marginal_b.sum(axis=1, keepdims=True)
    observed: npt.NDArray[np.float64] = np.einsum("bck,bck->b", mean_pairs, distance)
    expected: npt.NDArray[np.float64] = np.einsum("bc,bck,bk->b", pool_a, distance, pool_b)
    return observed, expected


def _majority(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per item the column of the value given by more than half of the ratings, else -1."""
    if counts.shape[1] == 0:
        return np.full(counts.shape[0], -1, dtype=np.int64)
    top = counts.argmax(axis=1)
    strict = 2 * counts.max(axis=1) > counts.sum(axis=1)
    result: npt.NDArray[np.int64] = np.where(strict, top, -1).astype(np.int64)
    return result


def _normalised_reason(
    kappa: float | None, kappa_reason: str | None, alpha_a: AlphaResult, alpha_b: AlphaResult
) -> str | None:
    if kappa is None:
        return f"kappa_x is undefined: {kappa_reason}"
    for name, alpha in (("A", alpha_a), ("B", alpha_b)):
        if alpha.value is None:
            return f"alpha of pool {name} is undefined: {alpha.undefined_reason}"
        if alpha.value <= 0.0:
            return (
                f"alpha of pool {name} is {alpha.value:.3f}, not above 0: "
                "no within-pool agreement to scale by"
            )
    return None


def _weighted_alpha(
    counts: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    level: Level,
) -> npt.NDArray[np.float64]:
    """Alpha of one pool per weighting, over its pairable patterns (nan where undefined)."""
    pairable = counts.sum(axis=1) >= 2
    if not pairable.any():
        return np.full(weights.shape[0], np.nan)
    return alpha_from_weighted_counts(counts[pairable], values, weights[:, pairable], level=level)


def _bootstrap(
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    values: npt.NDArray[np.float64],
    level: Level,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> dict[str, tuple[float | None, float | None, int, int]]:
    """Percentile intervals of kappa_x, the normalised form and majority agreement over resampled items."""
    joint = np.concatenate([a, b], axis=1)
    patterns, frequency = np.unique(joint, axis=0, return_counts=True)
    v = values.size
    pa, pb = patterns[:, :v], patterns[:, v:]
    n_items = int(frequency.sum())
    probabilities = frequency / n_items
    major_a, major_b = _majority(pa), _majority(pb)
    both = ((major_a >= 0) & (major_b >= 0)).astype(np.float64)
    agree = both * (major_a == major_b)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _CHUNK_CELLS // max(len(patterns) * v * v, 1)))
    kappas, normalised, majority = [], [], []
    done = 0
    while done < n_resamples:
        size = min(chunk, n_resamples - done)
        weights = rng.multinomial(n_items, probabilities, size=size).astype(np.float64)
        d_o, d_e = _disagreements(pa, pb, values, weights, level)
        alpha_a = _weighted_alpha(pa, values, weights, level)
        alpha_b = _weighted_alpha(pb, values, weights, level)
        # Two positive alphas only: a product of two negative ones is positive too.
        positive = (alpha_a > 0.0) & (alpha_b > 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa = np.where(d_e > 0.0, 1.0 - d_o / d_e, np.nan) if n_items >= 2 else np.full(size, np.nan)
            scaled = np.where(positive, kappa / np.sqrt(np.where(positive, alpha_a * alpha_b, 1.0)), np.nan)
            shared = weights @ both
            share = np.where(shared > 0, (weights @ agree) / np.where(shared > 0, shared, 1.0), np.nan)
        kappas.append(kappa)
        normalised.append(scaled)
        majority.append(share)
        done += size
    tail = (1.0 - confidence) / 2.0

    def interval(samples: list[npt.NDArray[np.float64]]) -> tuple[float | None, float | None, int, int]:
        drawn = np.concatenate(samples)
        defined = drawn[~np.isnan(drawn)]
        if defined.size == 0:
            return None, None, 0, int(drawn.size)
        low, high = np.quantile(defined, [tail, 1.0 - tail])
        return float(low), float(high), int(defined.size), int(drawn.size - defined.size)

    return {"kappa_x": interval(kappas), "normalised": interval(normalised), "majority": interval(majority)}
