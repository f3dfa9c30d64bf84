"""Holm and Benjamini-Hochberg adjusted p-values by hand (metrics/multiple_testing.py)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import false_discovery_control

from metrics.multiple_testing import adjust, benjamini_hochberg, correction_parse, family_size, holm


def test_holm_by_hand() -> None:
    # Sorted: 0.005, 0.01, 0.03, 0.04 (m = 4) -> 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06,
    # 1 x 0.04 = 0.04, then the running maximum: 0.02, 0.03, 0.06, 0.06; back in the input's order:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_benjamini_hochberg_by_hand() -> None:
    # Sorted: 0.005, 0.01, 0.03, 0.04 -> m p / j = 0.02, 0.02, 0.04, 0.04; the running minimum from the top
    # changes nothing: back in the input's order:
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_bh_agrees_with_scipy() -> None:
    ps = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    assert adjust(ps, "bh") == pytest.approx(list(false_discovery_control(ps, method="bh")))


def test_monotone_and_capped_at_one() -> None:
    # Holm: 2 x 0.5 = 1.0, then max(1.0, 0.6) = 1.0. BH: 0.6 x 2 / 2 = 0.6 at the top, then min(0.6, 1.0).
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert benjamini_hochberg([0.5, 0.6]) == pytest.approx([0.6, 0.6])
    # BH step-up: sorted 0.03, 0.04, 0.2 -> m p / j = 0.09, 0.06, 0.2; 0.06 pulls 0.09 down to 0.06.
    assert benjamini_hochberg([0.04, 0.03, 0.2]) == pytest.approx([0.06, 0.06, 0.2])
    assert holm([0.7, 0.9, 0.95]) == [1.0, 1.0, 1.0]


def test_none_is_skipped_and_kept_and_not_counted() -> None:
    # m = 2: Holm 2 x 0.01 = 0.02, max(0.02, 0.04) = 0.04.
    assert holm([None, 0.04, float("nan"), 0.01]) == [None, pytest.approx(0.04), None, pytest.approx(0.02)]
    assert benjamini_hochberg([None, 0.04, 0.01]) == [None, pytest.approx(0.04), pytest.approx(0.02)]
    assert family_size([None, 0.04, math.nan, 0.01]) == 2
    assert holm([]) == [] and holm([None]) == [None]


def test_ties_get_one_value_and_a_single_test_is_unchanged() -> None:
    assert holm([0.01, 0.01]) == [0.02, 0.02]
    assert benjamini_hochberg([0.01, 0.01]) == [0.01, 0.01]
    assert holm([0.03]) == [0.03] and benjamini_hochberg([0.03]) == [0.03]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="holm, bh"):
        adjust([0.1], "bonferroni")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])
    assert correction_parse(None) == "holm" and correction_parse(" BH ") == "bh"
    with pytest.raises(ValueError, match="holm, bh"):
        correction_parse("fdr")
