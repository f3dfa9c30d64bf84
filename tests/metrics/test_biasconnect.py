"""BiasConnect / InterMit against hand-computed values."""

from __future__ import annotations

import pytest

from metrics.biasconnect import (
    AxisImage,
    distribution,
    intermit_next_axis,
    intermit_tau,
    intersectional_sensitivity,
    is_correlation,
    mitigation_report,
    normalised_wasserstein,
    uniform_target,
)

OPTIONS = {"gender": ["male", "female"], "age": ["young", "old"]}


def img(condition: str, gender: str | None, age: str | None, person: bool = True) -> AxisImage:
    return AxisImage(condition, {"gender": gender, "age": age}, person)


def test_distribution() -> None:
    d = distribution(["male", "male", "female", None], ["male", "female"])
    assert d.counts == [2, 1] and d.n == 3 and d.probs == pytest.approx([2 / 3, 1 / 3])
    assert distribution([], ["a"]).probs is None
    with pytest.raises(ValueError):
        distribution(["other"], ["male", "female"])


def test_normalised_wasserstein_nominal() -> None:
    # TV((2/3,1/3), (1/2,1/2)) = (1/6 + 1/6)/2 = 1/6; max_j TV(delta_j, U) = 1 - 1/2 -> w = 1/3.
    assert normalised_wasserstein([2 / 3, 1 / 3], uniform_target(2)).value == pytest.approx(1 / 3)
    # k = 3, one-hot vs uniform: TV = (2/3 + 1/3 + 1/3)/2 = 2/3 = max -> 1.
    assert normalised_wasserstein([1, 0, 0], uniform_target(3)).value == pytest.approx(1.0)
    # Target (0.8, 0.2), D = (0.5, 0.5): TV = 0.3; max(TV(d0, D*) = 0.2, TV(d1, D*) = 0.8) -> 0.3/0.8 = 0.375.
    assert normalised_wasserstein([0.5, 0.5], [0.8, 0.2]).value == pytest.approx(0.375)
    # Listing order does not matter for the 0/1 ground distance.
    assert normalised_wasserstein([0.2, 0.3, 0.5], [0.5, 0.25, 0.25]).value == pytest.approx(
        normalised_wasserstein([0.5, 0.2, 0.3], [0.25, 0.5, 0.25]).value
    )
    assert normalised_wasserstein(None, uniform_target(2)).value is None
    one = normalised_wasserstein([1.0], [1.0])
    assert one.value is None and one.reason


def test_normalised_wasserstein_ordinal() -> None:
    # Positions 0,1,2, uniform target CDF (1/3, 2/3, 1). D = (1,0,0): CDF (1,1,1) -> W1 = 2/3 + 1/3 = 1.
    # delta_1 = (0,1,0): CDF (0,1,1) -> 1/3 + 1/3 = 2/3; delta_2: (0,0,1) -> 1/3 + 2/3 = 1. max = 1.
    assert normalised_wasserstein([1, 0, 0], uniform_target(3), "ordinal").value == pytest.approx(1.0)
    assert normalised_wasserstein([0, 1, 0], uniform_target(3), "ordinal").value == pytest.approx(2 / 3)
    # The nominal distance sees (0,1,0) as far as any one-hot: TV 2/3 / max 2/3 = 1.
    assert normalised_wasserstein([0, 1, 0], uniform_target(3)).value == pytest.approx(1.0)


def test_is_matrix_hand_computed() -> None:
    images = (
        [img("base", "male", "young")] * 4
        + [img("base", "female", "old", person=False)]
        + [
            img("gender:male", "male", "young"),
            img("gender:male", "male", "young"),
            img("gender:female", "female", "old"),
            img("gender:female", "female", "young"),
            img("age:young", "female", "young"),
            img("age:young", "male", "young"),
            img("age:old", "female", "old"),
            img("age:old", "female", "old"),
        ]
    )
    s = intersectional_sensitivity(images, OPTIONS)
    # Base (the no-person image is dropped): gender (1,0) -> w 1; age (1,0) -> w 1.
    assert s.w_initial == {"gender": 1.0, "age": 1.0} and s.n_images["base"] == 4
    assert s.rows == ["gender", "age"] and s.columns == ["gender", "age"]
    # Intervening on gender: gender pooled ((1,0) + (0,1))/2 = (.5,.5) -> w 0 -> IS 1;
    # age pooled ((1,0) + (.5,.5))/2 = (.75,.25) -> TV .25 / .5 = .5 -> IS .5.
    # Intervening on age: gender ((.5,.5) + (0,1))/2 = (.25,.75) -> w .5 -> IS .5; age (.5,.5) -> IS 1.
    assert s.values == [[pytest.approx(1.0), pytest.approx(0.5)], [pytest.approx(0.5), pytest.approx(1.0)]]
    assert s.warnings == []


def test_negative_is_warning_and_empty_counterfactual() -> None:
    images = [
        img("base", "male", "young"),
        img("base", "female", "old"),
        img("age:young", "male", "young"),
        img("age:old", "male", "old"),
        img("gender:male", None, None, person=False),
    ]
    s = intersectional_sensitivity(images, OPTIONS)
    # gender: base (.5,.5) -> w 0; after age: (1,0) -> w 1 -> IS[age][gender] = -1.
    assert s.values[s.rows.index("age")][0] == pytest.approx(-1.0)
    assert any("IS[age][gender]" in w for w in s.warnings)
    # gender:male has no person image: nothing to pool -> cells None, warning.
    assert s.values[s.rows.index("gender")] == [None, None]
    assert any("gender:male" in w for w in s.warnings)


def test_intermit_planning() -> None:
    images = [img("base", "male", "young")] * 4 + [
        img("gender:male", "male", "young"),
        img("gender:male", "male", "young"),
        img("gender:female", "female", "old"),
        img("gender:female", "female", "young"),
        img("age:young", "female", "young"),
        img("age:young", "male", "young"),
        img("age:old", "female", "old"),
        img("age:old", "female", "old"),
    ]
    s = intersectional_sensitivity(images, OPTIONS)
    w = s.w_initial
    # p = (3/4, 1/4) after normalising (3, 1): tau = .75*1 + .25*1 = 1 > .35.
    # gamma(gender) = .75*1 + .25*.5 = .875; gamma(age) = .75*.5 + .25*1 = .625 -> gender.
    step = intermit_next_axis(w, s, {"gender": 3, "age": 1})
    assert step.tau == pytest.approx(1.0) and not step.done and step.next_axis == "gender"
    assert step.gammas == {"gender": pytest.approx(0.875), "age": pytest.approx(0.625)}
    # B* = {age}: gamma(gender) = .5, gamma(age) = 1 -> age; with age mitigated -> gender.
    assert intermit_next_axis(w, s, {"age": 1}).next_axis == "age"
    assert intermit_next_axis(w, s, {"age": 1}, mitigated=["age"]).next_axis == "gender"
    assert intermit_next_axis(w, s, {"age": 1}, mitigated=["age", "gender"]).next_axis is None
    # tau = .5*.2 + .5*.3 = .25 <= .35: done.
    done = intermit_next_axis({"gender": 0.2, "age": 0.3}, s, {"gender": 1, "age": 1})
    assert done.done and done.next_axis is None and done.tau == pytest.approx(0.25)
    assert intermit_tau({"gender": None, "age": 1.0}, {"gender": 1}) is None
    with pytest.raises(ValueError):
        intermit_tau({"gender": 1.0}, {"gender": 0})


def test_mitigation_report() -> None:
    r = mitigation_report(
        [0.98, 0.50, 0.19], ["environment", "clothing"], {"body": 1, "environment": 1, "clothing": 1}
    )
    # MitAmt = final tau 0.19; MitSteps = 2 mitigated / |B*| 3.
    assert r.mit_amt == 0.19 and r.mit_steps == pytest.approx(2 / 3) and r.steps == 2 and r.reached_epsilon
    assert mitigation_report([], [], {"a": 1}).mit_amt is None


def test_is_correlation() -> None:
    # x, y centred: (-1.5,-.5,.5,1.5) and (-1.5,.5,-.5,1.5): sum xy = 2.25-.25-.25+2.25 = 4;
    # sum x^2 = sum y^2 = 5 -> r = 4/5.
    c = is_correlation([1, 2, 3, 4], [1, 3, 2, 4])
    assert c.r == pytest.approx(0.8) and c.n == 4
    assert is_correlation([1, 2, None, 4], [1, 3, 5, None]).r is None  # 2 defined pairs
    assert is_correlation([1, 1, 1], [1, 2, 3]).reason == "one side is constant"
