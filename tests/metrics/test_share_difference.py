"""The interval of a difference of two shares: Newcombe's published example and the edge cases."""

from __future__ import annotations

import math
from typing import Any

import pytest

from metrics.share_difference import share_difference


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_newcombes_own_example() -> None:
    # Newcombe (1998), Table II, example (a): 56/70 - 48/80 = 0.2000, method 10: 0.0524 to 0.3339.
    found = share_difference(48, 80, 56, 70)
    assert found.difference == pytest.approx(0.2)
    assert (round(found.low, 4), round(found.high, 4)) == (0.0524, 0.3339)


def test_it_is_the_wilson_intervals_combined_by_hand() -> None:
    k_a, n_a, k_b, n_b = 3, 12, 9, 15  # 0.25 vs 0.6
    l_a, u_a = _wilson(k_a, n_a)
    l_b, u_b = _wilson(k_b, n_b)
    p_a, p_b = k_a / n_a, k_b / n_b
    d = p_b - p_a
    found = share_difference(k_a, n_a, k_b, n_b)
    assert found.difference == pytest.approx(0.35)
    assert found.low == pytest.approx(d - math.sqrt((p_b - l_b) ** 2 + (u_a - p_a) ** 2))
    assert found.high == pytest.approx(d + math.sqrt((u_b - p_b) ** 2 + (p_a - l_a) ** 2))


def test_shares_of_zero_and_one_stay_inside_the_range() -> None:
    both_zero = share_difference(0, 10, 0, 20)
    assert both_zero.difference == 0.0 and both_zero.low < 0 < both_zero.high  # not a 0-width interval
    extreme = share_difference(0, 20, 10, 10)
    assert extreme.difference == 1.0 and -1.0 <= extreme.low < 1.0 and extreme.high == 1.0


@pytest.mark.parametrize(
    "counts", [(0, 0, 1, 2), (3, 2, 1, 2), (-1, 4, 1, 2), (0.5, 1, 0, 1), (True, 1, 0, 1), (None, 4, 1, 2)]
)
def test_no_items_or_an_impossible_count_is_undefined(counts: tuple[Any, Any, Any, Any]) -> None:
    with pytest.raises(ValueError):
        share_difference(*counts)
