from __future__ import annotations

import json

import krippendorff
import numpy as np
import numpy.typing as npt
import pytest

from metrics.agreement import (
    LEVELS,
    REASON_EMPTY,
    REASON_NO_EXPECTED,
    REASON_NO_PAIRS,
    REASON_ONE_VALUE,
    AlphaResult,
    Level,
    alpha_from_weighted_counts,
    alpha_with_bootstrap,
    krippendorff_alpha,
    percent_agreement,
    value_counts,
)

nan = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section E: 4 observers x 12 units
# with missing values. Published: nominal .743, ordinal .815, interval .849, ratio .797.
PAPER_4X12 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)

# Same paper, section A: binary data, two observers, no missing data. Published alpha = .095.
PAPER_BINARY = np.array(
    [
        [0, 1, 0, 0, 0, 0, 0, 0, 1, 0],
        [1, 1, 1, 0, 0, 1, 0, 0, 0, 0],
    ]
)


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_published_4x12_example_at_every_level(level: Level, published: float) -> None:
    result = krippendorff_alpha(PAPER_4X12, level=level)
    assert result.value == pytest.approx(published, abs=5e-4)
    # Unit 12 has one value only, so 11 pairable units; they hold 3+4+4+4+4+4+4+4+4+3+2 = 40 values.
    assert (result.n_items, result.n_judgements) == (11, 40)
    assert result.undefined_reason is None


def test_published_4x12_nominal_by_hand() -> None:
    # Pairable values per value: n_1 = 9, n_2 = 13, n_3 = 10, n_4 = 5, n_5 = 3, n = 40,
    # sum n_c^2 = 81 + 169 + 100 + 25 + 9 = 384.
    # Off-diagonal coincidences: unit 2 (2,2,3,2) gives 3 ordered (2,3) pairs each way / (4-1) = 2;
    # unit 6 (1,2,3,4) gives 12 ordered pairs / 3 = 4; unit 8 (1,1,2,1) gives 6 / 3 = 2; total 8.
    # alpha = 1 - (n - 1) * 8 / (n^2 - sum n_c^2) = 1 - 39 * 8 / (1600 - 384) = 1 - 312/1216.
    result = krippendorff_alpha(PAPER_4X12, level="nominal")
    assert result.value == pytest.approx(1 - 312 / 1216)


def test_published_binary_example() -> None:
    # Units: 5 x (0,0), 1 x (1,1), 4 x mixed. Coincidences o_00 = 10, o_11 = 2, o_01 = o_10 = 4;
    # n_0 = 14, n_1 = 6, n = 20. alpha = 1 - (n - 1) o_01 / (n_0 n_1) = 1 - 19 * 4 / 84 = 0.0952.
    result = krippendorff_alpha(PAPER_BINARY, level="nominal")
    assert result.value == pytest.approx(1 - 76 / 84)
    assert round(result.value, 3) == 0.095
    assert (result.n_items, result.n_judgements) == (10, 20)


def test_small_matrix_by_hand() -> None:
    # Units (1,1), (1,2), (2,2): o_11 = 2, o_22 = 2, o_12 = o_21 = 1; n_1 = n_2 = 3, n = 6.
    # alpha = 1 - 5 * 2 / (36 - 18) = 4/9; with two values interval distances equal nominal ones.
    matrix = [[1, 1, 2], [1, 2, 2]]
    assert krippendorff_alpha(matrix, level="nominal").value == pytest.approx(4 / 9)
    assert krippendorff_alpha(matrix, level="interval").value == pytest.approx(4 / 9)


def test_perfect_agreement_is_one() -> None:
    # D_o = 0 and D_e > 0, so alpha = 1 at every level.
    matrix: list[list[float]] = [[1, 2, 3, nan], [1, 2, 3, 3]]
    for level in LEVELS:
        assert krippendorff_alpha(matrix, level=level).value == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("matrix", "reason", "n_items", "n_judgements"),
    [
        (np.zeros((0, 0)), REASON_EMPTY, 0, 0),
        (np.zeros((3, 0)), REASON_EMPTY, 0, 0),
        (np.full((3, 4), nan), REASON_NO_PAIRS, 0, 0),
        ([[1, 2, 3, 4]], REASON_NO_PAIRS, 0, 0),  # one annotator
        ([[1, nan], [nan, 2]], REASON_NO_PAIRS, 0, 0),  # never two on one item
        ([[3, 3, 3], [3, 3, nan]], REASON_ONE_VALUE, 2, 4),  # all the same value
        ([[1], [1]], REASON_ONE_VALUE, 1, 2),  # a single item
        # The 2 is on an unpairable item, so the pairable values are all 1.
        ([[1, 1, 2], [1, 1, nan]], REASON_ONE_VALUE, 2, 4),
    ],
)
def test_undefined_cases_report_a_reason(
    matrix: npt.ArrayLike, reason: str, n_items: int, n_judgements: int
) -> None:
    for level in LEVELS:
        result = krippendorff_alpha(matrix, level=level)
        assert result.value is None
        assert result.undefined_reason == reason
        assert (result.n_items, result.n_judgements) == (n_items, n_judgements)
        boot = alpha_with_bootstrap(matrix, level=level, n_resamples=50)
        assert boot.value is None and boot.ci_low is None and boot.n_resamples == 0


def test_ratio_with_zero_expected_disagreement() -> None:
    # Ratio distance ((c - k)/(c + k))^2 is 0 for c = -1, k = 1 (krippendorff's convention for c + k = 0).
    result = krippendorff_alpha([[-1, 1], [1, -1]], level="ratio")
    assert result.value is None and result.undefined_reason == REASON_NO_EXPECTED


def test_malformed_input_raises() -> None:
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha([1, 2, 3], level="nominal")
    with pytest.raises(ValueError, match="finite"):
        krippendorff_alpha([[1.0, np.inf], [1.0, 2.0]], level="nominal")
    with pytest.raises(ValueError, match="unknown level"):
        krippendorff_alpha([[1, 2], [1, 2]], level="cardinal")  # type: ignore[arg-type]  # on purpose


def test_value_counts_by_hand() -> None:
    vc = value_counts([[1.0, 2.0, nan], [1.0, 3.0, 3.0]])
    assert vc.domain.tolist() == [1, 2, 3]
    # item 0: two 1s; item 1: one 2, one 3; item 2: one 3.
    assert vc.counts.tolist() == [[2, 0, 0], [0, 1, 1], [0, 0, 1]]


def _random_matrix(
    rng: np.random.Generator, coders: int, items: int, values: int, missing: float
) -> np.ndarray:
    matrix = rng.integers(1, values + 1, size=(coders, items)).astype(float)
    matrix[rng.random(matrix.shape) < missing] = nan
    return matrix


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_coincidence_route_equals_krippendorff_package(level: Level, seed: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = _random_matrix(
        rng, coders=int(rng.integers(2, 6)), items=40, values=int(rng.integers(2, 7)), missing=0.3
    )
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    vc = value_counts(matrix)
    pairable = vc.counts[vc.counts.sum(axis=1) >= 2]
    # Weight 1 per item, and the same through deduplicated patterns with their frequencies.
    ones = alpha_from_weighted_counts(pairable, vc.domain, np.ones((1, len(pairable))), level=level)
    patterns, frequency = np.unique(pairable, axis=0, return_counts=True)
    pooled = alpha_from_weighted_counts(patterns, vc.domain, frequency[None, :], level=level)
    assert ones[0] == pytest.approx(expected, abs=1e-10)
    assert pooled[0] == pytest.approx(expected, abs=1e-10)
    assert krippendorff_alpha(matrix, level=level).value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("level", LEVELS)
def test_weights_equal_duplicated_items(level: Level) -> None:
    # A bootstrap weight of w on an item must give the alpha of the data with that column repeated w times.
    rng = np.random.default_rng(7)
    matrix = _random_matrix(rng, coders=3, items=12, values=4, missing=0.0)
    vc = value_counts(matrix)
    weights = rng.integers(0, 4, size=12)
    weights[:3] = 1  # keep several values present
    resampled = matrix[:, np.repeat(np.arange(12), weights)]
    expected = krippendorff.alpha(
        reliability_data=resampled, value_domain=vc.domain, level_of_measurement=level
    )
    got = alpha_from_weighted_counts(vc.counts, vc.domain, weights[None, :], level=level)
    assert got[0] == pytest.approx(expected, abs=1e-10)


def test_weighted_counts_mark_single_value_weightings_undefined() -> None:
    counts = np.array([[2, 0], [0, 2]])
    # Weighting 1 keeps only the first pattern: one value, D_e = 0 -> nan. Weighting 2 keeps both -> 1.0.
    got = alpha_from_weighted_counts(
        counts, np.array([1.0, 2.0]), np.array([[3, 0], [1, 1]]), level="nominal"
    )
    assert np.isnan(got[0]) and got[1] == pytest.approx(1.0)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    a = alpha_with_bootstrap(PAPER_4X12, level="ordinal", n_resamples=300, seed=5)
    b = alpha_with_bootstrap(PAPER_4X12, level="ordinal", n_resamples=300, seed=5)
    c = alpha_with_bootstrap(PAPER_4X12, level="ordinal", n_resamples=300, seed=6)
    assert a == b
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.value == pytest.approx(0.815, abs=5e-4)
    assert a.ci_low is not None and a.ci_high is not None
    assert a.ci_low < a.value <= a.ci_high <= 1.0
    assert a.n_resamples + a.n_resamples_undefined == 300
    assert a.confidence == 0.95
    json.dumps(a.to_dict())


def test_bootstrap_drops_and_counts_undefined_resamples() -> None:
    # Two items, (1,1) and (2,2): alpha = 1. A resample of two items draws the same item twice with
    # probability 2 * (1/2)^2 = 1/2, and then every value is equal -> undefined, dropped.
    result = alpha_with_bootstrap([[1, 2], [1, 2]], level="nominal", n_resamples=1000, seed=0)
    assert result.value == pytest.approx(1.0)
    assert result.n_resamples + result.n_resamples_undefined == 1000
    assert 420 <= result.n_resamples_undefined <= 580
    assert result.ci_low == pytest.approx(1.0) and result.ci_high == pytest.approx(1.0)


def test_bootstrap_interval_narrows_with_more_items() -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 4, 2000)
    noisy = np.where(rng.random((3, 2000)) < 0.8, truth, rng.integers(1, 4, (3, 2000))).astype(float)
    small = alpha_with_bootstrap(noisy[:, :100], level="nominal", n_resamples=200)
    large = alpha_with_bootstrap(noisy, level="nominal", n_resamples=200)
    assert small.ci_low is not None and small.ci_high is not None
    assert large.ci_low is not None and large.ci_high is not None
    assert large.ci_low <= large.value <= large.ci_high
    assert (large.ci_high - large.ci_low) < (small.ci_high - small.ci_low)


def test_bootstrap_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        alpha_with_bootstrap(PAPER_4X12, level="nominal", n_resamples=0)
    with pytest.raises(ValueError):
        alpha_with_bootstrap(PAPER_4X12, level="nominal", confidence=1.0)


def test_percent_agreement_by_hand() -> None:
    # Two coders agree on items 0 and 2, not 1: 2/3; three pairs of values.
    result = percent_agreement([[1, 1, 2], [1, 2, 2]])
    assert result.value == pytest.approx(2 / 3)
    assert (result.n_items, result.n_pairs) == (3, 3)
    # Three coders on item (1, 1, 2): 1 agreeing pair of 3 -> 1/3; item (2, 2, nan): 1/1; mean 2/3.
    result = percent_agreement([[1.0, 2.0], [1.0, 2.0], [2.0, nan]])
    assert result.value == pytest.approx((1 / 3 + 1) / 2)
    assert (result.n_items, result.n_pairs) == (2, 4)


def test_percent_agreement_on_paper_example() -> None:
    # Per-unit shares: units 2 (2,2,3,2) and 8 (1,1,2,1) have 3 of 6 pairs agreeing, unit 6 none,
    # the other 8 pairable units all: (8 + 0.5 + 0.5 + 0) / 11.
    assert percent_agreement(PAPER_4X12).value == pytest.approx(9 / 11)


def test_percent_agreement_undefined() -> None:
    result = percent_agreement([[1, nan], [nan, 1]])
    assert result.value is None and result.undefined_reason == REASON_NO_PAIRS
    assert percent_agreement(np.zeros((2, 0))).value is None


def test_alpha_result_is_json_serialisable() -> None:
    result = krippendorff_alpha([[1.0, 2.0], [1.0, nan]], level="nominal")
    assert isinstance(result, AlphaResult)
    assert json.loads(json.dumps(result.to_dict()))["undefined_reason"] == REASON_ONE_VALUE
