"""Adjusted p-values for a family of tests (docs/metrics.md, "Multiple comparisons").

``adjust(p_values, method)`` returns one adjusted p-value per input, in the input's order; None entries
(a test that could not run) are skipped, kept None and do not count in the family size m.

- Holm (1979), step-down, controls the family-wise error rate: order the m p-values p_(1) <= ... <= p_(m);
  p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). Never less powerful than Bonferroni (m p).
- Benjamini-Hochberg (1995), step-up, controls the false discovery rate (independent or positively
  dependent tests): p~_(i) = min_{j >= i} min(1, m p_(j) / j).

Both are monotone in the ordering of the raw p-values (a smaller raw p never gets a larger adjusted p),
never below the raw p and capped at 1. Ties get the same adjusted value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

HOLM = "holm"
BH = "bh"
CORRECTIONS = (HOLM, BH)
CORRECTION_NAMES = {
    HOLM: "Holm step-down (family-wise error)",
    BH: "Benjamini-Hochberg (false discovery rate)",
}
DEFAULT_CORRECTION = HOLM


def correction_parse(raw: str | None) -> str:
    """A ``correction`` parameter: blank -> the default (holm), else holm or bh (any case); ValueError for
    anything else, with a message naming the choices."""
    text = (raw or "").strip().lower()
    if not text:
        return DEFAULT_CORRECTION
    if text not in CORRECTIONS:
        shown = (raw or "").strip()[:40]
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, not {shown!r}")
    return text


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values (None kept None; see the module docstring)."""
    return adjust(p_values, HOLM)


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (None kept None; see the module docstring)."""
    return adjust(p_values, BH)


def adjust(p_values: Sequence[float | None], method: str = DEFAULT_CORRECTION) -> list[float | None]:
    """Adjusted p-values of ``p_values`` by ``method`` (holm or bh), in the input's order.

    None and non-finite entries are skipped (kept None, not counted in m). Raises ValueError for an unknown
    method or a p-value outside [0, 1]."""
    if method not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, not {method!r}")
    known = [(i, float(p)) for i, p in enumerate(p_values) if p is not None and math.isfinite(float(p))]
    for _i, p in known:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"a p-value must lie in [0, 1], not {p}")
    out: list[float | None] = [None] * len(p_values)
    m = len(known)
    if not m:
        return out
    order = sorted(known, key=lambda pair: pair[1])
    if method == HOLM:
        running = 0.0
        for rank, (i, p) in enumerate(order):  # rank 0 .. m-1: multiplier m - rank
            running = max(running, min(1.0, (m - rank) * p))
            out[i] = running
    else:
        running = 1.0
        for rank in range(m - 1, -1, -1):  # from the largest p down: rank + 1 = j
            i, p = order[rank]
            running = min(running, min(1.0, m * p / (rank + 1)))
            out[i] = running
    return out


def family_size(p_values: Sequence[float | None]) -> int:
    """How many tests ``adjust`` counts in the family: the entries that are finite p-values."""
    return sum(1 for p in p_values if p is not None and math.isfinite(float(p)))
