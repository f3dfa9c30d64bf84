"""Choosing what humans validate: interval width for a labeller's accuracy, and seeded stratified samples.

Interval: the Wilson score interval (Wilson 1927; Newcombe 1998) for a proportion p observed on N
items, z = Phi^-1(1 - (1 - confidence)/2):

    centre = (p + z^2 / (2N)) / (1 + z^2 / N)
    half   = z / (1 + z^2 / N) * sqrt(p (1 - p) / N + z^2 / (4 N^2))
    width  = 2 * half

It stays inside [0, 1] and behaves at p = 0 or 1 (where the normal interval collapses to width 0).
Planning uses the *expected* accuracy p as if it were observed; the width falls strictly as N grows,
so the smallest N reaching a requested width is found by bisection over integers.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class StratifiedSample:
    """A drawn sample: ``ids`` grouped by stratum (strata sorted, ids sorted inside each stratum),
    ``allocation[s]`` how many were drawn from stratum s, ``population[s]`` how many it holds."""

    ids: list[Hashable]
    allocation: dict[Hashable, int]
    population: dict[Hashable, int]
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field."""
        return asdict(self)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (low, high) for ``successes`` out of ``n`` (formula in the module docstring)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    if not 0 <= successes <= n:
        raise ValueError("successes must lie between 0 and n")
    centre, half = _wilson(successes / n, n, _z(confidence))
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_width(n: int, *, expected_accuracy: float, confidence: float = 0.95) -> float:
    """Width of the Wilson interval if ``expected_accuracy`` is observed on ``n`` items."""
    if n < 1:
        raise ValueError("n must be at least 1")
    _check_proportion(expected_accuracy)
    return 2.0 * _wilson(expected_accuracy, n, _z(confidence))[1]


def sample_size_for_width(width: float, *, expected_accuracy: float, confidence: float = 0.95) -> int:
    """Smallest N with ``wilson_width(N, ...) <= width``; ``width`` must lie in (0, 1]."""
    if not 0.0 < width <= 1.0:
        raise ValueError("the requested width must lie in (0, 1]")
    _check_proportion(expected_accuracy)
    z = _z(confidence)

    def wide(n: int) -> bool:
        return 2.0 * _wilson(expected_accuracy, n, z)[1] > width

    if not wide(1):
        return 1
    low, high = 1, 2  # invariant: wide(low) is True, and high is tested before use
    while wide(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if wide(middle):
            low = middle
        else:
            high = middle
    return high


def allocate_proportional(population: Mapping[Hashable, int], size: int) -> dict[Hashable, int]:
    """Split ``size`` across strata in proportion to ``population`` (largest-remainder rounding).

    quota_s = size * n_s / total; each stratum first gets floor(quota_s), the leftover units go to the
    largest remainders (ties: larger stratum, then stratum order). When ``size`` is at least the number
    of non-empty strata, every non-empty stratum gets at least one: a stratum left at 0 takes one unit
    from the stratum most above its quota (a_s - quota_s largest) among those holding two or more.
    Strata are processed in sorted order; the result maps every stratum (empty ones to 0).
    """
    if size < 0:
        raise ValueError("size must not be negative")
    if any(n < 0 for n in population.values()):
        raise ValueError("stratum sizes must not be negative")
    total = sum(population.values())
    if size > total:
        raise ValueError(f"cannot draw {size} items from {total}")
    strata = _sorted(population)
    if total == 0:
        return {s: 0 for s in strata}
    # Integer arithmetic: quota_s = size * n_s / total exactly.
    allocation = {s: size * population[s] // total for s in strata}
    remainder = {s: size * population[s] % total for s in strata}
    leftover = size - sum(allocation.values())
    order = sorted(range(len(strata)), key=lambda i: (-remainder[strata[i]], -population[strata[i]], i))
    for i in order[:leftover]:
        allocation[strata[i]] += 1
    non_empty = [s for s in strata if population[s] > 0]
    if size >= len(non_empty):
        for s in non_empty:
            if allocation[s] == 0:
                donors = [d for d in strata if allocation[d] >= 2]
                # over-quota amount times total: a_d * total - size * n_d
                donor = max(
                    donors, key=lambda d: (allocation[d] * total - size * population[d], -strata.index(d))
                )
                allocation[donor] -= 1
                allocation[s] = 1
    return allocation


def stratified_sample(
    items: Sequence[tuple[Hashable, Hashable]],
    *,
    size: int | None = None,
    fraction: float | None = None,
    seed: int = 0,
) -> StratifiedSample:
    """Draw a seeded stratified sample of item ids without replacement.

    ``items`` holds (item_id, stratum). Give exactly one of ``size`` (number of items) or ``fraction``
    (size = round(fraction * total), halves rounded up). Allocation by ``allocate_proportional``;
    inside each stratum (strata in sorted order) ``numpy.random.default_rng(seed)`` picks ids from the
    sorted ids, so the same items, size and seed always give the same sample whatever the input order.
    """
    if (size is None) == (fraction is None):
        raise ValueError("give exactly one of size and fraction")
    members: dict[Hashable, list[Hashable]] = {}
    seen: set[Hashable] = set()
    for item_id, stratum in items:
        if item_id in seen:
            raise ValueError(f"item {item_id!r} appears twice")
        seen.add(item_id)
        members.setdefault(stratum, []).append(item_id)
    total = len(seen)
    if fraction is not None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must lie in [0, 1]")
        size = math.floor(fraction * total + 0.5)
    assert size is not None
    population = {s: len(ids) for s, ids in members.items()}
    allocation = allocate_proportional(population, size)
    rng = np.random.default_rng(seed)
    chosen: list[Hashable] = []
    for stratum in _sorted(members):
        ids = _sorted(members[stratum])
        picks = np.sort(rng.choice(len(ids), size=allocation[stratum], replace=False))
        chosen.extend(ids[int(i)] for i in picks)
    return StratifiedSample(
        ids=chosen,
        allocation={s: allocation[s] for s in _sorted(members)},
        population={s: population[s] for s in _sorted(members)},
        seed=seed,
    )


def _wilson(p: float, n: int, z: float) -> tuple[float, float]:
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre, half


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    return float(norm.ppf(1.0 - (1.0 - confidence) / 2.0))


def _check_proportion(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError("expected_accuracy must lie in [0, 1]")


def _sorted(values: Any) -> list[Hashable]:
    items = list(values)
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=lambda v: (type(v).__name__, repr(v)))


@dataclass(frozen=True)
class DesignSample:
    """A sample drawn under a design with known inclusion probabilities: ``probabilities[id]`` = pi_i for
    every drawn id (the chance that item was drawn, what PPI weights by, ``metrics/ppi.py``)."""

    design: str
    ids: list[Hashable]
    probabilities: dict[Hashable, float]
    frame: int
    seed: int


def uniform_sample(ids: Sequence[Hashable], *, size: int, seed: int = 0) -> DesignSample:
    """A simple random sample without replacement of ``size`` of ``ids``: pi_i = size / N for every item.
    The ids are sorted first, so the same ids, size and seed always give the same sample."""
    frame = _sorted(ids)
    if len(set(frame)) != len(frame):
        raise ValueError("an item appears twice")
    if not 0 <= size <= len(frame):
        raise ValueError(f"cannot draw {size} items from {len(frame)}")
    picks = np.sort(np.random.default_rng(seed).choice(len(frame), size=size, replace=False))
    chosen = [frame[int(i)] for i in picks]
    return DesignSample("uniform", chosen, {i: size / len(frame) for i in chosen}, len(frame), seed)


def stratified_design(sample: StratifiedSample, strata: Sequence[tuple[Hashable, Hashable]]) -> DesignSample:
    """The inclusion probabilities of a ``stratified_sample``: pi_i = a_s / N_s for an item of stratum s
    (a_s drawn of the N_s items of s, without replacement)."""
    stratum_of = dict(strata)
    probabilities = {
        i: sample.allocation[stratum_of[i]] / sample.population[stratum_of[i]] for i in sample.ids
    }
    return DesignSample("stratified", list(sample.ids), probabilities, len(stratum_of), sample.seed)


def active_probabilities(
    scores: Mapping[Hashable, float], size: float, *, mix: float = 0.5
) -> dict[Hashable, float]:
    """Inclusion probabilities that oversample uncertain items (Zrnic and Candes 2024, "Active statistical
    inference"): pi_i = min(1, c * ((1 - mix) / N + mix * u_i / sum u)), scores u_i >= 0, with c chosen so
    that sum pi_i = ``size`` (the expected sample size; capped items keep pi = 1 and the rest is
    re-scaled). ``mix`` < 1 keeps every pi_i > 0, which the estimator needs; all scores 0 gives the
    uniform design."""
    if not 0.0 <= mix < 1.0:
        raise ValueError("mix must lie in [0, 1)")
    ids = _sorted(scores)
    n_all = len(ids)
    if not 0 < size <= n_all:
        raise ValueError(f"cannot draw {size} items from {n_all}")
    u = np.array([float(scores[i]) for i in ids])
    if not np.all(np.isfinite(u)) or np.any(u < 0):
        raise ValueError("uncertainty scores must be finite and not negative")
    share = np.full(n_all, 1.0 / n_all) if u.sum() == 0 else (1 - mix) / n_all + mix * u / u.sum()
    pi = np.zeros(n_all)
    capped = np.zeros(n_all, dtype=bool)
    for _ in range(n_all + 1):
        free = ~capped
        left = size - capped.sum()
        pi[free] = left * share[free] / share[free].sum()
        pi[capped] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return {i: float(min(1.0, p)) for i, p in zip(ids, pi, strict=True)}


def poisson_sample(
    probabilities: Mapping[Hashable, float], *, seed: int = 0, design: str = "active"
) -> DesignSample:
    """Poisson sampling: each item drawn independently with its own pi_i (the size is random, its
    expectation sum pi_i); one uniform draw per item in sorted id order, so the sample is reproducible."""
    ids = _sorted(probabilities)
    draws = np.random.default_rng(seed).random(len(ids))
    chosen = [i for i, u in zip(ids, draws, strict=True) if u < probabilities[i]]
    return DesignSample(design, chosen, {i: float(probabilities[i]) for i in chosen}, len(ids), seed)
