"""The reliability gate of a finding: may a question's human labels carry a finding? (docs/metrics.md,
"Reliability gate").

Krippendorff (2004, *Content Analysis*, 2nd ed., section 11.4.4, p. 241): "rely only on variables with
reliabilities above alpha = .800. Consider variables with reliabilities between alpha = .667 and alpha = .800
only for drawing tentative conclusions." So, for a question's alpha among the people who labelled it:

- ``reliable``   alpha >= reliable_at (0.800);
- ``tentative``  tentative_at (0.667) <= alpha < reliable_at;
- ``unreliable`` alpha < tentative_at;
- ``undefined``  alpha cannot be computed or rests on too little: fewer than two raters, one value in the
  whole domain, fewer than ``min_items`` items judged by two or more raters (default 10: below it one
  disagreement moves alpha by more than the width of the tentative band). The reason says which.

A study may choose other thresholds (``Thresholds``); every verdict states the values it used.

A ``multi`` question's options are pooled into one 0/1 nominal alpha whose units are the (item, option)
pairs judged by two or more raters (``pooled_counts``): the options share one instruction and one coder, so
they are one variable coded many times, as Krippendorff treats multi-valued coding.

No Django here: plain numbers in, plain dataclasses out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from metrics.agreement import ValueCounts

Verdict = Literal["reliable", "tentative", "unreliable", "undefined"]
VERDICTS: tuple[Verdict, ...] = ("reliable", "tentative", "unreliable", "undefined")

RELIABLE_AT = 0.800
TENTATIVE_AT = 0.667
MIN_ITEMS = 10
SOURCE = "Krippendorff (2004), Content Analysis, 2nd ed., p. 241"

REASON_ONE_RATER = "one rater: agreement needs at least two people judging the same items"
REASON_NO_RATER = "nobody has answered it, so it feeds no finding"
REASON_TOO_FEW = "too few items: {n} judged by two or more raters (the gate needs {k})"


@dataclass(frozen=True)
class Thresholds:
    """The cut-offs of the verdict (Krippendorff's by default) and the fewest pairable items it needs."""

    reliable_at: float = RELIABLE_AT
    tentative_at: float = TENTATIVE_AT
    min_items: int = MIN_ITEMS

    def __post_init__(self) -> None:
        for name in ("reliable_at", "tentative_at"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and -1.0 <= value <= 1.0):
                raise ValueError(f"{name} must be a number from -1 to 1")
        if self.tentative_at > self.reliable_at:
            raise ValueError("tentative_at must not exceed reliable_at")
        if isinstance(self.min_items, bool) or not isinstance(self.min_items, int) or self.min_items < 1:
            raise ValueError("min_items must be a whole number of at least 1")

    @property
    def is_default(self) -> bool:
        return (self.reliable_at, self.tentative_at, self.min_items) == (RELIABLE_AT, TENTATIVE_AT, MIN_ITEMS)

    def statement(self) -> str:
        """The values in words, e.g. 'reliable alpha >= 0.800, tentative >= 0.667, ... (Krippendorff ...)'."""
        whose = f"Krippendorff's thresholds, {SOURCE}" if self.is_default else "chosen for this study"
        return (
            f"reliable: alpha >= {self.reliable_at:.3f}; tentative: {self.tentative_at:.3f} <= alpha < "
            f"{self.reliable_at:.3f}; unreliable: below {self.tentative_at:.3f}; undefined under "
            f"{self.min_items} items judged by two or more raters ({whose})"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Gate:
    """The verdict on one alpha and why; ``reason`` is None only for a reliable one."""

    verdict: Verdict
    reason: str | None


def verdict(
    alpha: float | None,
    *,
    n_items: int,
    n_raters: int,
    undefined_reason: str | None = None,
    thresholds: Thresholds = Thresholds(),
) -> Gate:
    """The verdict on ``alpha`` (None: undefined, ``undefined_reason`` says why) computed over ``n_items``
    items judged by two or more of ``n_raters`` raters, under ``thresholds`` (module docstring)."""
    if n_raters < 1:
        return Gate("undefined", REASON_NO_RATER)
    if n_raters < 2:
        return Gate("undefined", REASON_ONE_RATER)
    if alpha is None or not math.isfinite(alpha):
        return Gate("undefined", undefined_reason or "alpha is undefined")
    if n_items < thresholds.min_items:
        return Gate("undefined", REASON_TOO_FEW.format(n=n_items, k=thresholds.min_items))
    if alpha >= thresholds.reliable_at:
        return Gate("reliable", None)
    if alpha >= thresholds.tentative_at:
        return Gate(
            "tentative",
            f"alpha {alpha:.3f} is below {thresholds.reliable_at:.3f}: tentative conclusions only",
        )
    return Gate(
        "unreliable",
        f"alpha {alpha:.3f} is below {thresholds.tentative_at:.3f}: people do not agree on this question, "
        "so findings from its labels are not to be relied on",
    )


def pooled_counts(parts: Sequence[ValueCounts]) -> ValueCounts:
    """One 0/1 ``ValueCounts`` whose units are every (item, option) unit of ``parts`` (each option's counts
    of a multi question, domains within {0, 1}), in order; units with no judgement are kept (alpha ignores
    units with fewer than two values)."""
    domain = np.array([0.0, 1.0])
    blocks = []
    for part in parts:
        if part.domain.size and not np.all(np.isin(part.domain, domain)):
            raise ValueError("pooled_counts takes 0/1 counts (the options of a multi question)")
        block = np.zeros((part.counts.shape[0], 2), dtype=np.int64)
        for column, value in enumerate(part.domain):
            block[:, int(value)] = part.counts[:, column]
        blocks.append(block)
    counts = np.vstack(blocks) if blocks else np.zeros((0, 2), dtype=np.int64)
    used = counts.sum(axis=0) > 0
    return ValueCounts(counts=counts[:, used], domain=domain[used])


@dataclass(frozen=True)
class Headline:
    """The study-level agreement line: the per-question range and median, and how many are reliable.

    Alphas of different questions are never averaged into one number: a mean hides the one question
    people could not agree on, and alphas of different levels (nominal, ordinal) are not on one scale."""

    n_questions: int
    n_defined: int
    low: float | None
    median: float | None
    high: float | None
    n_reliable: int
    n_tentative: int
    n_unreliable: int
    n_undefined: int
    reason: str | None = None

    def text(self) -> str:
        if self.median is None or self.low is None or self.high is None:
            return f"alpha undefined for all {self.n_questions} questions ({self.reason})"
        return (
            f"alpha {self.low:.3f} to {self.high:.3f} (median {self.median:.3f}) over {self.n_defined} of "
            f"{self.n_questions} questions; {self.n_reliable} reliable, {self.n_tentative} tentative, "
            f"{self.n_unreliable} unreliable, {self.n_undefined} undefined"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text()}


def headline(entries: Sequence[tuple[float | None, Verdict]]) -> Headline:
    """The ``Headline`` of (alpha, verdict) per question."""
    defined = sorted(a for a, _v in entries if a is not None and math.isfinite(a))
    count = {v: sum(1 for _a, w in entries if w == v) for v in VERDICTS}
    return Headline(
        n_questions=len(entries),
        n_defined=len(defined),
        low=defined[0] if defined else None,
        median=float(statistics.median(defined)) if defined else None,
        high=defined[-1] if defined else None,
        n_reliable=count["reliable"],
        n_tentative=count["tentative"],
        n_unreliable=count["unreliable"],
        n_undefined=count["undefined"],
        reason=None if defined else "no question has a defined alpha",
    )


def clip(value: float | None, low: float, high: float) -> float | None:
    """``value`` moved into [low, high] (None stays None)."""
    return None if value is None else min(high, max(low, value))
