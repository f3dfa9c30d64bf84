"""The reliability gate (metrics/reliability.py): verdicts on hand-computed alphas, pooled multi counts,
the study headline and the thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.agreement import krippendorff_alpha, krippendorff_alpha_of_counts, value_counts
from metrics.reliability import (
    REASON_NO_RATER,
    REASON_ONE_RATER,
    Thresholds,
    clip,
    headline,
    pooled_counts,
    verdict,
)


@pytest.mark.parametrize(
    ("alpha", "expected"),
    [
        (0.8, "reliable"),
        (0.95, "reliable"),
        (0.7999, "tentative"),
        (0.667, "tentative"),
        (0.6669, "unreliable"),
        (-0.058, "unreliable"),
        (0.026, "unreliable"),
    ],
)
def test_krippendorffs_thresholds(alpha: float, expected: str) -> None:
    gate = verdict(alpha, n_items=20, n_raters=3)
    assert gate.verdict == expected
    assert (gate.reason is None) == (expected == "reliable")
    if expected == "unreliable":
        assert f"alpha {alpha:.3f}" in gate.reason and "0.667" in gate.reason


def test_undefined_with_the_reason() -> None:
    assert verdict(0.9, n_items=20, n_raters=1) == verdict(None, n_items=0, n_raters=1)
    assert verdict(None, n_items=0, n_raters=0).verdict == "undefined"
    assert verdict(0.9, n_items=20, n_raters=1).reason == REASON_ONE_RATER
    assert verdict(None, n_items=0, n_raters=0).reason == REASON_NO_RATER
    one_value = verdict(None, n_items=12, n_raters=3, undefined_reason="every judgement has the same value")
    assert one_value.verdict == "undefined" and one_value.reason == "every judgement has the same value"
    few = verdict(0.9, n_items=4, n_raters=3)
    assert few.verdict == "undefined" and few.reason.startswith("too few items: 4")
    assert verdict(float("nan"), n_items=20, n_raters=3).verdict == "undefined"


def test_a_study_chooses_its_thresholds_and_they_are_stated() -> None:
    strict = Thresholds(reliable_at=0.9, tentative_at=0.8, min_items=5)
    assert verdict(0.85, n_items=5, n_raters=2, thresholds=strict).verdict == "tentative"
    assert verdict(0.85, n_items=5, n_raters=2).verdict == "undefined"  # the default needs 10 items
    assert "0.900" in strict.statement() and "chosen for this study" in strict.statement()
    assert "Krippendorff" in Thresholds().statement() and Thresholds().is_default
    for bad in ({"reliable_at": 0.5, "tentative_at": 0.6}, {"min_items": 0}, {"reliable_at": float("nan")}):
        with pytest.raises(ValueError):
            Thresholds(**bad)


def test_a_random_question_is_unreliable() -> None:
    # Three raters answering at random between two values: alpha near 0.
    rng = np.random.default_rng(7)
    matrix = rng.integers(0, 2, size=(3, 200)).astype(float)
    result = krippendorff_alpha(matrix, level="nominal")
    assert abs(result.value) < 0.1
    assert verdict(result.value, n_items=result.n_items, n_raters=3).verdict == "unreliable"


def test_pooled_counts_of_a_multi_question() -> None:
    # Option a: items 1, 2 judged by two coders: (1, 1) and (0, 1); option b: item 1 (0, 0), item 2 (1, 0).
    a = value_counts(np.array([[1.0, 0.0], [1.0, 1.0]]))
    b = value_counts(np.array([[0.0, 1.0], [0.0, 0.0]]))
    pooled = pooled_counts([a, b])
    assert pooled.domain.tolist() == [0.0, 1.0]
    assert pooled.counts.tolist() == [[0, 2], [1, 1], [2, 0], [1, 1]]
    # The same as alpha of one matrix whose columns are the (item, option) units.
    units = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    expected = krippendorff_alpha(units, level="nominal").value
    # By hand: n = 8, n_0 = n_1 = 4; o_01 = o_10 = 2 (two mixed units, 1/(2-1) each way); D_o = 4/8,
    # D_e = 2*4*4/(8*7) = 32/56; alpha = 1 - (1/2)(56/32) = 1/8.
    assert expected == pytest.approx(1 / 8)
    assert krippendorff_alpha_of_counts(pooled, level="nominal").value == pytest.approx(1 / 8)
    only_ones = value_counts(np.array([[1.0], [1.0]]))
    assert pooled_counts([only_ones]).domain.tolist() == [1.0]
    with pytest.raises(ValueError):
        pooled_counts([value_counts(np.array([[2.0], [3.0]]))])


def test_headline_is_range_median_and_counts_never_a_mean() -> None:
    line = headline([(0.9, "reliable"), (0.7, "tentative"), (-0.058, "unreliable"), (None, "undefined")])
    assert (line.low, line.median, line.high) == (-0.058, 0.7, 0.9)
    assert (line.n_reliable, line.n_tentative, line.n_unreliable, line.n_undefined) == (1, 1, 1, 1)
    assert "median 0.700" in line.text() and "1 reliable" in line.text() and "mean" not in line.text()
    empty = headline([(None, "undefined")])
    assert empty.median is None and empty.reason == "no question has a defined alpha"
    assert clip(1.119, -1.0, 1.0) == 1.0 and clip(None, 0.0, 1.0) is None and clip(-0.0126, 0.0, 1.0) == 0.0
