"""Per-annotator quality figures for crowd work (docs/crowd.md, "Quality control"). Pure: no Django.

The study side (``annotations/selectors/quality.py``) reads the rows; these functions compute:

- ``answers_match``: is an annotator's answer the expected (gold or attention) answer?
- ``control_score``: gold accuracy, correct / n over the gold answers an annotator was asked.
- ``leave_one_out_agreement``: for each (item, question) an annotator answered, the plurality
  answer of the OTHER counted annotators; agreement rate = matches / comparable units
  (``leave_one_out_coded``: the same on integer codes with numpy, for large studies).
- ``straight_lining``: the longest run of identical answers to one question in submission
  order, and the share of the modal answer; ``straight_line_judged``: is that run straight-lining,
  judged against the question's own shares among the other annotators?
  ``OthersShares`` and ``straight_line_judged_among``: the same judgement for every annotator of a
  question without comparing each with every other (sorted shares and index arithmetic);
- ``quality_flags``: which of those cross the study's thresholds.
"""

from __future__ import annotations

import bisect
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

AnnotatorT = TypeVar("AnnotatorT", bound=Hashable)

EPSILON = 1e-9  # so that a rate exactly at median - margin (0.8 - 0.2 in floating point) is not flagged
DEFAULT_THRESHOLDS: dict[str, float] = {
    "min_gold_accuracy": 0.7,  # flag when gold accuracy < this (with at least one gold answer)
    "max_attention_failures": 0,  # flag when failed attention checks > this
    "loo_margin": 0.2,  # flag when LOO agreement < study median - margin ...
    "loo_min_n": 10,  # ... counting only annotators with at least this many comparisons
    "min_median_seconds": 3.0,  # flag when the median time per item < this
    "max_straight_run": 10,  # flag when the longest run of one answer >= this ...
    "straight_margin": 0.3,  # ... and its answer's share is this much above the others' share of it ...
    "straight_dominant_share": 0.9,  # ... on a question whose modal share among the others is below this
}


def answer_key(value: Any) -> Hashable:
    """A hashable form of an answer: a multi answer (list) is compared as a set of options."""
    if isinstance(value, list):
        return json.dumps(sorted(value, key=lambda v: json.dumps(v, sort_keys=True)), sort_keys=True)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    key: Hashable = value  # JSON scalars (str, int, float, bool, None) are hashable
    return key


def answers_match(expected: Any, given: Any) -> bool:
    """True when ``given`` is the expected answer (lists as sets; ``None`` given never matches)."""
    if given is None:
        return False
    return answer_key(expected) == answer_key(given)


@dataclass(frozen=True)
class Score:
    """``correct`` of ``n`` checks; ``rate`` = correct / n, None when n = 0."""

    n: int
    correct: int
    rate: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def control_score(checks: Iterable[bool]) -> Score:
    """Gold accuracy over individual checks (one per gold question asked): correct / n."""
    values = list(checks)
    correct = sum(1 for check in values if check)
    return Score(len(values), correct, correct / len(values) if values else None)


def leave_one_out_agreement(
    rows: Iterable[tuple[Hashable, AnnotatorT, Any]],
    *,
    voters: Collection[AnnotatorT] | None = None,
) -> dict[AnnotatorT, Score]:
    """Agreement of each annotator with the consensus of the others, per unit (an item and question).

    ``rows`` are ``(unit, annotator, value)``, one per annotator and unit. For annotator *a* on unit *u*
    the reference is the plurality value among the other annotators' answers to *u* (only those in
    ``voters``, when given: e.g. excluded annotators are scored but do not vote). A unit with no other
    voter, or a tie for the top value, is not comparable and is left out of *a*'s n. Returns
    ``Score(n, agreements, rate)`` per annotator that answered any unit.
    """
    by_unit: dict[Hashable, list[tuple[AnnotatorT, Hashable]]] = defaultdict(list)
    for unit, annotator, value in rows:
        by_unit[unit].append((annotator, answer_key(value)))
    n: Counter[AnnotatorT] = Counter()
    agree: Counter[AnnotatorT] = Counter()
    seen: set[AnnotatorT] = set()
    for answers in by_unit.values():
        counts = Counter(value for annotator, value in answers if voters is None or annotator in voters)
        for annotator, value in answers:
            seen.add(annotator)
            votes_by_me = voters is None or annotator in voters
            if votes_by_me:
                counts[value] -= 1
            ranked = [(count, v) for v, count in counts.items() if count > 0]
            if votes_by_me:
                counts[value] += 1
            if not ranked:
                continue
            top = max(count for count, _v in ranked)
            winners = [v for count, v in ranked if count == top]
            if len(winners) != 1:
                continue
            n[annotator] += 1
            agree[annotator] += int(winners[0] == value)
    return {a: Score(n[a], agree[a], agree[a] / n[a] if n[a] else None) for a in seen}


def leave_one_out_coded(units: Any, annotators: Any, codes: Any, voting: Any) -> dict[int, tuple[int, int]]:
    """``leave_one_out_agreement`` on integer arrays, one element per answer, counted with numpy.

    ``units[i]`` numbers answer i's unit (0..U-1), ``annotators[i]`` its annotator id, ``codes[i]``
    its answer's code (0..K-1; equal answers, equal codes), ``voting[i]`` whether its annotator votes.
    Per answer the others' votes are the unit's vote counts less its own vote; it is comparable when
    one value has the most of them (at least one), and agrees when that value is its own.
    Returns ``{annotator: (n comparable, n agreeing)}`` for every annotator in ``annotators``; the
    same as ``leave_one_out_agreement`` on the decoded rows (tested), in memory of answers x K.
    """
    import numpy as np

    units, codes = np.asarray(units, dtype=np.int64), np.asarray(codes, dtype=np.int64)
    annotators, voting = np.asarray(annotators, dtype=np.int64), np.asarray(voting, dtype=bool)
    if units.size == 0:
        return {}
    k = int(codes.max()) + 1
    votes = np.bincount(units[voting] * k + codes[voting], minlength=(int(units.max()) + 1) * k).reshape(
        -1, k
    )
    others = votes[units]
    rows = np.flatnonzero(voting)
    others[rows, codes[rows]] -= 1
    top = others.max(axis=1)
    comparable = (top > 0) & ((others == top[:, None]).sum(axis=1) == 1)
    agree = comparable & (others.argmax(axis=1) == codes)
    ids, position = np.unique(annotators, return_inverse=True)
    n = np.bincount(position, weights=comparable, minlength=ids.size).astype(np.int64)
    hits = np.bincount(position, weights=agree, minlength=ids.size).astype(np.int64)
    return {int(a): (int(n[i]), int(hits[i])) for i, a in enumerate(ids)}


@dataclass(frozen=True)
class StraightLine:
    """One question's answers in submission order: the longest run of one value and the modal share."""

    n: int
    longest_run: int
    run_value: Any
    modal_value: Any
    modal_share: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def straight_lining(values: Sequence[Any]) -> StraightLine:
    """Longest run of consecutive identical answers (lists compared as sets) and the modal answer's share.

    The run's and the mode's value are returned as given (the first occurrence); ties for the mode go
    to the value seen first.
    """
    if not values:
        return StraightLine(0, 0, None, None, None)
    keys = [answer_key(value) for value in values]
    best, best_at, run = 1, 0, 1
    for position in range(1, len(keys)):
        run = run + 1 if keys[position] == keys[position - 1] else 1
        if run > best:
            best, best_at = run, position
    counts = Counter(keys)
    modal_key = max(counts, key=lambda key: (counts[key], -keys.index(key)))
    return StraightLine(
        len(values), best, values[best_at], values[keys.index(modal_key)], counts[modal_key] / len(values)
    )


@dataclass(frozen=True)
class StraightJudgement:
    """Whether one question's longest run is straight-lining, and why (``straight_line_judged``)."""

    flagged: bool
    own_share: float | None  # the run's answer's share among this annotator's answers to the question
    others_share: float | None  # the same answer's share among the others' answers (None: no others)
    others_modal_share: float | None  # the question's modal share among the others
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def answer_shares(values: Sequence[Any]) -> dict[Hashable, float]:
    """Each answer's share of ``values`` (answers compared as ``answer_key``)."""
    counts = Counter(answer_key(value) for value in values)
    return {key: n / len(values) for key, n in counts.items()}


def straight_line_judged(
    values: Sequence[Any], others: Sequence[Mapping[Any, float]], thresholds: Mapping[str, float]
) -> tuple[StraightLine, StraightJudgement]:
    """One annotator's answers to one question (submission order), judged against the question's own
    answer shares among the OTHER annotators (``others``: one ``answer_shares`` per other annotator).

    The others' share of an answer is the median over them of each one's share (so that one other
    straight-liner does not move it). A long run of one answer is natural where that answer is common
    (a "no" to "is there text in the background?"), so a run is straight-lining only when all hold:

    - it is at least ``max_straight_run`` long (0: never flag);
    - the question is not dominated by one answer: no answer has an others' share of
      ``straight_dominant_share`` or more (there, a run says nothing);
    - the annotator gives the run's answer at least ``straight_margin`` more often (as a share of their
      answers to the question) than the others do.

    With no other annotator's answers to the question there is nothing to judge against, and the run
    alone decides (a run of ``max_straight_run`` is flagged).

    This form takes the others' shares one by one: O(others x answers) per call, so a study judging
    each of N annotators against the N - 1 others is quadratic. ``OthersShares`` gives the same
    judgement for every annotator of a question from one sorted pass (``straight_line_judged_among``).
    """
    if not others:
        return _judged(values, None, thresholds)
    answers = {key for shares in others for key in shares}
    reference = {key: statistics.median(shares.get(key, 0.0) for shares in others) for key in answers}
    return _judged(values, (reference.get, max(reference.values())), thresholds)


def _judged(
    values: Sequence[Any],
    reference: tuple[Any, float] | None,
    thresholds: Mapping[str, float],
) -> tuple[StraightLine, StraightJudgement]:
    """``straight_line_judged`` given the others' reference: ``(share_of(key, default), modal share)``,
    or None when there are no others."""
    line = straight_lining(values)
    run_at_least = thresholds["max_straight_run"]
    if not values:
        return line, StraightJudgement(False, None, None, None, "no answers")
    own_share = answer_shares(values)[answer_key(line.run_value)]
    if reference is None:
        flagged = line.longest_run >= run_at_least > 0
        return line, StraightJudgement(
            flagged, own_share, None, None, "no other annotator answered this question: the run alone decides"
        )
    share_of, modal = reference
    others_share = share_of(answer_key(line.run_value), 0.0)
    if not line.longest_run >= run_at_least > 0:
        reason = f"the longest run, {line.longest_run}, is below {run_at_least:g}"
        flagged = False
    elif modal >= thresholds["straight_dominant_share"]:
        reason = f"one answer dominates this question (share {modal:.2f} among the others)"
        flagged = False
    elif own_share - others_share < thresholds["straight_margin"] - EPSILON:
        reason = f"this answer's share, {own_share:.2f}, is close to the others' {others_share:.2f}"
        flagged = False
    else:
        reason = f"this answer's share, {own_share:.2f}, is far above the others' {others_share:.2f}"
        flagged = True
    return line, StraightJudgement(flagged, own_share, others_share, modal, reason)


def _median_sorted(at: Any, size: int) -> float:
    """``statistics.median`` of a sorted sequence of ``size`` floats given by position (``at(j)``):
    the middle value, or the mean of the two middle values computed as statistics does."""
    middle = size // 2
    if size % 2 == 1:
        return float(at(middle))
    return float((at(middle - 1) + at(middle)) / 2)


class OthersShares(Generic[AnnotatorT]):
    """One question's answer shares per counted annotator (``answer_shares`` of each one's answers),
    and for any annotator the median over the OTHER counted annotators of each answer's share: the
    reference of ``straight_line_judged``, without comparing every annotator with every other.

    Per answer the N shares (0.0 for an annotator who never gave it) are held as the sorted nonzero
    shares after an implicit run of zeros. Leaving one annotator out removes one occurrence of their
    share from that sorted sequence, so the others' median is read at a shifted middle position
    (index arithmetic, one ``bisect`` per answer the annotator gave). The others' modal share is the
    largest of those medians: for the answers an annotator never gave, the median with one zero
    removed is the same for everyone, so those are sorted once and scanned from the top past the
    annotator's own answers. Building is O(entries log entries); one annotator's reference costs
    O(their answers x log N). The medians are the same floats as ``statistics.median`` gives (same
    elements, same arithmetic), so the judgements are identical (tested against the plain form).
    """

    def __init__(self, shares: Mapping[AnnotatorT, Mapping[Hashable, float]]) -> None:
        self.shares = shares
        self.size = len(shares)
        nonzero: dict[Hashable, list[float]] = defaultdict(list)
        for own in shares.values():
            for key, share in own.items():
                if share != 0.0:
                    nonzero[key].append(share)
        self.nonzero = {key: sorted(values) for key, values in nonzero.items()}
        # every key's median over all N (for one who is not among them) and with one zero removed
        self.full = {key: self._median(key, None) for key in self.nonzero}
        without_zero = [
            (self._median(key, 0.0), key) for key in self.nonzero if len(self.nonzero[key]) < self.size
        ]
        without_zero.sort(key=lambda pair: pair[0], reverse=True)
        self.without_zero = without_zero
        self.zero_removed = {key: median for median, key in without_zero}
        self.full_modal = max(self.full.values(), default=0.0)

    def _median(self, key: Hashable, removed: float | None) -> float:
        """Median of ``key``'s N shares, less one occurrence of ``removed`` (None: remove nothing)."""
        values = self.nonzero.get(key, [])
        zeros = self.size - len(values)
        if removed is None:
            return _median_sorted(lambda j: 0.0 if j < zeros else values[j - zeros], self.size)
        # position of one occurrence of ``removed`` in the whole sorted sequence
        at = 0 if removed == 0.0 else zeros + bisect.bisect_left(values, removed)

        def value(j: int) -> float:
            k = j if j < at else j + 1
            return 0.0 if k < zeros else values[k - zeros]

        return _median_sorted(value, self.size - 1)

    def others(self, annotator: AnnotatorT) -> int:
        """How many other counted annotators answered the question."""
        return self.size - 1 if annotator in self.shares else self.size

    def share_and_modal(self, annotator: AnnotatorT) -> tuple[Any, float] | None:
        """For ``annotator``: ``(share_of(key, default), modal share)`` of the others, None when there
        are no others (what ``straight_line_judged`` computes from the list of the others' shares)."""
        if self.others(annotator) == 0:
            return None
        own = self.shares.get(annotator)
        if own is None:  # not a counted annotator: the others are everyone
            return self.full.get, self.full_modal
        mine = {key: self._median(key, share) for key, share in own.items()}
        modal = max(mine.values())
        for median, key in self.without_zero:
            if key not in own:
                modal = max(modal, median)
                break
        zero_removed = self.zero_removed

        def share_of(key: Hashable, default: float) -> float:
            if key in mine:
                return mine[key]
            return zero_removed.get(key, default)

        return share_of, modal


def straight_line_judged_among(
    values: Sequence[Any],
    annotator: AnnotatorT,
    question: OthersShares[AnnotatorT],
    thresholds: Mapping[str, float],
) -> tuple[StraightLine, StraightJudgement]:
    """``straight_line_judged(values, [the shares of every other annotator of the question], thresholds)``
    for ``annotator``, from the question's ``OthersShares`` (see there): the same result, in time
    O(answers x log N) instead of O(N x answers)."""
    return _judged(values, question.share_and_modal(annotator), thresholds)


def median_or_none(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


@dataclass(frozen=True)
class Flag:
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def thresholds_with_defaults(given: Mapping[str, Any] | None) -> dict[str, float]:
    """The thresholds of ``DEFAULT_THRESHOLDS`` with the numeric ones in ``given`` replacing them."""
    result = dict(DEFAULT_THRESHOLDS)
    for key, value in (given or {}).items():
        if key in result and isinstance(value, int | float) and not isinstance(value, bool):
            result[key] = float(value)
    return result


def loo_median(scores: Iterable[Score], *, min_n: float) -> float | None:
    """Median LOO agreement rate over the annotators with at least ``min_n`` comparisons."""
    rates = [s.rate for s in scores if s.rate is not None and s.n >= min_n]
    return median_or_none(rates)


def quality_flags(
    *,
    gold: Score,
    attention_failed: int,
    loo: Score,
    study_loo_median: float | None,
    median_seconds: float | None,
    straight: tuple[str, StraightLine, StraightJudgement] | None,
    thresholds: Mapping[str, float],
) -> list[Flag]:
    """The flags one annotator earns against ``thresholds`` (see ``DEFAULT_THRESHOLDS``)."""
    flags = []
    if gold.rate is not None and gold.rate < thresholds["min_gold_accuracy"]:
        flags.append(
            Flag(
                "gold_accuracy",
                f"gold accuracy {gold.rate:.2f} ({gold.correct} of {gold.n}) "
                f"< {thresholds['min_gold_accuracy']:.2f}",
            )
        )
    if attention_failed > thresholds["max_attention_failures"]:
        flags.append(
            Flag(
                "attention",
                f"failed {attention_failed} attention check{'s' if attention_failed != 1 else ''}",
            )
        )
    if (
        loo.rate is not None
        and study_loo_median is not None
        and loo.n >= thresholds["loo_min_n"]
        and loo.rate < study_loo_median - thresholds["loo_margin"] - EPSILON
    ):
        flags.append(
            Flag(
                "agreement",
                f"agreement with the others {loo.rate:.2f} (n={loo.n}) is more than "
                f"{thresholds['loo_margin']:.2f} below the study median "
                f"{study_loo_median:.2f}",
            )
        )
    if median_seconds is not None and median_seconds < thresholds["min_median_seconds"]:
        flags.append(
            Flag("speed", f"median {median_seconds:.1f} s per item < {thresholds['min_median_seconds']:g} s")
        )
    if straight is not None and straight[2].flagged:
        question, line, judged = straight
        shares = (
            ""
            if judged.others_share is None
            else f"; {judged.own_share:.2f} of their answers, {judged.others_share:.2f} of the others'"
        )
        flags.append(
            Flag(
                "straight_lining",
                f"{question}: the same answer {line.longest_run} times in a row "
                f"(>= {thresholds['max_straight_run']:g}){shares}",
            )
        )
    return flags
