"""Social Stereotype Index (SSI) from binary rubric labels (SPEC section 6).

Paper "ssi": Barve et al., "Can we Debias Social Stereotypes in AI-Generated Images?", section 4.

Input: one record per labelled image set: ``SsiRecord(query, category, model, condition, scores)`` with
``condition`` in {"initial", "refined"} and ``scores`` = rubric item -> 0/1 for the N items of the
query's category (geocultural 12, occupational 9, adjectival 10; paper Table 2).

- SSI(set) = (1/N) sum_i x_i.
- Cell mean = mean SSI over the sets of a (category, model, condition); ``model="all"`` pools models.
- Relative drop = (mean_initial - mean_refined) / mean_initial (None when mean_initial = 0).
- Paired t-test (scipy.stats.ttest_rel) over the queries that have both an initial and a refined set
  (pairs keyed by (model, query)); None with a reason for < 2 pairs or zero variance of the differences.
  A refined set's ``query`` must be its initial set's query (the caller resolves the link); the sets
  the test cannot pair are listed by ``unpaired_sets``.
- Prevalence of rubric item i = share of image sets with x_i = 1, per (category, item, condition).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.stats import ttest_rel

INITIAL, REFINED = "initial", "refined"
ALL_MODELS = "all"


class SsiRecord(NamedTuple):
    """Rubric labels of one image set; ``set_id`` names the set in listings (e.g. its external id)."""

    query: str
    category: str
    model: str
    condition: str
    scores: Mapping[str, int | bool]
    set_id: str = ""


@dataclass(frozen=True)
class SsiCell:
    """Mean SSI of ``n_sets`` image sets of one (category, model, condition)."""

    category: str
    model: str
    condition: str
    mean: float | None
    n_sets: int
    reason: str | None = None


@dataclass(frozen=True)
class SsiComparison:
    """Initial vs refined for one (category, model): means, relative drop and paired t-test."""

    category: str
    model: str
    initial_mean: float | None
    refined_mean: float | None
    n_initial: int
    n_refined: int
    relative_drop: float | None
    t: float | None
    p_value: float | None
    n_pairs: int
    drop_reason: str | None = None
    test_reason: str | None = None


@dataclass(frozen=True)
class UnpairedSet:
    """An image set the paired t-test cannot use: no set of the other condition has its (category,
    model, query)."""

    category: str
    model: str
    query: str
    condition: str
    set_id: str
    missing: str


@dataclass(frozen=True)
class Prevalence:
    """Share of ``n_sets`` image sets in which rubric ``item`` was marked (x = 1)."""

    category: str
    item: str
    condition: str
    share: float | None
    n_marked: int
    n_sets: int


def set_ssi(scores: Mapping[str, int | bool]) -> float | None:
    """SSI = (1/N) sum x_i over the N rubric items; None for an empty rubric. Values must be 0/1."""
    values = list(scores.values())
    if any(v not in (0, 1) for v in values):
        raise ValueError(f"rubric scores must be 0/1, got {values}")
    return float(np.mean(values)) if values else None


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def ssi_cells(records: Iterable[SsiRecord]) -> list[SsiCell]:
    """Mean SSI by (category, model, condition), plus model="all" pooling every model of a category."""
    table: dict[tuple[str, str, str], list[float]] = {}
    for r in records:
        value = set_ssi(r.scores)
        for model in (r.model, ALL_MODELS):
            bucket = table.setdefault((r.category, model, r.condition), [])
            if value is not None:
                bucket.append(value)
    return [
        SsiCell(c, m, cond, _mean(v), len(v), None if v else "no image set with rubric labels")
        for (c, m, cond), v in sorted(table.items())
    ]


def ssi_comparisons(records: Iterable[SsiRecord]) -> list[SsiComparison]:
    """Initial vs refined per (category, model) and per (category, "all"): relative drop and ttest_rel.

    Means use every image set of the condition; the t-test uses the (model, query) pairs present in both.
    """
    per_set: dict[tuple[str, str, str, str], float] = {}
    for r in records:
        value = set_ssi(r.scores)
        if value is None:
            continue
        key = (r.category, r.model, r.query, r.condition)
        if key in per_set:
            raise ValueError(f"two image sets for {key}")
        per_set[key] = value
    groups: dict[tuple[str, str], dict[str, dict[tuple[str, str], float]]] = {}
    for (category, model, query, condition), value in per_set.items():
        for m in (model, ALL_MODELS):
            groups.setdefault((category, m), {}).setdefault(condition, {})[(model, query)] = value
    out = []
    for (category, model), by_cond in sorted(groups.items()):
        ini, ref = by_cond.get(INITIAL, {}), by_cond.get(REFINED, {})
        mi, mr = _mean(list(ini.values())), _mean(list(ref.values()))
        drop: float | None = None
        drop_reason: str | None = None
        if mi is None or mr is None:
            drop_reason = "initial or refined image sets are missing"
        elif mi == 0:
            drop_reason = "initial mean SSI is 0"
        else:
            drop = (mi - mr) / mi
        keys = sorted(set(ini) & set(ref))
        t = p = None
        test_reason: str | None = None
        if len(keys) < 2:
            test_reason = "fewer than 2 queries have both an initial and a refined image set"
        else:
            a = np.array([ini[k] for k in keys])
            b = np.array([ref[k] for k in keys])
            if np.ptp(a - b) == 0:
                test_reason = "the initial - refined differences have zero variance"
            else:
                res = ttest_rel(a, b)
                t, p = float(res.statistic), float(res.pvalue)
                if not (math.isfinite(t) and math.isfinite(p)):
                    t = p = None
                    test_reason = "t-test is not finite"
        out.append(
            SsiComparison(
                category, model, mi, mr, len(ini), len(ref), drop, t, p, len(keys), drop_reason, test_reason
            )
        )
    return out


def unpaired_sets(records: Iterable[SsiRecord]) -> list[UnpairedSet]:
    """Every initial set with no refined set of the same (category, model, query), and the reverse;
    ``missing`` names the condition that is missing. Ordered by category, model, query, condition."""
    records = [r for r in records if r.condition in (INITIAL, REFINED)]
    present = {(r.category, r.model, r.query, r.condition) for r in records}
    other = {INITIAL: REFINED, REFINED: INITIAL}
    out = [
        UnpairedSet(r.category, r.model, r.query, r.condition, r.set_id, other[r.condition])
        for r in records
        if (r.category, r.model, r.query, other[r.condition]) not in present
    ]
    return sorted(out, key=lambda u: (u.category, u.model, u.query, u.condition, u.set_id))


def rubric_prevalence(records: Iterable[SsiRecord]) -> list[Prevalence]:
    """Per (category, rubric item, condition): share of image sets (all models pooled) with x = 1."""
    table: dict[tuple[str, str, str], list[int]] = {}
    for r in records:
        for item, x in r.scores.items():
            table.setdefault((r.category, item, r.condition), []).append(int(x))
    return [
        Prevalence(c, item, cond, sum(v) / len(v) if v else None, sum(v), len(v))
        for (c, item, cond), v in sorted(table.items())
    ]
