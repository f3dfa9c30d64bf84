"""PPI++ means and proportions (metrics/ppi.py) against values computed by hand, and its coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.ppi import hajek_weights, labels_needed, ppi_difference, ppi_mean, z_value
from metrics.validation_sampling import (
    active_probabilities,
    poisson_sample,
    stratified_design,
    stratified_sample,
    uniform_sample,
)

Z = 1.959963984540054
# The hand example: 4 people-labelled items, 8 machine-labelled (the 4 included).
Y = [1, 0, 1, 0]  # Ybar = 0.5; Y - Ybar = [.5, -.5, .5, -.5]
F = [1, 0, 0, 0]  # fbar = 0.25; f - fbar = [.75, -.25, -.25, -.25]
F_ALL = [1, 0, 0, 0, 1, 1, 0, 1]  # Fbar = 0.5; s2_F = 8 * 0.25 / 7 = 2/7; s2_F / N = 1/28
# n(n - 1) = 12: C = sum dy*df / 12 = 0.5/12 = 1/24; D = 0.75/12 = 1/16; E = 1/12.


def test_z_is_the_normal_quantile() -> None:
    assert z_value() == pytest.approx(Z)
    with pytest.raises(ValueError):
        z_value(1.0)


def test_lambda_zero_is_the_classical_human_only_interval() -> None:
    result = ppi_mean(Y, F, F_ALL, lam=0.0)
    # mean 0.5, s^2 = 1/3, se = sqrt(1/3 / 4) = sqrt(1/12)
    se = math.sqrt(1 / 12)
    assert result.ppi.estimate == pytest.approx(0.5)
    assert result.ppi.se == pytest.approx(se)
    assert (result.ppi.low, result.ppi.high) == pytest.approx((0.5 - Z * se, 0.5 + Z * se))
    assert result.human_only == result.ppi
    classical_se = float(np.std(Y, ddof=1)) / math.sqrt(len(Y))
    assert result.human_only.se == pytest.approx(classical_se)
    assert result.gain == pytest.approx(1.0)


def test_lambda_one_is_ppi() -> None:
    result = ppi_mean(Y, F, F_ALL, lam=1.0)
    # theta = 0.5 + (0.5 - 0.25) = 0.75; (dy - df) = [-.25, -.25, .75, -.25] -> sum sq 0.75 -> /12 = 1/16
    variance = 1 / 16 + 1 / 28
    assert result.ppi.estimate == pytest.approx(0.75)
    assert result.ppi.se == pytest.approx(math.sqrt(variance))
    assert result.ppi.high == pytest.approx(0.75 + Z * math.sqrt(variance))
    assert result.machine_only == pytest.approx(0.5)
    # n_eff = 4 * (1/12) / variance
    assert result.n_effective == pytest.approx(4 * (1 / 12) / variance)


def test_power_tuned_lambda() -> None:
    result = ppi_mean(Y, F, F_ALL)
    # lambda* = C / (D + s2_F/N) = (1/24) / (1/16 + 1/28) = 14/33
    lam = 14 / 33
    assert result.lam == pytest.approx(lam)
    assert result.ppi.estimate == pytest.approx(0.5 + lam * 0.25)
    variance = 1 / 12 - 2 * lam / 24 + lam * lam / 16 + lam * lam / 28
    assert result.ppi.se == pytest.approx(math.sqrt(variance))
    # never wider than human-only, and here narrower than PPI at lambda 1
    assert result.ppi.se < result.human_only.se
    assert result.ppi.se < ppi_mean(Y, F, F_ALL, lam=1.0).ppi.se


def test_proportion_interval_adds_agresti_coulls_pseudo_items() -> None:
    # Y = [1, 1, 1, 0] plus the pseudo-items' Y [0, 0, 1, 1]: 5 ones in 8, centre 5/8; the sum of squares
    # 5 (3/8)^2 + 3 (5/8)^2 = 15/8, over 8 * 7: V = 15/448. The estimate stays the sample's 3/4.
    result = ppi_mean([1, 1, 1, 0], [1, 1, 1, 1], [1] * 10, lam=0.0, proportion=True)
    assert result.ppi.estimate == pytest.approx(0.75)
    assert result.ppi.se == pytest.approx(math.sqrt(15 / 448))
    assert result.ppi.low == pytest.approx(5 / 8 - Z * math.sqrt(15 / 448))
    assert result.ppi.high == pytest.approx(5 / 8 + Z * math.sqrt(15 / 448))
    # The same numbers as a mean that is not a proportion: the plain CLT interval around 3/4.
    plain = ppi_mean([1, 1, 1, 0], [1, 1, 1, 1], [1] * 10, lam=0.0)
    assert plain.ppi.se == pytest.approx(math.sqrt(0.25 / 4))
    assert plain.ppi.low == pytest.approx(0.75 - Z * math.sqrt(0.25 / 4))


def test_proportion_interval_is_clipped() -> None:
    # Ten ones: 12 ones in 14 after the pseudo-items, centre 6/7, V = (12 (1/7)^2 + 2 (6/7)^2) / (14 * 13)
    # = (84/49) / 182; 6/7 + z sqrt(V) = 1.047 is clipped to 1.
    result = ppi_mean([1] * 10, [1] * 10, [1] * 20, lam=0.0, proportion=True)
    variance = (84 / 49) / 182
    assert result.ppi.high == 1.0
    assert result.ppi.low == pytest.approx(6 / 7 - Z * math.sqrt(variance))
    assert result.reason is None  # every label agrees, yet the interval has a width


def test_hajek_weights_and_weighted_mean() -> None:
    # pi = [0.5, 0.25]: 1/pi = [2, 4], mean 3 -> w = [2/3, 4/3]
    assert hajek_weights([0.5, 0.25]) == pytest.approx([2 / 3, 4 / 3])
    result = ppi_mean([1, 0], [1, 0], [1, 0, 0, 0], pi=[0.5, 0.25], lam=0.0)
    # Hajek: sum(Y/pi) / sum(1/pi) = 2 / 6
    assert result.ppi.estimate == pytest.approx(1 / 3)
    # V = [(2/3)^2 (2/3)^2 + (4/3)^2 (1/3)^2] / (2 * 1) = 16/81
    assert result.ppi.se == pytest.approx(math.sqrt(16 / 81))
    assert result.weighted
    with pytest.raises(ValueError):
        hajek_weights([0.0, 0.5])


def test_difference_of_two_groups() -> None:
    a = ppi_mean(Y, F, F_ALL, lam=1.0)  # 0.75, V = 1/16 + 1/28
    b = ppi_mean(Y, F, F_ALL, lam=0.0)  # 0.5, V = 1/12
    diff = ppi_difference(a, b)
    se = math.sqrt(1 / 16 + 1 / 28 + 1 / 12)
    assert diff.ppi.estimate == pytest.approx(0.25)
    assert diff.ppi.se == pytest.approx(se)
    assert diff.ppi.low == pytest.approx(0.25 - Z * se)
    assert diff.machine_only == pytest.approx(0.0)


def test_labels_needed_for_a_width() -> None:
    result = ppi_mean(Y, F, F_ALL, lam=0.0)
    # V(n) = (1/3) / n; width 0.2 -> (0.1 / z)^2 = 1/(3n) -> n = z^2 / 0.03 = 128.04 -> 129
    assert labels_needed(result, 0.2) == 129
    ppi = ppi_mean(Y, F, F_ALL, lam=1.0)
    # machine part 1/28 alone is wider than any width under 2 z sqrt(1/28) = 0.741
    assert labels_needed(ppi, 0.7) is None
    # sample part A = 4/16 = 0.25; width 0.8: (0.4/z)^2 - 1/28 = 0.00593 -> n = ceil(0.25/0.00593) = 43
    assert labels_needed(ppi, 0.8) == math.ceil(0.25 / ((0.4 / Z) ** 2 - 1 / 28))


def test_degenerate_inputs() -> None:
    result = ppi_mean([1], [1], [1, 0])
    assert result.ppi.estimate is None and "at least 2 people-labelled" in (result.reason or "")
    assert result.machine_only == 0.5
    same = ppi_mean([1, 1], [1, 1], [1, 1, 1])
    assert same.ppi.estimate == 1.0 and "width 0" in (same.reason or "")
    with pytest.raises(ValueError):
        ppi_mean([1, 0], [1], [1, 0])
    with pytest.raises(ValueError):
        ppi_mean([1, 0], [1, 0], [1, 0], pi=[0.5])


def test_designs_store_their_inclusion_probabilities() -> None:
    uniform = uniform_sample(list(range(10)), size=4, seed=1)
    assert len(uniform.ids) == 4 and set(uniform.probabilities.values()) == {0.4}
    assert uniform_sample(list(reversed(range(10))), size=4, seed=1).ids == uniform.ids
    strata = [(i, "a" if i < 6 else "b") for i in range(10)]
    design = stratified_design(stratified_sample(strata, size=5, seed=0), strata)
    # allocation a: 3 of 6, b: 2 of 4 -> pi = 0.5 everywhere
    assert set(design.probabilities.values()) == {0.5}
    pi = active_probabilities({1: 0.0, 2: 0.0, 3: 1.0, 4: 1.0}, 2, mix=0.5)
    # share = 0.5/4 + 0.5*u/2 -> [0.125, 0.125, 0.375, 0.375]; x2 -> [0.25, 0.25, 0.75, 0.75]
    assert pi == pytest.approx({1: 0.25, 2: 0.25, 3: 0.75, 4: 0.75})
    capped = active_probabilities({1: 0.0, 2: 0.0, 3: 0.0, 4: 10.0}, 2, mix=0.9)
    assert capped[4] == 1.0 and sum(capped.values()) == pytest.approx(2.0)
    assert min(capped.values()) > 0
    drawn = poisson_sample(pi, seed=3)
    assert all(drawn.probabilities[i] == pi[i] for i in drawn.ids)


def _population(rng: np.random.Generator, n_all: int) -> tuple[np.ndarray, np.ndarray]:
    """Truth Y ~ Bernoulli(0.3); a biased labeller: misses 30% of the 1s, adds 10% false 1s."""
    y = (rng.random(n_all) < 0.3).astype(float)
    flip = rng.random(n_all)
    f = np.where(y == 1, flip >= 0.3, flip < 0.1).astype(float)
    return y, f


@pytest.mark.parametrize("design", ["uniform", "active"])
def test_coverage_with_a_biased_labeller(design: str) -> None:
    """Seeded simulation: the machine-only mean is biased (0.3 * 0.7 + 0.7 * 0.1 = 0.28 against 0.3, and
    the interval would never cover in a large sample), yet the PPI interval covers the true mean. The bound
    is loose (0.90 for a 95% interval over 400 repetitions) so float details never decide it."""
    rng = np.random.default_rng(20231127)
    n_all, size, reps = 2000, 150, 400
    covered = human_covered = 0
    widths, human_widths = [], []
    for rep in range(reps):
        y, f = _population(rng, n_all)
        truth = y.mean()
        if design == "uniform":
            drawn = uniform_sample(list(range(n_all)), size=size, seed=rep)
        else:
            # oversample items the labeller called 1 (where, here, it errs more often)
            drawn = poisson_sample(active_probabilities(dict(enumerate(f)), size, mix=0.5), seed=rep)
        ids = np.array(drawn.ids, dtype=int)
        pi = [drawn.probabilities[i] for i in drawn.ids]
        result = ppi_mean(y[ids], f[ids], f, pi=pi, proportion=True)
        assert result.ppi.low is not None and result.ppi.high is not None
        covered += result.ppi.low <= truth <= result.ppi.high
        assert result.human_only.low is not None and result.human_only.high is not None
        human_covered += result.human_only.low <= truth <= result.human_only.high
        widths.append(result.ppi.high - result.ppi.low)
        human_widths.append(result.human_only.high - result.human_only.low)
    assert covered / reps >= 0.90
    assert human_covered / reps >= 0.90
    # a labeller this good narrows the interval
    assert np.mean(widths) < np.mean(human_widths)


def test_a_proportion_estimate_below_zero_is_clipped_with_the_reason() -> None:
    # Humans: 0 of 10 positive; the machine says 1 on 2 of the sample and on 0 of 40 others: theta(1) =
    # 0 + 1 x (2/50 - 2/10) = -0.16 by the formula, clipped to 0 with the reason.
    y = [0.0] * 10
    f = [1.0, 1.0] + [0.0] * 8
    f_all = f + [0.0] * 40
    result = ppi_mean(y, f, f_all, lam=1.0, proportion=True)
    assert result.ppi.estimate == 0.0 and result.ppi.low == 0.0 and 0.0 <= result.ppi.high <= 1.0
    assert "clipped to [0, 1]" in result.reason and "-0.1600" in result.reason
    plain = ppi_mean(y, f, f_all, lam=1.0)
    assert plain.ppi.estimate == pytest.approx(-0.16)  # a mean that is not a proportion is not clipped


def test_a_difference_of_proportions_stays_in_minus_one_one() -> None:
    high = ppi_mean([1.0] * 9 + [0.0], [1.0] * 10, [1.0] * 10, lam=0.0, proportion=True)
    low = ppi_mean([0.0] * 9 + [1.0], [0.0] * 10, [0.0] * 10, lam=0.0, proportion=True)
    diff = ppi_difference(high, low, proportion=True)
    assert -1.0 <= diff.ppi.low <= diff.ppi.estimate <= diff.ppi.high <= 1.0
    unbounded = ppi_difference(high, low)
    assert unbounded.ppi.high > 1.0  # the CLT interval of 0.8 +- 1.96 sqrt(V_A + V_B) leaves the range


def test_too_few_people_labelled_items_give_no_estimate() -> None:
    result = ppi_mean(
        [1.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0], proportion=True, min_labelled=10
    )
    assert result.ppi == result.human_only and result.ppi.estimate is None and result.ppi.low is None
    assert result.reason == "needs at least 10 people-labelled items (has 3): no estimate"
    assert ppi_mean([1.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0]).ppi.estimate is not None
