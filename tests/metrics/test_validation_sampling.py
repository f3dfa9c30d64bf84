from __future__ import annotations

import json
import math
from typing import cast

import pytest

from metrics.validation_sampling import (
    allocate_proportional,
    sample_size_for_width,
    stratified_sample,
    wilson_interval,
    wilson_width,
)

Z95 = 1.959963984540054


def test_wilson_width_by_hand() -> None:
    # p = 0.9, N = 100, z = 1.96: denominator 1 + z^2/100 = 1.038415;
    # half = z / 1.038415 * sqrt(0.09/100 + z^2/40000) = 1.887481 * sqrt(0.0009 + 0.00009604) = 0.059568;
    # width = 0.119137.
    denominator = 1 + Z95**2 / 100
    half = Z95 / denominator * math.sqrt(0.9 * 0.1 / 100 + Z95**2 / (4 * 100**2))
    assert wilson_width(100, expected_accuracy=0.9) == pytest.approx(2 * half)
    assert wilson_width(100, expected_accuracy=0.9) == pytest.approx(0.11914, abs=1e-5)


def test_wilson_interval_by_hand() -> None:
    # 90 of 100: centre = (0.9 + z^2/200) / 1.038415 = 0.918807 / 1.038415 = 0.884819; +- 0.059568.
    low, high = wilson_interval(90, 100)
    assert low == pytest.approx(0.825634, abs=1e-6)
    assert high == pytest.approx(0.944771, abs=1e-6)
    # p = 1 keeps a width: N = 10 -> low = 10 / (10 + z^2) = 0.722460, high = 1.
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(10 / (10 + Z95**2)) and high == pytest.approx(1.0)
    with pytest.raises(ValueError):
        wilson_interval(1, 0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_width_at_perfect_accuracy_is_not_zero() -> None:
    # p = 1: half = z/(1 + z^2/N) * z/(2N) = z^2 / (2 (N + z^2)); width = z^2 / (N + z^2).
    assert wilson_width(50, expected_accuracy=1.0) == pytest.approx(Z95**2 / (50 + Z95**2))


def test_sample_size_for_width_is_smallest() -> None:
    n = sample_size_for_width(0.1, expected_accuracy=0.9)
    assert wilson_width(n, expected_accuracy=0.9) <= 0.1 < wilson_width(n - 1, expected_accuracy=0.9)
    # Normal approximation check: 4 z^2 p(1-p) / w^2 = 4 * 3.8415 * 0.09 / 0.01 = 138.3; Wilson needs 141.
    assert n == 141
    assert sample_size_for_width(1.0, expected_accuracy=0.5) == 1
    # Wider confidence needs more items.
    assert sample_size_for_width(0.1, expected_accuracy=0.9, confidence=0.99) > n
    with pytest.raises(ValueError):
        sample_size_for_width(0.0, expected_accuracy=0.9)
    with pytest.raises(ValueError):
        sample_size_for_width(0.1, expected_accuracy=1.5)


def test_allocation_largest_remainder() -> None:
    # quotas 7 * (5, 3, 2) / 10 = 3.5, 2.1, 1.4 -> floors 3, 2, 1, leftover 1 to a (remainder .5).
    assert allocate_proportional({"a": 5, "b": 3, "c": 2}, 7) == {"a": 4, "b": 2, "c": 1}
    # quotas 10 * (90, 9, 1) / 100 = 9, 0.9, 0.1 -> 9, 1, 0; c needs one: a (2+ and most over quota) gives.
    assert allocate_proportional({"a": 90, "b": 9, "c": 1}, 10) == {"a": 8, "b": 1, "c": 1}
    # Fewer units than strata: no minimum; quotas 2 * (6, 3, 1)/10 = 1.2, .6, .2 -> 1, 0, 0 + 1 to b.
    assert allocate_proportional({"a": 6, "b": 3, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}
    assert allocate_proportional({"a": 3, "empty": 0}, 3) == {"a": 3, "empty": 0}
    assert allocate_proportional({}, 0) == {}
    with pytest.raises(ValueError):
        allocate_proportional({"a": 2}, 3)


def test_stratified_sample_is_seeded_and_proportional() -> None:
    items = [(i, "initial" if i < 30 else "refined") for i in range(40)]
    sample = stratified_sample(items, fraction=0.1, seed=1)
    # 10% of 40 = 4: quotas 3 and 1.
    assert sample.allocation == {"initial": 3, "refined": 1}
    assert sample.population == {"initial": 30, "refined": 10}
    assert len(sample.ids) == 4 and len(set(sample.ids)) == 4
    assert sum(1 for i in sample.ids if cast(int, i) < 30) == 3
    # Same seed, shuffled input: same sample.
    assert stratified_sample(list(reversed(items)), fraction=0.1, seed=1) == sample
    assert stratified_sample(items, size=4, seed=1).ids == sample.ids
    others = {tuple(stratified_sample(items, size=4, seed=s).ids) for s in range(10)}
    assert len(others) > 1
    json.dumps(sample.to_dict())


def test_stratified_sample_edge_cases() -> None:
    items = [("a1", "x"), ("a2", "x"), ("b1", "y")]
    assert stratified_sample(items, size=3).ids == ["a1", "a2", "b1"]
    assert stratified_sample(items, size=0).ids == []
    assert stratified_sample([], fraction=0.5).ids == []
    with pytest.raises(ValueError):
        stratified_sample(items, size=4)
    with pytest.raises(ValueError):
        stratified_sample(items)
    with pytest.raises(ValueError):
        stratified_sample([("a", "x"), ("a", "y")], size=1)
