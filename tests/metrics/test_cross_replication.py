"""Cross-replication reliability (metrics/cross_replication.py) on tiny examples worked out by hand,
and against the pairwise definition on random counts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from metrics.agreement import ValueCounts
from metrics.cross_replication import (
    REASON_NO_EXPECTED,
    REASON_NO_ITEMS,
    REASON_NO_MAJORITY,
    REASON_ONE_ITEM,
    cross_replication,
    shared_counts,
)

# Nominal, values 0 (not a stereotype) and 1 (a stereotype); per item the counts (n_0, n_1) of each pool.
#   item 1: A (1, 2), B (0, 3);  item 2: A (3, 0), B (2, 1);  item 3: A (1, 2), B (2, 1).
# D_o per item = (nA_0 nB_1 + nA_1 nB_0) / (N_A N_B): 3/9, 3/9, 5/9, so D_o = (11/9)/3 = 11/27.
# Pools' shares: A (5/9, 4/9), B (4/9, 5/9); D_e = pA_0 pB_1 + pA_1 pB_0 = 25/81 + 16/81 = 41/81.
# kappa_x = 1 - (11/27)/(41/81) = 1 - 33/41 = 8/41.
# alpha_A: coincidences o_00 = 3, o_01 = o_10 = 2, o_11 = 2 (n_0 = 5, n_1 = 4, n = 9), so
#   alpha_A = 1 - (n - 1)(o_01 + o_10) / (2 n_0 n_1) = 1 - 8*4/40 = 0.2; alpha_B likewise 0.2
#   (o_00 = 2, o_01 = o_10 = 2, o_11 = 3, n_0 = 4, n_1 = 5).
# normalised = (8/41) / sqrt(0.2 * 0.2) = 40/41.
# Majorities: item 1 A 1, B 1 (agree); item 2 A 0, B 0 (agree); item 3 A 1, B 0 (differ): 2/3 over 3 items.
NOMINAL_A = [[1, 2], [3, 0], [1, 2]]
NOMINAL_B = [[0, 3], [2, 1], [2, 1]]

# Ordinal, values 0 < 1 < 2. item 1: A rated 0 and 1, B rated 2; item 2: A rated 2 and 2, B rated 1 and 2.
# Both pools' counts together: m = (1, 2, 4). Krippendorff's ordinal distance
#   d(c, k) = (sum_{g=c..k} m_g - (m_c + m_k)/2)^2: d(0,1) = (3 - 1.5)^2 = 2.25, d(1,2) = (6 - 3)^2 = 9,
#   d(0,2) = (7 - 2.5)^2 = 20.25.
# D_o: item 1 (d(0,2) + d(1,2))/2 = 14.625; item 2 (2 d(2,1) + 2 d(2,2))/4 = 4.5; mean 9.5625.
# Shares: A (1/4, 1/4, 1/2), B (0, 1/3, 2/3).
# D_e = 1/4 (1/3 * 2.25 + 2/3 * 20.25) + 1/4 (2/3 * 9) + 1/2 (1/3 * 9) = 3.5625 + 1.5 + 1.5 = 6.5625.
# kappa_x = 1 - 9.5625/6.5625 = 1 - 51/35 = -16/35.
# alpha_A (ordinal, A's own counts (1, 1, 2)): o_01 = o_10 = 1, o_22 = 2; d(0,1) = 1, d(0,2) = 6.25,
#   d(1,2) = 2.25; alpha_A = 1 - 3 * 2 / (2 (1 + 12.5 + 4.5)) = 5/6. alpha_B: only item 2 is pairable
#   in B (values 1 and 2, one each): alpha_B = 0, so the normalised form is undefined.
# Majorities: item 1 A none (1 of 2 is not more than half), B 2; item 2 A 2, B none (a tie): none in both.
ORDINAL_A = [[1, 1, 0], [0, 0, 2]]
ORDINAL_B = [[0, 0, 1], [0, 1, 1]]


def test_nominal_kappa_x_normalised_and_majority_agreement_by_hand() -> None:
    result = cross_replication(NOMINAL_A, NOMINAL_B, [0.0, 1.0], level="nominal", n_resamples=0)
    assert result.n_items == 3 and (result.n_ratings_a, result.n_ratings_b) == (9, 9)
    assert result.observed_disagreement == pytest.approx(11 / 27)
    assert result.expected_disagreement == pytest.approx(41 / 81)
    assert result.kappa_x.value == pytest.approx(8 / 41)
    assert result.alpha_a.value == pytest.approx(0.2) and result.alpha_b.value == pytest.approx(0.2)
    assert result.normalised.value == pytest.approx(40 / 41)
    assert result.majority.value == pytest.approx(2 / 3)
    assert (result.majority_n_items, result.majority_n_agree, result.majority_excluded) == (3, 2, 0)
    assert result.differing == (2,)
    # No bootstrap asked: no interval, and the statistics say so by their missing bounds only.
    assert result.kappa_x.low is None and result.kappa_x.n_resamples == 0


def test_ordinal_kappa_x_by_hand_and_a_normalised_form_that_is_undefined() -> None:
    result = cross_replication(ORDINAL_A, ORDINAL_B, [0.0, 1.0, 2.0], level="ordinal", n_resamples=0)
    assert result.observed_disagreement == pytest.approx(9.5625)
    assert result.expected_disagreement == pytest.approx(6.5625)
    assert result.kappa_x.value == pytest.approx(-16 / 35)
    assert result.alpha_a.value == pytest.approx(5 / 6)
    assert result.alpha_b.value == pytest.approx(0.0)
    assert result.normalised.value is None
    assert result.normalised.undefined_reason is not None
    assert "alpha of pool B is 0.000, not above 0" in result.normalised.undefined_reason
    assert result.majority.value is None and result.majority.undefined_reason == REASON_NO_MAJORITY
    assert (result.majority_n_items, result.majority_excluded) == (0, 2)


def test_the_distance_scale_does_not_matter_but_the_level_does() -> None:
    """Interval distance on codes 0, 1, 2 is a different metric from the ordinal one: kappa_x differs;
    on the nominal example every level gives 8/41 (two values: every distance is one number)."""
    interval = cross_replication(ORDINAL_A, ORDINAL_B, [0.0, 1.0, 2.0], level="interval", n_resamples=0)
    # d = (c - k)^2: D_o = ((4 + 1)/2 + (2*1 + 0)/4)/2 = 1.5; D_e = 1/4 (1/3 + 4 * 2/3) + 1/4 (2/3)
    # + 1/2 (1/3) = 0.75 + 1/6 + 1/6 = 13/12; kappa_x = 1 - 1.5/(13/12) = -5/13.
    assert interval.kappa_x.value == pytest.approx(-5 / 13)
    for level in ("nominal", "ordinal", "interval"):
        result = cross_replication(NOMINAL_A, NOMINAL_B, [0.0, 1.0], level=level, n_resamples=0)
        assert result.kappa_x.value == pytest.approx(8 / 41)
    scaled = cross_replication(NOMINAL_A, NOMINAL_B, [0.0, 10.0], level="interval", n_resamples=0)
    assert scaled.kappa_x.value == pytest.approx(8 / 41)


def test_majority_is_more_than_half_and_ties_are_left_out() -> None:
    """Values 0, 1, 2. item 1: A (2, 1, 1) has no majority (2 of 4 is not more than half), B (3, 0, 0);
    item 2: A (1, 1, 1) none; item 3: A (0, 2, 1) 1, B (0, 1, 2) 2: differ; item 4: A (0, 0, 3) 2 and
    B (1, 0, 2) 2: agree. Majority agreement 1/2 over 2 items, 2 left out; the differing item is 3."""
    a = [[2, 1, 1], [1, 1, 1], [0, 2, 1], [0, 0, 3]]
    b = [[3, 0, 0], [0, 3, 0], [0, 1, 2], [1, 0, 2]]
    result = cross_replication(a, b, [0.0, 1.0, 2.0], level="nominal", n_resamples=0)
    assert result.majority.value == pytest.approx(0.5)
    assert (result.majority_n_items, result.majority_n_agree, result.majority_excluded) == (2, 1, 2)
    assert result.differing == (2,)


def test_items_one_pool_did_not_rate_are_left_out_and_positions_stay_the_inputs() -> None:
    a = [[0, 0], *NOMINAL_A, [2, 0]]
    b = [[1, 1], *NOMINAL_B, [0, 0]]
    result = cross_replication(a, b, [0.0, 1.0], level="nominal", n_resamples=0)
    assert result.n_items == 3 and result.kappa_x.value == pytest.approx(8 / 41)
    assert result.differing == (3,)


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ([[0, 0]], [[1, 1]], REASON_NO_ITEMS),
        ([[1, 2]], [[0, 3]], REASON_ONE_ITEM),
        ([[3, 0], [2, 0]], [[1, 0], [3, 0]], REASON_NO_EXPECTED),
    ],
)
def test_undefined_cases_say_why(a: list[list[int]], b: list[list[int]], reason: str) -> None:
    result = cross_replication(a, b, [0.0, 1.0], level="nominal", n_resamples=200, seed=1)
    assert result.kappa_x.value is None and result.kappa_x.undefined_reason == reason
    assert result.kappa_x.low is None and result.kappa_x.high is None
    assert result.normalised.value is None
    assert result.normalised.undefined_reason == f"kappa_x is undefined: {reason}"


def test_bootstrap_interval_is_seeded_and_holds_the_point() -> None:
    # Items a stereotype for most raters or for few: both pools agree within and between them.
    rng = np.random.default_rng(5)
    share = np.where(rng.random(60) < 0.5, 0.85, 0.15)
    stereo_a, stereo_b = rng.binomial(3, share), rng.binomial(3, share)
    a = np.stack([3 - stereo_a, stereo_a], axis=1)
    b = np.stack([3 - stereo_b, stereo_b], axis=1)
    first = cross_replication(a, b, [0.0, 1.0], level="nominal", n_resamples=500, seed=3)
    again = cross_replication(a, b, [0.0, 1.0], level="nominal", n_resamples=500, seed=3)
    other = cross_replication(a, b, [0.0, 1.0], level="nominal", n_resamples=500, seed=4)
    assert first == again and first.kappa_x != other.kappa_x
    for estimate in (first.kappa_x, first.normalised, first.majority):
        assert estimate.value is not None and estimate.low is not None and estimate.high is not None
        assert estimate.low <= estimate.value <= estimate.high
        assert estimate.n_resamples + estimate.n_resamples_undefined == 500
    assert first.to_dict()["kappa_x"]["low"] == first.kappa_x.low


def test_counts_equal_the_pairwise_definition_on_random_data() -> None:
    """kappa_x from counts equals 1 - D_o/D_e computed over every pair of individual ratings."""
    rng = np.random.default_rng(0)
    values = [0.0, 1.0, 2.0, 5.0]
    for level in ("nominal", "ordinal", "interval"):
        a = rng.integers(0, 3, size=(25, 4))
        b = rng.integers(0, 3, size=(25, 4))
        a[0] = 0
        result = cross_replication(a, b, values, level=level, n_resamples=0)
        common = [i for i in range(25) if a[i].sum() and b[i].sum()]
        m = (a[common] + b[common]).sum(axis=0)

        def d(c: int, k: int, level: str = level, m: np.ndarray = m) -> float:
            if level == "nominal":
                return float(c != k)
            if level == "interval":
                return (values[c] - values[k]) ** 2
            low, high = min(c, k), max(c, k)
            return float((m[low : high + 1].sum() - (m[c] + m[k]) / 2) ** 2)

        ratings_a = [[c for c in range(4) for _ in range(a[i, c])] for i in common]
        ratings_b = [[c for c in range(4) for _ in range(b[i, c])] for i in common]
        observed = np.mean(
            [
                np.mean([d(x, y) for x, y in itertools.product(ra, rb)])
                for ra, rb in zip(ratings_a, ratings_b, strict=True)
            ]
        )
        pooled_a = [x for ra in ratings_a for x in ra]
        pooled_b = [y for rb in ratings_b for y in rb]
        expected = np.mean([d(x, y) for x, y in itertools.product(pooled_a, pooled_b)])
        assert result.n_items == len(common)
        assert result.kappa_x.value == pytest.approx(1 - observed / expected)


def test_shared_counts_put_two_pools_on_one_item_list_and_domain() -> None:
    counts_a = ValueCounts(counts=np.array([[1, 2], [0, 1]]), domain=np.array([0.0, 2.0]))
    counts_b = ValueCounts(counts=np.array([[3], [1]]), domain=np.array([1.0]))
    items, a, b, domain = shared_counts([10, 30], counts_a, [30, 20], counts_b)
    assert items == [10, 20, 30] and domain.tolist() == [0.0, 1.0, 2.0]
    assert a.tolist() == [[1, 0, 2], [0, 0, 0], [0, 0, 1]]
    assert b.tolist() == [[0, 0, 0], [0, 1, 0], [0, 3, 0]]


def test_malformed_input_is_refused() -> None:
    with pytest.raises(ValueError, match="level"):
        cross_replication(NOMINAL_A, NOMINAL_B, [0.0, 1.0], level="ratio")
    with pytest.raises(ValueError, match="one shape"):
        cross_replication(NOMINAL_A, NOMINAL_B[:2], [0.0, 1.0], level="nominal")
    with pytest.raises(ValueError, match="whole numbers"):
        cross_replication([[0.5, 1]], [[1, 1]], [0.0, 1.0], level="nominal")
    with pytest.raises(ValueError, match="increasing"):
        cross_replication(NOMINAL_A, NOMINAL_B, [1.0, 0.0], level="nominal")
