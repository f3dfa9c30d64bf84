"""SODA metrics against hand-computed values (natural-log JS distance, base-2 JS divergence, VAC)."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from metrics.soda import (
    SodaImage,
    bds,
    bds_permutation_test,
    cds,
    concentrated_cases,
    concentration,
    distributions,
    js_between,
    shift_table,
    soda_report,
    vac,
    vac_thresholded_mean,
)

# JS between P = (1/2, 1/2) and Q = (1, 0): M = (3/4, 1/4);
# KL(P||M) = 1/2 ln(2/3) + 1/2 ln 2 = 0.143841; KL(Q||M) = ln(4/3) = 0.287682;
# JSD = (0.143841 + 0.287682)/2 = 0.215762 nats -> distance sqrt = 0.464502; in bits 0.215762/ln 2 = 0.311278.
JS_HALF_VS_ONE_NATS_DIST = 0.464502
JS_HALF_VS_ONE_BITS_DIV = 0.311278


def test_js_between_hand_values() -> None:
    assert js_between(["a", "b"], ["a", "a"]) == pytest.approx(JS_HALF_VS_ONE_NATS_DIST, abs=1e-6)
    assert js_between(["a", "b"], ["a", "a"], "base2-divergence") == pytest.approx(
        JS_HALF_VS_ONE_BITS_DIV, abs=1e-6
    )
    # Disjoint supports: the 1e-10 floor keeps it finite; distance -> sqrt(ln 2) = 0.832555, divergence -> 1.
    assert js_between(["a"], ["b"]) == pytest.approx(math.sqrt(math.log(2)), abs=1e-6)
    assert js_between(["a"], ["b"], "base2-divergence") == pytest.approx(1.0, abs=1e-6)
    assert js_between(["a", "b"], ["b", "a"]) == pytest.approx(0.0, abs=1e-9)
    assert js_between([], ["a"]) is None


def test_bds_mean_over_attributes_and_missing_cases() -> None:
    base = [{"color": "red", "shape": "a"}, {"color": "blue", "shape": "a"}]
    group = [{"color": "red", "shape": "a"}, {"color": "red", "shape": "a", "only_group": None}]
    r = bds(base, group)
    # color: (1/2, 1/2) vs (1, 0) -> 0.464502; shape identical -> 0; mean = 0.232251.
    assert r.value == pytest.approx(JS_HALF_VS_ONE_NATS_DIST / 2, abs=1e-6)
    assert r.n_attributes == 2 and r.n_left == 2 and r.n_right == 2
    # An attribute seen only in the base (never in the group) is left out, not counted as 0.
    r2 = bds([*base, {"texture": "matte"}], group)
    assert r2.n_attributes == 2
    # A group without images (or without any value) is missing, never 0.
    assert bds(base, []).value is None and bds(base, []).reason
    assert bds(base, [{"color": None}]).value is None


def test_cds_mean_over_group_pairs() -> None:
    groups = {
        "men": [{"color": "red", "shape": "x"}],
        "women": [{"color": "blue", "shape": "x"}],
        "white": [{"color": "red", "shape": "x"}],
    }
    # color pairs: men-women 1, men-white 0, women-white 1 -> 2/3; shape all 0 -> CDS = (2/3 + 0)/2 = 1/3.
    r = cds(groups)
    assert r.per_attribute["color"] == pytest.approx(2 / 3, abs=1e-6)
    assert r.value == pytest.approx(1 / 3, abs=1e-6)
    assert r.n_pairs == {"color": 3, "shape": 3}
    assert cds({"men": groups["men"]}).value is None  # one group: no pair
    assert cds({"a": [], "b": []}).value is None


def test_vac_observed_and_option_k() -> None:
    # (a, a, b, b): H = ln 2 = log k -> 0. (a, a, a, b): H = -(.75 ln .75 + .25 ln .25) = 0.562335,
    # / ln 2 = 0.811278 -> 0.188722; with k = 3 options: 1 - 0.562335/1.098612 = 1 - 0.511860 = 0.488140.
    assert concentration(["a", "a", "b", "b"]) == pytest.approx(0.0, abs=1e-12)
    assert concentration(["a", "a", "a", "b"]) == pytest.approx(0.188722, abs=1e-6)
    assert concentration(["a", "a", "a", "b"], k=3) == pytest.approx(0.488140, abs=1e-6)
    assert concentration(["a"] * 20) == 1.0  # one observed value
    assert concentration([]) is None
    with pytest.raises(ValueError):
        concentration(["a", "b", "c"], k=2)
    images = [{"c": "a", "s": "x"}, {"c": "a", "s": "x"}, {"c": "a", "s": None}, {"c": "b", "s": "x"}]
    r = vac(images)
    # c: 0.188722; s: one value -> 1.0; mean = 0.594361.
    assert r.value == pytest.approx((0.188722 + 1.0) / 2, abs=1e-6)
    assert r.n_images == {"c": 4, "s": 3}
    r3 = vac(images, k_mode="options", options={"c": ["a", "b", "c"], "s": ["x", "y"]})
    # c with k=3: 0.488140; s: H = 0 -> 1.0; mean 0.744070.
    assert r3.value == pytest.approx((0.488140 + 1.0) / 2, abs=1e-6)
    assert vac([]).value is None


def test_vac_thresholded_mean_is_labelled_and_drops_small_scores() -> None:
    r = vac_thresholded_mean([0.0, 0.04, 0.5, 1.0])
    assert r.value == pytest.approx(0.75) and r.n_scores_used == 2 and r.n_scores == 4  # (0.5 + 1.0)/2
    assert "0.05" in r.label
    assert vac_thresholded_mean([0.01]).value is None


def test_permutation_identical_sides_gives_p_one() -> None:
    same = [{"c": "r"}] * 5
    r = bds_permutation_test(same, same, n_permutations=200, seed=1)
    # Every permuted BDS is 0 >= observed 0: p = (1 + 200)/(1 + 200) = 1.
    assert r.observed == pytest.approx(0.0, abs=1e-9) and r.p_value == 1.0 and r.n_at_least_observed == 200


def test_permutation_perfect_separation_matches_exact_and_naive_loop() -> None:
    base = [{"c": "r", "s": "x"}] * 5
    group = [{"c": "b", "s": "x"}] * 5
    r = bds_permutation_test(base, group, n_permutations=1000, seed=7)
    # Only the 2 perfectly separated splits of C(10,5) = 252 reach the observed BDS:
    # expected count 1000*2/252 = 7.9.
    assert 1 / 1001 <= r.p_value <= 26 / 1001
    assert r.observed == pytest.approx(math.sqrt(math.log(2)) / 2, abs=1e-6)  # c: 0.832555, s: 0 -> mean
    # Exact enumeration of all splits (no sampling): 2/252 of them reach it.
    pooled = base + group
    reach = sum(
        bds([pooled[i] for i in idx], [pooled[i] for i in range(10) if i not in idx]).value
        >= r.observed - 1e-12
        for idx in combinations(range(10), 5)
    )
    assert reach == 2
    # The vectorised count equals a plain loop over the same permutations.
    rng = np.random.default_rng(7)
    order = np.argsort(rng.random((1000, 10)), axis=1)
    naive = 0
    for row in order:
        left = [pooled[i] for i in row[:5]]
        right = [pooled[i] for i in row[5:]]
        naive += bds(left, right).value >= r.observed - 1e-12
    assert naive == r.n_at_least_observed
    # Seeded: the same seed gives the same p.
    assert bds_permutation_test(base, group, 1000, seed=7).p_value == r.p_value


def test_permutation_missing_group() -> None:
    r = bds_permutation_test([{"c": "r"}], [], n_permutations=10)
    assert r.p_value is None and r.reason


def test_shift_table_and_concentrated_cases() -> None:
    rows = shift_table([{"c": "r"}, {"c": "r"}, {"c": "b"}], [{"c": "b"}, {"c": "b"}, {"c": "b"}])
    assert len(rows) == 1
    row = rows[0]
    assert (row.base_value, row.base_share, row.group_value, row.group_share, row.changed) == (
        "r",
        2 / 3,
        "b",
        1.0,
        True,
    )
    tie = shift_table([{"c": "r"}, {"c": "b"}], [])[0]
    assert tie.base_value == "b" and tie.base_tied and tie.group_value is None and tie.changed is None
    images = [
        SodaImage("m", "car", "gender:women", {"c": "red", "s": "x"}),
        SodaImage("m", "car", "gender:women", {"c": "red", "s": "y"}),
        SodaImage("m", "car", "base", {"c": "red", "s": "x"}),
    ]
    cases = concentrated_cases(images)
    assert [(c.condition, c.attribute, c.value, c.n) for c in cases] == [("gender:women", "c", "red", 2)]
    d = {(x.condition, x.attribute): (x.counts, x.n) for x in distributions(images)}
    assert d[("gender:women", "s")] == ({"x": 1, "y": 1}, 2)


def test_soda_report_end_to_end_and_group_without_base() -> None:
    images = (
        [SodaImage("m", "cup", "base", {"c": "white"})] * 4
        + [SodaImage("m", "cup", "age:elderly", {"c": "beige"})] * 4
        + [SodaImage("m2", "cup", "age:elderly", {"c": "beige"})]
    )
    reports = {r.model: r for r in soda_report(images, n_permutations=100, seed=0)}
    m = reports["m"]
    assert m.n_images == {"age:elderly": 4, "base": 4}
    assert m.bds["age:elderly"].value == pytest.approx(math.sqrt(math.log(2)), abs=1e-6)
    # 2 of C(8,4) = 70 splits reach it; p must be small but >= 1/101.
    assert 1 / 101 <= m.permutation["age:elderly"].p_value < 0.2
    assert m.vac["base"].value == 1.0 and m.shifts["age:elderly"][0].changed is True
    assert m.vac_thresholded is not None and m.vac_thresholded.value == 1.0
    assert (
        reports["m2"].bds["age:elderly"].value is None
        and reports["m2"].bds["age:elderly"].reason == "no base images"
    )
