"""``metrics/ppi.py`` against the method authors' own implementation, ``ppi_py`` (ppi-python 0.2.3,
Angelopoulos et al.): the same point estimate and, once the two spreads are put on the same footing, the
same interval.

ppi_py reads the machine labels of the unlabelled items only and computes both standard deviations
with numpy's default ``ddof=0``; ``metrics/ppi.py`` takes the machine labels it is given and uses
``ddof=1`` (the unbiased variances of its docstring). So ``ppi_mean`` is given the unlabelled items'
machine labels here, and ppi_py's variances are multiplied by n/(n - 1) and N/(N - 1) before comparing.
The proportion interval (Agresti-Coull pseudo-items) and the design weights are ours alone: these
checks read a mean (``proportion=False``) under a uniform design.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.ppi import ppi_mean, z_value

ppi_py = pytest.importorskip("ppi_py")


def _data(seed: int, n: int = 150, big: int = 3000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Likert-like human labels Y, a noisy machine label on the labelled items and on the others."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, size=n + big).astype(float)
    machine = np.clip(truth + rng.normal(0.3, 0.9, size=truth.size).round(), 1, 5)
    return truth[:n], machine[:n], machine[n:]


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_estimate_and_interval_equal_ppi_py(lam: float, seed: int) -> None:
    y, f, f_unlabelled = _data(seed)
    n, big = y.size, f_unlabelled.size
    ours = ppi_mean(y, f, f_unlabelled, lam=lam)
    low, high = ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=0.05, lam=lam)
    estimate = float(ppi_py.ppi_mean_pointestimate(y, f, f_unlabelled, lam=lam)[0])
    assert ours.ppi.estimate == pytest.approx(estimate, abs=1e-12)
    # ppi_py's half-width z sqrt(A0 / N + B0 / n) with ddof=0 variances; ours uses ddof=1.
    z = z_value()
    half = (float(high[0]) - float(low[0])) / 2
    a0 = float(np.var(lam * f_unlabelled))
    b0 = float(np.var(y - lam * f))
    assert half == pytest.approx(z * math.sqrt(a0 / big + b0 / n), rel=1e-9)  # ppi_py's own formula
    expected = z * math.sqrt(a0 * big / (big - 1) / big + b0 * n / (n - 1) / n)
    assert ours.ppi.high - ours.ppi.estimate == pytest.approx(expected, rel=1e-9)
    assert ours.ppi.estimate - ours.ppi.low == pytest.approx(expected, rel=1e-9)


def test_power_tuning_lands_near_ppi_pys_lambda() -> None:
    """Both tune lambda to the variance-minimising value; ppi_py estimates Var(f) from every item and
    clips to [0, 1], ours from the sample (module docstring), so they agree to sampling error."""
    y, f, f_unlabelled = _data(3, n=400, big=8000)
    ours = ppi_mean(y, f, f_unlabelled)
    low, high = ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=0.05)
    assert ours.lam is not None and 0.3 < ours.lam < 1.0
    width_py = float(high[0]) - float(low[0])
    assert ours.ppi.high - ours.ppi.low == pytest.approx(width_py, rel=0.05)
