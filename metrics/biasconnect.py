"""BiasConnect Intersectional Sensitivity and InterMit planning (Shukla, Chinchure et al., "Mitigate One,
Skew Another?"; SPEC section 6; no public code exists, so the choices below are ours).

Input: one record per image of one prompt (e.g. one occupation): ``AxisImage(condition, labels, person)``
with ``condition`` = ``"base"`` (the initial prompt) or ``"AXIS:VALUE"`` (a counterfactual prompt that
intervenes on AXIS), ``labels`` = axis -> chosen option (None = unanswered), ``person`` = the "Is there a
person in the image?" answer. Images without a person are left out of every distribution.

- D_y: distribution of axis y's options over the images.
- W1 with the 0/1 ground distance = total variation TV(D, D*) = 1/2 sum |D - D*|; with the optional
  ordinal ground distance |i - j| (option order as listed) = ``scipy.stats.wasserstein_distance``.
- w_bar(D) = W1(D, D*) / max_j W1(delta_j, D*) in [0, 1] (1 - 1/k for a uniform target over k options
  with 0/1 distance).
- IS_xy = w_bar_y(initial) - w_bar_y(after intervening on x), where the after-distribution is the equal-
  weight mean of the y-distributions of x's counterfactual prompts. Rows x, columns y.
- InterMit: tau = <w_bar(B*), p>; next axis = argmax over candidate rows of <S[row, B*], p>.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.stats import pearsonr, wasserstein_distance

Ground = Literal["nominal", "ordinal"]
BASE_CONDITION = "base"


class AxisImage(NamedTuple):
    """One labelled image of one prompt."""

    condition: str
    labels: Mapping[str, str | None]
    person: bool = True


@dataclass(frozen=True)
class Distribution:
    """Option shares of one axis over ``n`` images (probs None when n = 0)."""

    options: list[str]
    counts: list[int]
    n: int
    probs: list[float] | None


@dataclass(frozen=True)
class Deviation:
    """w_bar = raw / max_raw: the normalised Wasserstein distance to the target."""

    value: float | None
    raw: float | None
    max_raw: float | None
    ground: str
    reason: str | None = None


@dataclass
class SensitivityMatrix:
    """IS matrix: ``values[i][j]`` = IS of intervening on ``rows[i]`` for axis ``columns[j]``.

    ``w_initial[y]`` and ``w_after[x][y]`` are the w_bar values behind each cell, ``n_images`` the images
    with a person per condition, ``warnings`` the negative cells and skipped counterfactual prompts.
    """

    rows: list[str]
    columns: list[str]
    values: list[list[float | None]]
    w_initial: dict[str, float | None]
    w_after: dict[str, dict[str, float | None]]
    n_images: dict[str, int]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InterMitStep:
    """One planning step: current tau, whether it is below epsilon, and the axis to mitigate next."""

    tau: float
    epsilon: float
    done: bool
    next_axis: str | None
    gammas: dict[str, float | None]
    reason: str | None = None


@dataclass(frozen=True)
class MitigationReport:
    """InterMit outcome: steps taken, MitAmt (final tau) and MitSteps (steps / |B*|)."""

    steps: int
    mitigated_axes: list[str]
    tau_history: list[float]
    mit_amt: float | None
    mit_steps: float | None
    reached_epsilon: bool | None


@dataclass(frozen=True)
class Correlation:
    """Pearson r between predicted and measured IS over ``n`` defined pairs."""

    r: float | None
    p_value: float | None
    n: int
    reason: str | None = None


def distribution(labels: Iterable[str | None], options: Sequence[str]) -> Distribution:
    """Counts and shares of ``options`` among the non-None labels; other labels raise ValueError."""
    index = {o: i for i, o in enumerate(options)}
    counts = [0] * len(options)
    for label in labels:
        if label is None:
            continue
        if label not in index:
            raise ValueError(f"label {label!r} is not one of the options {list(options)}")
        counts[index[label]] += 1
    n = sum(counts)
    return Distribution(list(options), counts, n, [c / n for c in counts] if n else None)


def uniform_target(k: int) -> list[float]:
    """D* = 1/k for each of k options."""
    return [1.0 / k] * k


def _check_target(target: Sequence[float], k: int) -> npt.NDArray[np.float64]:
    t: npt.NDArray[np.float64] = np.asarray(target, dtype=np.float64)
    if t.shape != (k,) or (t < 0).any() or t.sum() <= 0:
        raise ValueError(f"target must be {k} non-negative weights with a positive sum")
    normalised: npt.NDArray[np.float64] = t / t.sum()
    return normalised


def _w1(p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], ground: Ground) -> float:
    if ground == "nominal":
        return float(0.5 * np.abs(p - q).sum())
    if ground == "ordinal":
        positions = np.arange(len(p), dtype=float)
        return float(wasserstein_distance(positions, positions, p, q))
    raise ValueError(f"unknown ground distance {ground!r}")


def normalised_wasserstein(
    probs: Sequence[float] | None, target: Sequence[float], ground: Ground = "nominal"
) -> Deviation:
    """w_bar = W1(D, D*) / max_j W1(delta_j, D*), in [0, 1].

    None with a reason when D is empty (no image with a person) or when every one-hot distribution is
    at distance 0 from the target (a single option).
    """
    k = len(target)
    t = _check_target(target, k)
    if probs is None:
        return Deviation(None, None, None, ground, "no image with a person and an answer for this axis")
    p = np.asarray(probs, dtype=float)
    raw = _w1(p, t, ground)
    max_raw = max(_w1(np.eye(k)[j], t, ground) for j in range(k))
    if max_raw == 0:
        return Deviation(None, raw, max_raw, ground, "every distribution equals the target (one option)")
    return Deviation(raw / max_raw, raw, max_raw, ground)


def _split(condition: str) -> tuple[str, str] | None:
    if condition == BASE_CONDITION:
        return None
    axis, sep, value = condition.partition(":")
    if not sep:
        raise ValueError(f"condition {condition!r} is neither 'base' nor 'AXIS:VALUE'")
    return axis, value


def intersectional_sensitivity(
    images: Iterable[AxisImage],
    options: Mapping[str, Sequence[str]],
    targets: Mapping[str, Sequence[float]] | None = None,
    ordinal_axes: Iterable[str] = (),
) -> SensitivityMatrix:
    """IS matrix for one prompt: IS_xy = w_bar_y(base) - w_bar_y(pooled counterfactuals of x).

    ``options`` lists each axis's options (in order; the order matters only for ``ordinal_axes``).
    ``targets`` gives D* per axis (default uniform; a reference set's shares from ``distribution``).
    Rows are the axes that have counterfactual prompts, columns all axes of ``options``. A counterfactual
    prompt without person images is skipped from the pooling (warning); a cell is None when a w_bar is.
    """
    ordinal = set(ordinal_axes)
    by_condition: dict[str, list[AxisImage]] = {}
    for img in images:
        if img.person:
            by_condition.setdefault(img.condition, []).append(img)
        else:
            by_condition.setdefault(img.condition, [])
    columns = list(options)
    tgt = {
        y: list(targets[y]) if targets and y in targets else uniform_target(len(options[y])) for y in columns
    }

    def w_bar(probs: Sequence[float] | None, y: str) -> float | None:
        return normalised_wasserstein(probs, tgt[y], "ordinal" if y in ordinal else "nominal").value

    base = by_condition.get(BASE_CONDITION, [])
    w_initial = {
        y: w_bar(distribution((i.labels.get(y) for i in base), options[y]).probs, y) for y in columns
    }
    counterfactuals: dict[str, list[str]] = {}
    for condition in by_condition:
        split = _split(condition)
        if split is not None:
            counterfactuals.setdefault(split[0], []).append(condition)
    warnings: list[str] = []
    rows = sorted(counterfactuals, key=lambda a: (columns.index(a) if a in columns else len(columns), a))
    values: list[list[float | None]] = []
    w_after: dict[str, dict[str, float | None]] = {}
    for x in rows:
        w_after[x] = {}
        row: list[float | None] = []
        for y in columns:
            dists = []
            for condition in sorted(counterfactuals[x]):
                d = distribution((i.labels.get(y) for i in by_condition[condition]), options[y])
                if d.probs is None:
                    warnings.append(
                        f"{condition}: no image with a person answered {y}; left out of the pooling"
                    )
                else:
                    dists.append(d.probs)
            after = w_bar(list(np.mean(dists, axis=0)) if dists else None, y)
            w_after[x][y] = after
            initial = w_initial[y]
            cell = None if after is None or initial is None else initial - after
            if cell is not None and cell < 0:
                warnings.append(
                    f"IS[{x}][{y}] = {cell:.3f} < 0: mitigating {x} moves {y} away from its target"
                )
            row.append(cell)
        values.append(row)
    n_images = {c: len(v) for c, v in sorted(by_condition.items())}
    return SensitivityMatrix(rows, columns, values, w_initial, w_after, n_images, warnings)


def _normalised_priority(priority: Mapping[str, float]) -> dict[str, float]:
    total = sum(priority.values())
    if not priority or any(v < 0 for v in priority.values()) or total <= 0:
        raise ValueError("priority must hold non-negative weights with a positive sum")
    return {a: v / total for a, v in priority.items()}


def intermit_tau(w_bar: Mapping[str, float | None], priority: Mapping[str, float]) -> float | None:
    """tau = <w_bar(B*), p> with p normalised to sum 1; None when an axis of B* has no w_bar."""
    p = _normalised_priority(priority)
    terms = []
    for a, weight in p.items():
        value = w_bar.get(a)
        if value is None:
            return None
        terms.append(weight * float(value))
    return float(sum(terms))


def intermit_next_axis(
    w_bar: Mapping[str, float | None],
    matrix: SensitivityMatrix,
    priority: Mapping[str, float],
    epsilon: float = 0.35,
    mitigated: Iterable[str] = (),
) -> InterMitStep:
    """One InterMit step: tau = <w_bar(B*), p>; when tau > epsilon, the next axis is the row (not yet
    mitigated) whose IS entries restricted to B* = keys of ``priority`` have the largest dot product
    gamma with p. Undefined cells count as 0 in gamma (reported as such in ``reason``)."""
    p = _normalised_priority(priority)
    tau = intermit_tau(w_bar, p)
    if tau is None:
        raise ValueError("every axis of the priority vector needs a w_bar value")
    if tau <= epsilon:
        return InterMitStep(tau, epsilon, True, None, {}, None)
    done = set(mitigated)
    gammas: dict[str, float | None] = {}
    had_missing = False
    for i, x in enumerate(matrix.rows):
        if x in done:
            continue
        total = 0.0
        for a, weight in p.items():
            cell = matrix.values[i][matrix.columns.index(a)] if a in matrix.columns else None
            had_missing |= cell is None
            total += weight * (cell or 0.0)
        gammas[x] = total
    if not gammas:
        return InterMitStep(
            tau, epsilon, False, None, {}, "every axis with counterfactuals is already mitigated"
        )
    best = max(gammas, key=lambda a: (gammas[a], -matrix.rows.index(a)))
    reason = "undefined IS cells counted as 0" if had_missing else None
    return InterMitStep(tau, epsilon, False, best, gammas, reason)


def mitigation_report(
    tau_history: Sequence[float],
    mitigated_axes: Sequence[str],
    priority: Mapping[str, float],
    epsilon: float = 0.35,
) -> MitigationReport:
    """MitAmt = final tau; MitSteps = (number of axes mitigated) / |B*| (paper section 5.1)."""
    if not tau_history:
        return MitigationReport(len(mitigated_axes), list(mitigated_axes), [], None, None, None)
    final = float(tau_history[-1])
    return MitigationReport(
        len(mitigated_axes),
        list(mitigated_axes),
        [float(t) for t in tau_history],
        final,
        len(mitigated_axes) / len(priority),
        final <= epsilon,
    )


def is_correlation(predicted: Sequence[float | None], measured: Sequence[float | None]) -> Correlation:
    """Pearson r (scipy.stats.pearsonr) between predicted IS and IS measured after a real mitigation,
    over the positions where both are defined. None with a reason under 3 pairs or for constant input."""
    if len(predicted) != len(measured):
        raise ValueError("predicted and measured must have the same length")
    pairs = [(a, b) for a, b in zip(predicted, measured, strict=True) if a is not None and b is not None]
    if len(pairs) < 3:
        return Correlation(None, None, len(pairs), "fewer than 3 defined pairs")
    x, y = np.array(pairs, dtype=float).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(None, None, len(pairs), "one side is constant")
    res = pearsonr(x, y)
    return Correlation(float(res.statistic), float(res.pvalue), len(pairs))
