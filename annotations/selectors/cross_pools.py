"""Agreement between pools of annotators (the ``cross`` list of ``agreement --breakdown annotator:KEY``).

For each question (each option of a multi question) and each two pools (groups of humans who gave two
values of KEY to this study), the pools' per-item value counts on one item list and one value domain,
and from them ``metrics.cross_replication``: kappa_x (Wong, Paritosh and Aroyo 2021), its normalised
form and the share of items whose pool majorities agree, each with a seeded bootstrap interval over the
items both pools rated (docs/agreement.md, "Agreement between pools"). Reads only counted annotations,
as the rest of the agreement report.

``pool_reliability_entries``: the reliability gate of findings read from one pool (``consensus@KEY=VALUE``):
the gate's entries (``selectors.reliability``) with alpha computed among the pool's people only.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from annotations.models import Item, Study
from annotations.selectors.matrices import LEVELS, question_matrix, reliability_for
from annotations.selectors.reliability import reliability_entries
from metrics.agreement import Level, ValueCounts, value_counts
from metrics.cross_replication import CrossReplicationResult, cross_replication, shared_counts
from metrics.reliability import Thresholds
from protocols.schema import Question

# Below this many items rated by both pools a defined kappa_x is flagged (the alpha threshold's reading).
SMALL_SAMPLE_ITEMS = 10
# How many items whose pool majorities differ the report names (the count is always given).
DIFFERING_SHOWN = 20

CROSS_METHOD = (
    "kappa_x = 1 - D_o/D_e on the items both pools rated: D_o the mean over items of the mean distance "
    "between a rating of one pool and a rating of the other, D_e the same distance between the pools' "
    "overall value distributions (nominal: [c != k]; ordinal: Krippendorff's ordinal distance from both "
    "pools' counts). normalised = kappa_x / sqrt(alpha_A alpha_B), the pools' alphas on the same items. "
    "Majority agreement: among items where each pool has a strict majority (more than half of its "
    "ratings), the share with the same majority. Intervals: percentile bootstrap over items."
)

PoolData = dict[str, tuple[list[int], ValueCounts]]


def _empty() -> tuple[list[int], ValueCounts]:
    return [], ValueCounts(counts=np.zeros((0, 0), dtype=np.int64), domain=np.zeros(0))


def _pool_counts(
    study: Study, question: Question, pools: dict[str, list[int]]
) -> list[tuple[str, Level, PoolData]]:
    """Per label (the question, or ``key:option``): its level and each pool's (item ids, value counts).

    A single-answer question is read as one matrix so that every pool's values share one coding (a
    nominal code is the rank of the value's JSON text); a multi question per pool (0/1 per option)."""
    level = LEVELS[question.kind]
    if question.kind != "multi":
        data = question_matrix(study, question)
        if data is None:
            return [(question.key, level, {pool: _empty() for pool in pools})]
        return [
            (
                question.key,
                level,
                {pool: (list(data.item_ids), value_counts(data.rows(ids))) for pool, ids in pools.items()},
            )
        ]
    per_label: dict[str, PoolData] = {}
    for pool, ids in pools.items():
        for reliability in reliability_for(study, question, annotator_ids=ids):
            per_label.setdefault(reliability.label, {})[pool] = (reliability.item_ids, reliability.counts)
    return [
        (label, level, {pool: found.get(pool, _empty()) for pool in pools})
        for label, found in per_label.items()
    ]


def _small_sample(value: float | None, n_items: int) -> str | None:
    if value is None or n_items >= SMALL_SAMPLE_ITEMS:
        return None
    items = "1 item" if n_items == 1 else f"{n_items} items"
    return (
        f"small sample: only {items} rated by both pools (fewer than {SMALL_SAMPLE_ITEMS}); "
        "kappa_x and its interval are not reliable"
    )


def cross_entry(
    label: str, pools: tuple[str, str], result: CrossReplicationResult, differing: list[str]
) -> dict[str, Any]:
    """One ``cross`` entry of the report: the issue's keys first, then what a reader needs to trust them."""
    kappa, normalised, majority = result.kappa_x, result.normalised, result.majority
    return {
        "question": label,
        "pools": list(pools),
        "level": result.level,
        "kappa_x": kappa.value,
        "low": kappa.low,
        "high": kappa.high,
        "undefined_reason": kappa.undefined_reason,
        "normalised": normalised.value,
        "normalised_low": normalised.low,
        "normalised_high": normalised.high,
        "normalised_undefined_reason": normalised.undefined_reason,
        "majority_agreement": majority.value,
        "majority_low": majority.low,
        "majority_high": majority.high,
        "majority_undefined_reason": majority.undefined_reason,
        "n_items": result.n_items,
        "n_ratings": [result.n_ratings_a, result.n_ratings_b],
        "observed_disagreement": result.observed_disagreement,
        "expected_disagreement": result.expected_disagreement,
        "alphas": [result.alpha_a.value, result.alpha_b.value],
        "majority_n_items": result.majority_n_items,
        "majority_n_agree": result.majority_n_agree,
        "majority_excluded": result.majority_excluded,
        "majority_differ": {"n": len(result.differing), "items": differing},
        "confidence": result.confidence if result.n_resamples_requested else None,
        "n_resamples": kappa.n_resamples,
        "n_resamples_undefined": kappa.n_resamples_undefined,
        "seed": result.seed,
        "small_sample": _small_sample(kappa.value, result.n_items),
    }


def cross_pool_entries(
    study: Study, protocol: Any, pools: dict[str, list[int]], *, n_resamples: int, seed: int
) -> list[dict[str, Any]]:
    """Every (question or option, two pools) entry, pools in sorted order (none with fewer than 2 pools)."""
    names = sorted(pools)
    pairs = list(itertools.combinations(names, 2))
    if not pairs:
        return []
    entries: list[dict[str, Any]] = []
    shown: dict[int, str] = {}
    for question in protocol.questions:
        if question.kind == "boxes":
            continue
        for label, level, data in _pool_counts(study, question, {name: pools[name] for name in names}):
            for first, second in pairs:
                items, counts_a, counts_b, domain = shared_counts(*data[first], *data[second])
                result = cross_replication(
                    counts_a, counts_b, domain, level=level, n_resamples=n_resamples, seed=seed
                )
                differing = [items[position] for position in result.differing[:DIFFERING_SHOWN]]
                missing = [item for item in differing if item not in shown]
                if missing:
                    shown.update(Item.objects.filter(pk__in=missing).values_list("pk", "external_id"))
                entries.append(
                    cross_entry(label, (first, second), result, [shown[item] for item in differing])
                )
    return entries


def pool_reliability_entries(
    study: Study, keys: list[str], thresholds: Thresholds, members: list[int]
) -> list[dict[str, Any]]:
    """The reliability gate's entries (``selectors.reliability.reliability_entries``) with Krippendorff's
    alpha among ``members`` only (a pool's people): the same level, pooling and seeded bootstrap."""
    return reliability_entries(study, keys, thresholds, members)
