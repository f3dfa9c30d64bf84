"""Alpha from per-item value counts (issue 26): ``value_counts_of`` builds, from (item, value) pairs in
any order, the same arrays as ``value_counts`` of the coders x items matrix, and the counts forms of
alpha and its bootstrap give the same results as the matrix forms (same seed, same interval)."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.agreement import (
    LEVELS,
    REASON_EMPTY,
    REASON_NO_PAIRS,
    alpha_with_bootstrap,
    alpha_with_bootstrap_of_counts,
    krippendorff_alpha,
    krippendorff_alpha_of_counts,
    value_counts,
    value_counts_of,
)


def random_matrix(rng: np.random.Generator) -> np.ndarray:
    coders, items = int(rng.integers(1, 9)), int(rng.integers(1, 40))
    matrix = rng.integers(0, int(rng.integers(1, 5)), size=(coders, items)).astype(float)
    matrix[rng.random((coders, items)) < rng.uniform(0.0, 0.8)] = np.nan
    return matrix


def counts_of(matrix: np.ndarray, rng: np.random.Generator):
    coder, item = np.nonzero(~np.isnan(matrix))
    order = rng.permutation(item.size)  # the judgements in any order
    return value_counts_of(item[order], matrix[coder, item][order], matrix.shape[1])


@pytest.mark.parametrize("seed", range(30))
def test_counts_give_the_matrix_results(seed: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = random_matrix(rng)
    counts = counts_of(matrix, rng)
    expected = value_counts(matrix)
    assert np.array_equal(counts.counts, expected.counts) and np.array_equal(counts.domain, expected.domain)
    for level in LEVELS:
        assert krippendorff_alpha_of_counts(counts, level=level) == krippendorff_alpha(matrix, level=level)
        assert alpha_with_bootstrap_of_counts(
            counts, level=level, n_resamples=200, seed=seed
        ) == alpha_with_bootstrap(matrix, level=level, n_resamples=200, seed=seed)


def test_undefined_cases_and_bad_input() -> None:
    empty = value_counts_of(np.empty(0, dtype=np.int64), np.empty(0), 0)
    assert krippendorff_alpha_of_counts(empty, level="nominal").undefined_reason == REASON_EMPTY
    lonely = value_counts_of(np.array([0, 1]), np.array([1.0, 0.0]), 3)
    assert krippendorff_alpha_of_counts(lonely, level="nominal").undefined_reason == REASON_NO_PAIRS
    with pytest.raises(ValueError):
        value_counts_of(np.array([0, 3]), np.array([1.0, 0.0]), 3)
    with pytest.raises(ValueError):
        value_counts_of(np.array([0, 1]), np.array([1.0, np.nan]), 3)
    with pytest.raises(ValueError):
        alpha_with_bootstrap_of_counts(lonely, level="nominal", n_resamples=0)
