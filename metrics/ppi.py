"""Prediction-powered inference for means and proportions: machine labels on every item plus human labels
on a sample drawn with known inclusion probabilities (docs/metrics.md, "Machine + human sample").

References: Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered inference", Science 382
(2023) (PPI); Angelopoulos, Duchi and Zrnic, "PPI++: Efficient prediction-powered inference",
arXiv:2311.01453 (2023) (power tuning, lambda); Zrnic and Candes, "Active statistical inference", ICML 2024
(inclusion probabilities chosen from the machine's uncertainty); Horvitz and Thompson (1952) and Hajek (1971)
for the inverse-probability weights.

Notation. N items carry a machine label f_i (all of them: the "machine-labelled" set); n of them, drawn
with inclusion probability pi_i, also carry a human label Y_i (the "people-labelled" sample). The target is
the mean of Y over the items (a prevalence when Y is 0/1, a Likert mean when Y is a scale position).

Weights: w_i = (1/pi_i) / mean_j(1/pi_j) over the people-labelled sample, so they average 1 (Hajek's
normalisation); with a uniform design every w_i = 1. Weighted sample means: Ybar_w = mean(w Y),
fbar_w = mean(w f) over the sample; Fbar = mean(f) and s2_F = var(f, ddof=1) over all N machine labels.

Estimator (PPI++ with weights):

    theta(lambda) = Ybar_w + lambda * (Fbar - fbar_w)

Its variance (the sample part is the linearised variance of a Hajek mean; the machine part is PPI++'s):

    V(lambda) = sum_i w_i^2 ((Y_i - Ybar_w) - lambda (f_i - fbar_w))^2 / (n (n - 1)) + lambda^2 s2_F / N

95% interval (CLT): theta +- z * sqrt(V), z = Phi^-1(0.975). Valid ranges: for a proportion the estimate and
its interval are clipped to [0, 1] (theta(lambda) itself can leave it: a machine mean above the sample's
pulls a small share below 0), and the reason says when the estimate was clipped; a difference of two
proportions and its interval are clipped to [-1, 1]. Clipping moves a bound only towards the true value's
range, so it never lowers coverage.

Enough data: an estimate from fewer than ``min_labelled`` people-labelled items is undefined (None, with the
reason); the selector asks for 10 per group by default (docs/metrics.md).

Small samples of a proportion (Y in {0, 1}): the CLT interval undercovers when the sample holds a handful of
positives or of machine errors (0.79-0.90 at 100 human labels of a 5% prevalence, docs/benchmarks.md), as
the Wald interval of a plain proportion does. For a proportion the interval is therefore computed, as
Agresti and Coull's is ("Approximate is better than 'exact'", The American Statistician 52, 1998), from the
sample with four pseudo-items added, one of each (Y, f) in {0, 1}^2 with weight 1: Y and f each gain two
successes and two failures (z^2/2 ~ 2). The centre ``Ybar_w' + lambda (Fbar - fbar_w')``, V and lambda*
are read from the augmented sample (n + 4 items); the reported point estimate stays theta(lambda) of the
sample as drawn. At lambda = 0 this is Agresti-Coull's interval (with n + 3 for n + 4 in the variance's
denominator); it covered 0.953-1.000 on ViSAGe's labels at 100-1,000 human labels under every design
(docs/benchmarks.md). A mean that is not a proportion (a Likert mean) keeps the plain CLT interval.

Power tuning: V is a quadratic in lambda, minimised at

    lambda* = C / (D + s2_F / N),  C = sum w^2 (Y - Ybar_w)(f - fbar_w) / (n (n - 1)),
                                   D = sum w^2 (f - fbar_w)^2 / (n (n - 1))

(PPI++ eq. for the mean: Cov(Y, f) / ((1 + n/N) Var(f)) when the weights are 1 and the variances of f on
the sample and on all items agree). lambda = 1 is the original PPI; lambda = 0 is the human-only estimate
Ybar_w with the classical interval Ybar +- z s_Y / sqrt(n) under a uniform design. Any fixed lambda gives a
valid interval; lambda* only makes it as narrow as the data allow, never wider than human-only (up to the
estimation of lambda*).

Effective sample size: n_eff = n * V(0) / V(lambda), the number of human labels a human-only estimate
would need for the same variance; the gain is n_eff / n.

Differences between two groups (conditions, models) estimated on disjoint items are independent:
theta_A - theta_B +- z sqrt(V_A + V_B).

Labels needed for a target width W: with lambda held, V(n) = A / n + B (A = n times the sample part,
B = the machine part), so the smallest n with 2 z sqrt(V(n)) <= W is ceil(A / ((W / 2z)^2 - B)); none when
(W / 2z)^2 <= B (more human labels alone cannot get there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class Interval:
    """A point estimate with its CLT interval and standard error; all None when undefined."""

    estimate: float | None
    low: float | None
    high: float | None
    se: float | None


@dataclass(frozen=True)
class PpiEstimate:
    """One PPI++ estimate of a mean, with the human-only and machine-only readings beside it.

    ``n_labelled``: items with both a human and a machine label (the sample); ``n_machine``: items with a
    machine label (N). ``ppi`` is the estimate and interval at ``lam``; ``human_only`` the same design's
    estimate at lambda = 0; ``machine_only`` the plain mean of the machine labels (no interval: its bias is
    what PPI corrects). ``n_effective`` = n V(0)/V(lam) and ``gain`` = n_effective / n. Undefined values are
    None with ``reason``.
    """

    ppi: Interval
    human_only: Interval
    machine_only: float | None
    lam: float | None
    n_labelled: int
    n_machine: int
    n_effective: float | None
    gain: float | None
    weighted: bool
    reason: str | None = None
    # The pieces of V(lam) = a / n + b, kept for planning (labels_needed).
    sample_term: float | None = None
    machine_term: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class PpiDifference:
    """theta_A - theta_B for two estimates on disjoint items, PPI and human-only."""

    ppi: Interval
    human_only: Interval
    machine_only: float | None
    reason: str | None = None


NONE = Interval(None, None, None, None)
# Agresti and Coull's pseudo-items for a proportion's interval: one of each (Y, f) pair, weight 1 each, so
# Y and f each gain 2 successes and 2 failures (z^2 / 2 ~ 2 of each, as in their interval).
PSEUDO_Y = np.array([0.0, 0.0, 1.0, 1.0])
PSEUDO_F = np.array([0.0, 1.0, 0.0, 1.0])
# Labels or probabilities: a list or a numpy array of numbers.
Numbers = Sequence[float] | np.ndarray


def z_value(confidence: float = 0.95) -> float:
    """Phi^-1(1 - (1 - confidence) / 2), e.g. 1.959964 for 95%."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    return float(norm.ppf(1.0 - (1.0 - confidence) / 2.0))


def hajek_weights(pi: Numbers) -> np.ndarray:
    """w_i = (1/pi_i) / mean(1/pi_j); every pi_i must lie in (0, 1]."""
    p = np.asarray(pi, dtype=float)
    if p.size and (not np.all(np.isfinite(p)) or np.any(p <= 0.0) or np.any(p > 1.0)):
        raise ValueError("inclusion probabilities must lie in (0, 1]")
    inverse = 1.0 / p
    return np.asarray(inverse / inverse.mean()) if p.size else inverse


def ppi_mean(
    y: Numbers,
    f_labelled: Numbers,
    f_all: Numbers,
    *,
    pi: Numbers | None = None,
    lam: float | None = None,
    confidence: float = 0.95,
    proportion: bool = False,
    min_labelled: int = 2,
) -> PpiEstimate:
    """The PPI++ estimate of mean(Y) (formulas in the module docstring).

    ``y`` and ``f_labelled``: the human and the machine label of each people-labelled item (same order);
    ``f_all``: the machine label of every item (the labelled ones included); ``pi``: each labelled item's
    inclusion probability (None: a uniform design); ``lam``: a fixed lambda (None: power-tuned lambda*;
    1: PPI; 0: human-only); ``proportion``: clip the estimate and the interval to [0, 1];
    ``min_labelled``: the fewest people-labelled items an estimate is given from (at least 2).
    """
    y_arr = np.asarray(y, dtype=float)
    f_arr = np.asarray(f_labelled, dtype=float)
    big = np.asarray(f_all, dtype=float)
    if y_arr.shape != f_arr.shape or y_arr.ndim != 1:
        raise ValueError("y and f_labelled must be two lists of the same length")
    if pi is not None and len(pi) != len(y_arr):
        raise ValueError("pi must give one inclusion probability per labelled item")
    if not (np.all(np.isfinite(y_arr)) and np.all(np.isfinite(f_arr)) and np.all(np.isfinite(big))):
        raise ValueError("labels must be finite numbers")
    n, n_all = int(y_arr.size), int(big.size)
    machine_only = float(big.mean()) if n_all else None
    weights = hajek_weights(pi) if pi is not None else np.ones(n)
    weighted = pi is not None and bool(n) and not np.allclose(weights, 1.0)
    least = max(2, int(min_labelled))
    if n < least or n_all < 2:
        reason = (
            f"needs at least {least} people-labelled items (has {n}): no estimate"
            if n < least
            else f"needs at least 2 machine-labelled items (has {n_all})"
        )
        return PpiEstimate(NONE, NONE, machine_only, None, n, n_all, None, None, weighted, reason)
    z = z_value(confidence)
    # The point estimate reads the sample as drawn; a proportion's interval (its centre, V and lambda*)
    # reads it with the four pseudo-items of Agresti and Coull added (module docstring).
    y_bar_raw = float(np.mean(weights * y_arr))
    f_bar_raw = float(np.mean(weights * f_arr))
    if proportion:
        y_arr = np.concatenate([y_arr, PSEUDO_Y])
        f_arr = np.concatenate([f_arr, PSEUDO_F])
        weights = np.concatenate([weights, np.ones(PSEUDO_Y.size)])
    total = float(weights.sum())
    y_bar = float(np.sum(weights * y_arr)) / total
    f_bar = float(np.sum(weights * f_arr)) / total
    big_bar = float(big.mean())
    s2_big = float(big.var(ddof=1))
    dy = weights * (y_arr - y_bar)
    df = weights * (f_arr - f_bar)
    scale = total * (total - 1)
    c = float(np.sum(dy * df)) / scale
    d = float(np.sum(df * df)) / scale
    e = float(np.sum(dy * dy)) / scale
    if lam is None:
        denominator = d + s2_big / n_all
        lam = c / denominator if denominator > 0 else 0.0
    lam = float(lam)

    def variance(at: float) -> tuple[float, float]:
        sample = e - 2 * at * c + at * at * d
        return max(sample, 0.0), at * at * s2_big / n_all

    def interval(at: float) -> Interval:
        sample, machine = variance(at)
        estimate = y_bar_raw + at * (big_bar - f_bar_raw)
        centre = y_bar + at * (big_bar - f_bar)
        se = math.sqrt(sample + machine)
        low, high = centre - z * se, centre + z * se
        if proportion:
            estimate, low, high = _bounded(estimate, 0.0, 1.0), max(0.0, low), min(1.0, high)
        return Interval(estimate, low, high, se)

    sample_now, machine_now = variance(lam)
    v_now, v_human = sample_now + machine_now, e
    n_eff = n * v_human / v_now if v_now > 0 else None
    raw = y_bar_raw + lam * (big_bar - f_bar_raw)
    reasons = [
        *(["every label agrees: the interval has width 0 (the CLT says nothing here)"] if v_now <= 0 else []),
        *(
            [f"estimate clipped to [0, 1] (the PPI++ formula gives {raw:.4f})"]
            if proportion and not 0.0 <= raw <= 1.0
            else []
        ),
    ]
    return PpiEstimate(
        ppi=interval(lam),
        human_only=interval(0.0),
        machine_only=machine_only,
        lam=lam,
        n_labelled=n,
        n_machine=n_all,
        n_effective=n_eff,
        gain=n_eff / n if n_eff is not None else None,
        weighted=weighted,
        reason="; ".join(reasons) or None,
        sample_term=sample_now * n,
        machine_term=machine_now,
    )


def _bounded(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


def ppi_difference(
    a: PpiEstimate, b: PpiEstimate, *, confidence: float = 0.95, proportion: bool = False
) -> PpiDifference:
    """theta_A - theta_B +- z sqrt(V_A + V_B) (independent: the two groups hold different items);
    ``proportion``: a difference of two proportions, its estimate and interval clipped to [-1, 1]."""
    z = z_value(confidence)

    def diff(x: Interval, y: Interval) -> Interval:
        if x.estimate is None or y.estimate is None or x.se is None or y.se is None:
            return NONE
        estimate = x.estimate - y.estimate
        se = math.sqrt(x.se**2 + y.se**2)
        low, high = estimate - z * se, estimate + z * se
        if proportion:
            estimate, low, high = _bounded(estimate, -1.0, 1.0), max(-1.0, low), min(1.0, high)
        return Interval(estimate, low, high, se)

    machine = (
        a.machine_only - b.machine_only if a.machine_only is not None and b.machine_only is not None else None
    )
    reason = a.reason if a.ppi.estimate is None else b.reason if b.ppi.estimate is None else None
    return PpiDifference(diff(a.ppi, b.ppi), diff(a.human_only, b.human_only), machine, reason)


def labels_needed(estimate: PpiEstimate, width: float, *, confidence: float = 0.95) -> int | None:
    """Smallest number of people-labelled items whose interval (same design, same lambda) is at most
    ``width`` wide: ceil(A / ((W / 2z)^2 - B)); None when undefined or unreachable by human labels alone."""
    if not width > 0:
        raise ValueError("the target width must be positive")
    if estimate.sample_term is None or estimate.machine_term is None:
        return None
    z = z_value(confidence)
    room = (width / (2 * z)) ** 2 - estimate.machine_term
    if room <= 0:
        return None
    if estimate.sample_term <= 0:
        return 2
    return max(2, math.ceil(estimate.sample_term / room - 1e-9))
