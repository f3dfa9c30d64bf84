"""The interval of a difference of two shares (k_b / n_b - k_a / n_a), for comparisons of findings.

Newcombe's hybrid score interval (Newcombe 1998, *Statistics in Medicine* 17, method 10): a Wilson
score interval on each share, combined as

    d = p_b - p_a
    low  = d - sqrt((p_b - l_b)^2 + (u_a - p_a)^2)
    high = d + sqrt((u_b - p_b)^2 + (p_a - l_a)^2)

computed by statsmodels (``confint_proportions_2indep``, ``method="newcomb"``). It stays inside
[-1, 1] and behaves at shares of 0 or 1, where the normal (Wald) interval collapses. It treats the two
shares as independent samples; when both sides judged the same items (two rater pools of one study)
their estimates are positively correlated and the interval is wider than a paired one would be:
conservative, never too narrow.
"""

from __future__ import annotations

from dataclasses import dataclass

METHOD = (
    "Newcombe's hybrid score interval for a difference of two shares (Wilson on each side; "
    "Newcombe 1998, method 10), 95%, treating the two sides as independent samples: conservative "
    "when both sides judged the same items"
)


@dataclass(frozen=True)
class ShareDifference:
    difference: float
    low: float
    high: float


def share_difference(k_a: int, n_a: int, k_b: int, n_b: int, *, confidence: float = 0.95) -> ShareDifference:
    """B's share minus A's (``k_b / n_b - k_a / n_a``) with its Newcombe interval.

    Raises ValueError when a side has no items (``n < 1``), a count outside ``0..n`` or a count or n that
    is not a whole number: the difference is then undefined, not 0."""
    for k, n in ((k_a, n_a), (k_b, n_b)):
        if any(isinstance(x, bool) or not isinstance(x, int) for x in (k, n)):
            raise ValueError(f"a share is a whole count out of a whole n, not {k!r} out of {n!r}")
        if n < 1:
            raise ValueError("a share needs at least one item")
        if not 0 <= k <= n:
            raise ValueError(f"a count of {k} out of {n} is not a share")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    # Imported here: statsmodels pulls in pandas, which no web worker should load at start-up (the
    # compare page imports this module; tests/test_wsgi.py).
    from statsmodels.stats.proportion import confint_proportions_2indep

    low, high = confint_proportions_2indep(
        k_b, n_b, k_a, n_a, method="newcomb", compare="diff", alpha=1.0 - confidence
    )
    difference = k_b / n_b - k_a / n_a
    # Rounding at the ends of [-1, 1] (d = +-1 gives a bound of exactly +-1 up to float error).
    return ShareDifference(difference, max(-1.0, float(low)), min(1.0, float(high)))
