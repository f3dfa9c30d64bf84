"""SSI against hand-computed values."""

from __future__ import annotations

import pytest

from metrics.ssi import SsiRecord, rubric_prevalence, set_ssi, ssi_cells, ssi_comparisons


def rec(query: str, model: str, condition: str, xs: list[int], category: str = "geo") -> SsiRecord:
    return SsiRecord(query, category, model, condition, {f"i{j}": x for j, x in enumerate(xs)})


RECORDS = [
    rec("q1", "M1", "initial", [1, 1, 0, 0]),
    rec("q1", "M1", "refined", [1, 0, 0, 0]),  # .5 -> .25
    rec("q2", "M1", "initial", [1, 1, 1, 0]),
    rec("q2", "M1", "refined", [0, 0, 0, 0]),  # .75 -> 0
    rec("q3", "M1", "initial", [1, 0, 0, 0]),
    rec("q3", "M1", "refined", [0, 0, 0, 0]),  # .25 -> 0
    rec("q1", "M2", "initial", [0, 0, 0, 0]),  # no refined set: counts in the mean, not in the t-test
]


def test_set_ssi() -> None:
    assert set_ssi({"a": 1, "b": 0, "c": 1, "d": 0}) == 0.5
    assert set_ssi({}) is None
    with pytest.raises(ValueError):
        set_ssi({"a": 2})


def test_cells_by_model_and_pooled() -> None:
    cells = {(c.model, c.condition): c for c in ssi_cells(RECORDS)}
    # M1 initial: (.5 + .75 + .25)/3 = .5; all models: (.5 + .75 + .25 + 0)/4 = .375.
    assert cells[("M1", "initial")].mean == pytest.approx(0.5) and cells[("M1", "initial")].n_sets == 3
    assert cells[("all", "initial")].mean == pytest.approx(0.375) and cells[("all", "initial")].n_sets == 4
    assert cells[("M2", "initial")].mean == 0.0


def test_comparison_drop_and_paired_t() -> None:
    comps = {c.model: c for c in ssi_comparisons(RECORDS)}
    m1 = comps["M1"]
    # refined mean (.25 + 0 + 0)/3 = 1/12; drop = (.5 - 1/12)/.5 = 5/6.
    assert m1.relative_drop == pytest.approx(5 / 6)
    # differences (.25, .75, .25): mean 5/12,
    # sd sqrt(((-1/6)^2 + (1/3)^2 + (-1/6)^2)/2) = sqrt(1/12) = .288675;
    # se = .288675/sqrt(3) = 1/6 -> t = (5/12)/(1/6) = 2.5; df 2: two-sided p = 1 - t/sqrt(t^2 + 2)
    # = 1 - 2.5/2.872281 = 0.129612.
    assert m1.t == pytest.approx(2.5) and m1.p_value == pytest.approx(0.129612, abs=1e-6) and m1.n_pairs == 3
    pooled = comps["all"]
    assert pooled.n_pairs == 3 and pooled.n_initial == 4 and pooled.t == pytest.approx(2.5)
    # M2: initial mean 0 -> no drop; no pair -> no test.
    m2 = comps["M2"]
    assert m2.relative_drop is None and m2.drop_reason and m2.t is None and m2.test_reason


def test_t_test_degenerate() -> None:
    same_diff = [
        rec("a", "M", "initial", [1, 0]),
        rec("a", "M", "refined", [0, 0]),
        rec("b", "M", "initial", [1, 1]),
        rec("b", "M", "refined", [1, 0]),
    ]
    c = ssi_comparisons(same_diff)[0]
    # both differences are 0.5: zero variance -> undefined, not inf.
    assert c.t is None and "zero variance" in (c.test_reason or "")
    one = ssi_comparisons([rec("a", "M", "initial", [1]), rec("a", "M", "refined", [0])])[0]
    assert one.t is None and one.n_pairs == 1 and one.relative_drop == 1.0
    with pytest.raises(ValueError):
        ssi_comparisons([rec("a", "M", "initial", [1]), rec("a", "M", "initial", [0])])


def test_prevalence() -> None:
    prev = {(p.item, p.condition): p for p in rubric_prevalence(RECORDS)}
    # i0 initial: q1 1, q2 1, q3 1, M2 q1 0 -> 3/4; refined: q1 1, q2 0, q3 0 -> 1/3.
    assert prev[("i0", "initial")].share == 0.75 and prev[("i0", "initial")].n_sets == 4
    assert prev[("i0", "refined")].share == pytest.approx(1 / 3)
    assert rubric_prevalence([]) == []
