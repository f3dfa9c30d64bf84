"""ViSAGe metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from metrics.visage import (
    NONE_OF_THE_ABOVE,
    Showing,
    attribute_likelihoods,
    likert_consensus_shares,
    mean_cosine_similarity,
    offensiveness,
    salience,
    stereotype_tendency,
    stereotypical_pull,
    thrice_ratio,
    visual_attributes,
)

NOTA = NONE_OF_THE_ABOVE


def showings(identity: str, attribute: str, k: int, n: int) -> list[Showing]:
    return [Showing(identity, attribute, i < k) for i in range(n)]


SHOWINGS = [
    # X: s1 3/4, s2 0/2, r1 1/4, NOTA 0/4.
    *showings("X", "s1", 3, 4),
    *showings("X", "s2", 0, 2),
    *showings("X", "r1", 1, 4),
    *showings("X", NOTA, 0, 4),
    # Y: s1 1/2, s2 2/2, r1 0/3, NOTA 0/3 -> L(random) = 0.
    *showings("Y", "s1", 1, 2),
    *showings("Y", "s2", 2, 2),
    *showings("Y", "r1", 0, 3),
    *showings("Y", NOTA, 0, 3),
    # Z: a single stereotypical attribute -> not eligible.
    *showings("Z", "s1", 1, 1),
    *showings("Z", NOTA, 1, 1),
]
STEREOTYPES = {("X", "s1"), ("X", "s2"), ("Y", "s1"), ("Y", "s2"), ("Z", "s1"), ("Z", "never_shown")}


def test_likelihood_counts_every_showing_and_ignores_unshown() -> None:
    lk = attribute_likelihoods(
        [
            *SHOWINGS,
            ("X", "s1", False, False),
            {"identity": "X", "attribute": "q", "selected": False, "shown": False},
        ]
    )
    assert (lk[("X", "s1")].k, lk[("X", "s1")].n, lk[("X", "s1")].value) == (3, 4, 0.75)
    assert lk[("X", "q")].value is None and lk[("X", "q")].reason == "never shown"
    with pytest.raises(ValueError):
        attribute_likelihoods([Showing("X", "a", True, False)])


def test_tendency_theta_and_undefined_cases() -> None:
    rows = {t.identity: t for t in stereotype_tendency(attribute_likelihoods(SHOWINGS), STEREOTYPES)}
    x = rows["X"]
    # L(stereo) = (0.75 + 0)/2 = 0.375; L(random) = (r1 0.25 + NOTA 0)/2 = 0.125; theta = 3.
    assert (
        x.l_stereo == pytest.approx(0.375)
        and x.l_random == pytest.approx(0.125)
        and x.theta == pytest.approx(3.0)
    )
    assert (x.n_stereo_attributes, x.n_random_terms, x.n_showings) == (2, 2, 14)
    y = rows["Y"]
    # L(stereo) = (0.5 + 1)/2 = 0.75; L(random) = 0 -> theta undefined, not infinite.
    assert (
        y.l_stereo == pytest.approx(0.75) and y.l_random == 0 and y.theta is None and "0" in (y.reason or "")
    )
    z = rows["Z"]
    # one stereotypical attribute shown ("never_shown" has no showing): not eligible.
    assert not z.eligible and z.theta is None and z.n_stereo_attributes == 1
    # NOTA is a random term even if someone listed it as a stereotype.
    rows2 = {
        t.identity: t
        for t in stereotype_tendency(attribute_likelihoods(SHOWINGS), STEREOTYPES | {("X", NOTA)})
    }
    assert rows2["X"].n_random_terms == 2


def test_thrice_ratio() -> None:
    rows = stereotype_tendency(attribute_likelihoods(SHOWINGS), STEREOTYPES)
    r = thrice_ratio(rows)
    # eligible X, Y: mean L(stereo) = (0.375 + 0.75)/2 = 0.5625; mean L(random) = (0.125 + 0)/2 = 0.0625 -> 9.
    assert r.n == 2 and r.value == pytest.approx(9.0)
    assert thrice_ratio([]).value is None
    only_y = [t for t in rows if t.identity == "Y"]
    assert thrice_ratio(only_y).value is None and thrice_ratio(only_y).reason == "mean L(random) is 0"


def test_offensiveness() -> None:
    lk = attribute_likelihoods(SHOWINGS)
    rows = [t for t in stereotype_tendency(lk, STEREOTYPES)]
    scores = {("X", "s1"): 2.0, ("X", "s2"): 4.0, ("Y", "s1"): 1.0, ("Y", "s2"): 3.0}
    o = {r.identity: r for r in offensiveness(lk, rows, STEREOTYPES, scores)}
    # X: present (L > 0) = s1 only -> O = L(stereo) 0.375 * 2.0 = 0.75 (s2 with L = 0 is not present).
    assert o["X"].value == pytest.approx(0.75) and o["X"].present_attributes == ["s1"]
    # Y: s1, s2 present -> 0.75 * (1 + 3)/2 = 1.5.
    assert o["Y"].value == pytest.approx(1.5)
    # Z: s1 present but has no score -> undefined, counted as missing.
    assert o["Z"].value is None and o["Z"].n_missing_score == 1
    # Threshold 0.6: Y keeps only s2 (L = 1) -> 0.75 * 3 = 2.25.
    o2 = {r.identity: r for r in offensiveness(lk, rows, STEREOTYPES, scores, presence_threshold=0.6)}
    assert o2["Y"].value == pytest.approx(2.25)
    # Missing score for Y/s2: sum and n use s1 only -> 0.75 * 1.0.
    o3 = {
        r.identity: r for r in offensiveness(lk, rows, STEREOTYPES, {("Y", "s1"): 1.0, ("Y", "s2"): math.nan})
    }
    assert o3["Y"].value == pytest.approx(0.75) and o3["Y"].n_missing_score == 1


def test_salience_tf_idf() -> None:
    captions = {"A": ["a man with a sombrero", "a dark room", "Sombrero party"], "B": ["a man"], "C": []}
    rows = {
        (r.identity, r.attribute): r
        for r in salience(captions, [("A", "sombrero"), ("A", "hat"), ("B", "sombrero"), ("C", "hat")])
    }
    # |C| = 4 captions. df(sombrero) = 2 -> idf = ln(5/3) + 1 = 1.510826; df(hat) = 0 -> ln 5 + 1 = 2.609438.
    # tf(A, sombrero) = (2 + 1)/(3 + 1*2) = 0.6 -> S = 0.906495; tf(A, hat) = 1/5 = 0.2 -> S = 0.521888.
    # tf(B, sombrero) = (0 + 1)/(1 + 1) = 0.5 -> S = 0.755413. "a man" does not mention "hat".
    assert rows[("A", "sombrero")].value == pytest.approx(0.906495, abs=1e-6)
    assert rows[("A", "hat")].value == pytest.approx(0.521888, abs=1e-6)
    assert rows[("B", "sombrero")].value == pytest.approx(0.755413, abs=1e-6)
    assert rows[("C", "hat")].value is None and rows[("C", "hat")].reason
    # whole-word match: "dark" is not found inside "darker".
    assert salience({"A": ["darker skies"]}, [("A", "dark")])[0].count == 0


def test_stereotypical_pull() -> None:
    # d = (1,0); s = (1,0), (0,1); ns = (0,2). Sim(d,s) = (1 + 0)/2 = 0.5; Sim(d,ns) = 0;
    # Sim(s,ns) = (0 + 1)/2 = 0.5; mean = 1/3.
    p = stereotypical_pull([[1, 0]], [[1, 0], [0, 1]], [[0, 2]])
    assert (p.sim_d_s, p.sim_d_ns, p.sim_s_ns) == pytest.approx((0.5, 0.0, 0.5))
    assert p.mean == pytest.approx(1 / 3) and (p.n_d, p.n_s, p.n_ns) == (1, 2, 1)
    empty = stereotypical_pull([[1, 0]], [], [[0, 1]])
    assert empty.sim_d_s is None and empty.mean is None and empty.reason and empty.n_s == 0
    assert mean_cosine_similarity([[0, 0]], [[1, 0]]) is None


def test_likert_consensus_and_visual_list() -> None:
    rows = [[5, 5, 4], [4, 4, 4], [5, 4, 3], [2, 2, 1]]
    shares = {s.label: s for s in likert_consensus_shares(rows, [5, 4, 3, 2, 1])}
    # 5: row 1 only -> 1/4; 4: row 2 -> 1/4; 3: none; 2: row 4 -> 1/4; 1: none.
    assert [shares[k].count for k in (5, 4, 3, 2, 1)] == [1, 1, 0, 1, 0]
    assert shares[5].share == 0.25 and shares[3].share == 0.0
    assert likert_consensus_shares([], [5])[0].share is None
    ratings: list[tuple[str, list[int | None]]] = [
        ("hat", [5, 4, 4]),
        ("kind", [5, 5, 3]),
        ("hat", [4, 4, 4]),
        ("none", []),
        ("x", [5, None, 5]),
    ]
    assert visual_attributes(ratings, {4, 5}) == ["hat"]
