"""Consensus rules (SPEC 5): the label a study adopts for one (item, question) from its annotations.

Every per-item rule takes ``votes``: a sequence of ``(annotator_id, value)``, at most one per annotator,
and returns a ``ConsensusResult``. A ``None`` value is an abstention and is ignored (pass "Unsure" as
its own value where the rule must see it, as visage's visual-ness rule does). ``support`` lists the
annotators whose value equals the adopted one, in the order given. ``dawid_skene`` works on a whole
question at once. Read ``consensus.md`` beside this file for the rules in words.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np

Vote = tuple[Hashable, Hashable]
Rule = Callable[[Sequence[Vote]], "ConsensusResult"]
AnnotatorT = TypeVar("AnnotatorT", bound=Hashable)
OptionT = TypeVar("OptionT", bound=Hashable)

REASON_NO_VOTES = "no votes"


@dataclass(frozen=True)
class ConsensusResult:
    """The adopted value of one item, or why there is none.

    ``value`` is None exactly when ``resolved`` is False, and then ``reason`` says why (e.g.
    "tie between 'no' and 'yes' (2 votes each)"). ``confidence`` is the share of counted votes behind
    the value (the posterior probability for Dawid-Skene, 1.0 for an adjudication). ``params`` records
    the rule's parameters (k, agree_values, ...), so a stored row says exactly how it was derived.
    """

    value: Any
    resolved: bool
    rule: str
    support: list[Hashable]
    confidence: float | None
    n_votes: int
    reason: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class AnnotatorReliability:
    """Dawid-Skene's estimate of one annotator.

    ``confusion[true][observed]`` = P(annotator answers ``observed`` | true label ``true``);
    ``accuracy`` = sum_k prior_k * confusion[k][k], the probability of a correct answer on an item
    drawn from the estimated class priors.
    """

    annotator: Hashable
    accuracy: float
    confusion: dict[Hashable, dict[Hashable, float]]
    n_votes: int


@dataclass(frozen=True)
class DawidSkeneResult:
    """Dawid-Skene over one question: per-item consensus and posteriors, annotators, class priors."""

    labels: list[Hashable]
    items: dict[Hashable, ConsensusResult]
    posteriors: dict[Hashable, dict[Hashable, float]]
    annotators: dict[Hashable, AnnotatorReliability]
    priors: dict[Hashable, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (JSON-serialisable when the ids and labels are strings)."""
        return asdict(self)


def majority(votes: Sequence[Vote], *, absolute: bool = False) -> ConsensusResult:
    """The most frequent value; a tie for the top stays unresolved (it goes to adjudication).

    With ``absolute=True`` the value also needs more than half of the counted votes.
    confidence = votes for the value / counted votes.
    """
    counted = _counted(votes)
    params = {"absolute": absolute}
    if not counted:
        return _unresolved("majority", 0, REASON_NO_VOTES, params)
    tally = Counter(value for _, value in counted)
    top = max(tally.values())
    leaders = [value for value, count in tally.items() if count == top]
    if len(leaders) > 1:
        return _unresolved("majority", len(counted), _tie(leaders, top), params)
    winner = leaders[0]
    if absolute and 2 * top <= len(counted):
        reason = f"{winner!r} has {top} of {len(counted)} votes, not more than half"
        return _unresolved("majority", len(counted), reason, params)
    return _resolved("majority", counted, winner, top / len(counted), params)


def unanimous(votes: Sequence[Vote]) -> ConsensusResult:
    """The value when every counted vote has it; otherwise unresolved. confidence is 1.0 when resolved."""
    counted = _counted(votes)
    if not counted:
        return _unresolved("unanimous", 0, REASON_NO_VOTES, {})
    tally = Counter(value for _, value in counted)
    if len(tally) > 1:
        return _unresolved("unanimous", len(counted), "annotators disagree: " + _describe(tally), {})
    return _resolved("unanimous", counted, counted[0][1], 1.0, {})


def at_least_k(votes: Sequence[Vote], *, k: int) -> ConsensusResult:
    """The value chosen by at least ``k`` annotators; unresolved when none or several values reach k.

    confidence = votes for the value / counted votes.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    counted = _counted(votes)
    params = {"k": k}
    if not counted:
        return _unresolved("at_least_k", 0, REASON_NO_VOTES, params)
    tally = Counter(value for _, value in counted)
    reaching = [value for value, count in tally.items() if count >= k]
    if not reaching:
        return _unresolved("at_least_k", len(counted), f"no value has {k} votes: " + _describe(tally), params)
    if len(reaching) > 1:
        reason = (
            "tie between "
            + " and ".join(repr(v) for v in _sorted(reaching))
            + f": each has {k} or more votes"
        )
        return _unresolved("at_least_k", len(counted), reason, params)
    winner = reaching[0]
    return _resolved("at_least_k", counted, winner, tally[winner] / len(counted), params)


def all_agree_set(votes: Sequence[Vote], *, agree_values: Collection[Hashable]) -> ConsensusResult:
    """True when every counted vote is one of ``agree_values``, else False (visage's "visual" rule).

    visage: an attribute is visual when every annotator chose Agree or Strongly Agree; one Unsure,
    Disagree or Strongly Disagree excludes it. support = the annotators inside the set when True,
    the ones outside it (who excluded it) when False; confidence = len(support) / counted votes.
    """
    allowed = frozenset(agree_values)
    if not allowed:
        raise ValueError("agree_values must not be empty")
    counted = _counted(votes)
    params = {"agree_values": _sorted(allowed)}
    if not counted:
        return _unresolved("all_agree_set", 0, REASON_NO_VOTES, params)
    outside = [annotator for annotator, value in counted if value not in allowed]
    if outside:
        return ConsensusResult(
            value=False,
            resolved=True,
            rule="all_agree_set",
            support=outside,
            confidence=len(outside) / len(counted),
            n_votes=len(counted),
            params=params,
        )
    return ConsensusResult(
        value=True,
        resolved=True,
        rule="all_agree_set",
        support=[annotator for annotator, _ in counted],
        confidence=1.0,
        n_votes=len(counted),
        params=params,
    )


def adjudicated(votes: Sequence[Vote], *, expert_id: Hashable, expert_value: Hashable) -> ConsensusResult:
    """The expert's decision, whatever the others said.

    support = the expert followed by the annotators who gave the same value; confidence = 1.0 (an
    adjudication is final). ``n_votes`` counts the other annotators' votes; the expert's own vote in
    ``votes``, if any, is not counted twice.
    """
    if expert_value is None:
        raise ValueError("an adjudication needs a value")
    counted = [(a, v) for a, v in _counted(votes) if a != expert_id]
    agreeing = [annotator for annotator, value in counted if value == expert_value]
    return ConsensusResult(
        value=expert_value,
        resolved=True,
        rule="adjudicated",
        support=[expert_id, *agreeing],
        confidence=1.0,
        n_votes=len(counted),
        params={"expert_id": expert_id},
    )


def per_option(
    selections: Sequence[tuple[AnnotatorT, Collection[Hashable]]],
    *,
    options: Sequence[OptionT],
    rule: Rule,
    shown: Mapping[AnnotatorT, Collection[Hashable]] | None = None,
) -> dict[OptionT, ConsensusResult]:
    """Consensus of a multi question, one 0/1 decision per option.

    ``selections`` holds (annotator_id, options that annotator ticked). For each option an annotator
    votes 1 if they ticked it and 0 otherwise, but only when the option was shown to them:
    ``shown[annotator_id]`` lists the options they saw (visage shows 5 at a time); without ``shown``
    every option counts as shown. ``rule`` is any per-item rule, e.g.
    ``functools.partial(at_least_k, k=2)``.
    """
    results: dict[OptionT, ConsensusResult] = {}
    for option in options:
        votes: list[Vote] = []
        for annotator, ticked in selections:
            if shown is not None and option not in shown.get(annotator, ()):
                continue
            votes.append((annotator, 1 if option in ticked else 0))
        results[option] = rule(votes)
    return results


def dawid_skene(
    records: Iterable[tuple[Hashable, Hashable, Hashable]], *, n_iter: int = 100, tol: float = 1e-5
) -> DawidSkeneResult:
    """Dawid & Skene (1979) EM over one question, computed by crowd-kit's ``DawidSkene``.

    ``records`` is the long table (item_id, annotator_id, value); None values are ignored. The model:
    each annotator w has a confusion matrix e_w[true][observed], each class a prior p; EM alternates
    posteriors P(true = k | votes) ∝ p_k prod_w e_w[k][vote_w] with re-estimating e and p. Per item the
    consensus is the label of highest posterior (confidence = that posterior); an exact tie of the top
    posteriors stays unresolved. crowd-kit starts from majority-vote posteriors, so the result is
    deterministic.
    """
    rows = [(item, annotator, value) for item, annotator, value in records if value is not None]
    if not rows:
        return DawidSkeneResult(labels=[], items={}, posteriors={}, annotators={}, priors={})
    # crowd-kit and pandas load in a second and a half; only Dawid-Skene needs them (not web start-up).
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    data = pd.DataFrame(rows, columns=["task", "worker", "label"])
    if data.duplicated(["task", "worker"]).any():
        raise ValueError("an annotator may vote once per item")
    with warnings.catch_warnings():
        # crowd-kit 1.4.2 still passes pandas' deprecated inplace=/copy= keywords; not ours to act on.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"crowdkit(\.|$)")
        model = DawidSkene(n_iter=n_iter, tol=tol).fit(data)
    if model.probas_ is None or model.errors_ is None or model.priors_ is None:
        raise RuntimeError("crowd-kit's Dawid-Skene fit left no estimates")
    errors = model.errors_
    labels = _sorted(model.probas_.columns.tolist())  # tolist: plain Python labels, not numpy scalars
    probas = model.probas_[labels]
    prior_by_label = model.priors_.to_dict()
    priors = {label: float(prior_by_label[label]) for label in labels}

    items: dict[Hashable, ConsensusResult] = {}
    posteriors: dict[Hashable, dict[Hashable, float]] = {}
    votes_by_item: dict[Hashable, list[Vote]] = {}
    for item, annotator, value in rows:
        votes_by_item.setdefault(item, []).append((annotator, value))
    matrix = probas.to_numpy(dtype=np.float64)
    for row_index, item in enumerate(probas.index.tolist()):
        row = matrix[row_index]
        posteriors[item] = {label: float(p) for label, p in zip(labels, row, strict=True)}
        votes = votes_by_item[item]
        top = float(row.max())
        leaders = [labels[i] for i in np.flatnonzero(row == top)]
        if len(leaders) > 1:
            items[item] = _unresolved("dawid_skene", len(votes), _tie(leaders, None), {})
        else:
            items[item] = _resolved("dawid_skene", votes, leaders[0], top, {})

    annotators: dict[Hashable, AnnotatorReliability] = {}
    n_by_annotator = data.groupby("worker", sort=False).size()
    for annotator in n_by_annotator.index.tolist():
        block = errors.loc[annotator]  # rows: observed label, columns: true label
        confusion = {
            true: {
                observed: float(block.at[observed, true]) if observed in block.index else 0.0
                for observed in labels
            }
            for true in labels
        }
        accuracy = sum(priors[k] * confusion[k][k] for k in labels)
        annotators[annotator] = AnnotatorReliability(
            annotator=annotator,
            accuracy=float(accuracy),
            confusion=confusion,
            n_votes=int(n_by_annotator[annotator]),
        )
    return DawidSkeneResult(
        labels=labels, items=items, posteriors=posteriors, annotators=annotators, priors=priors
    )


def rule_named(name: str, params: Mapping[str, Any]) -> Rule:
    """The per-item rule a stored choice names (``majority``, ``unanimous``, ``at-least-k``,
    ``all-agree-set``) with its parameters; ValueError for any other name (Dawid-Skene works on a whole
    question, an adjudication on one expert's value)."""
    if name == "majority":
        return partial(majority, absolute=bool(params.get("absolute", False)))
    if name == "unanimous":
        return unanimous
    if name == "at-least-k":
        return partial(at_least_k, k=int(params["k"]))
    if name == "all-agree-set":
        return partial(all_agree_set, agree_values=list(params["agree_values"]))
    raise ValueError(f"no per-item rule named {name!r}")


def pending(n_votes: int, needed: int) -> ConsensusResult:
    """No label yet: the item has ``n_votes`` judgements of the ``needed`` its study asks for.

    A rule run on fewer judgements than the study's overlap would adopt a label the missing judgements
    could still overturn (one rater's "agree" is not "every rater agreed"), so the label waits.
    """
    return _unresolved(
        "pending",
        n_votes,
        f"pending: {n_votes} of {needed} judgement{'' if needed == 1 else 's'}",
        {"needed": needed},
    )


def _counted(votes: Sequence[Vote]) -> list[Vote]:
    seen: set[Hashable] = set()
    counted: list[Vote] = []
    for annotator, value in votes:
        if annotator in seen:
            raise ValueError(f"annotator {annotator!r} voted twice")
        seen.add(annotator)
        if value is not None:
            counted.append((annotator, value))
    return counted


def _resolved(
    rule: str, counted: Sequence[Vote], value: Hashable, confidence: float, params: dict[str, Any]
) -> ConsensusResult:
    return ConsensusResult(
        value=value,
        resolved=True,
        rule=rule,
        support=[annotator for annotator, v in counted if v == value],
        confidence=float(confidence),
        n_votes=len(counted),
        params=params,
    )


def _unresolved(rule: str, n_votes: int, reason: str, params: dict[str, Any]) -> ConsensusResult:
    return ConsensusResult(
        value=None,
        resolved=False,
        rule=rule,
        support=[],
        confidence=None,
        n_votes=n_votes,
        reason=reason,
        params=params,
    )


def _tie(values: Iterable[Hashable], count: int | None) -> str:
    listed = " and ".join(repr(v) for v in _sorted(list(values)))
    return f"tie between {listed}" + (
        f" ({count} vote{'' if count == 1 else 's'} each)" if count is not None else ""
    )


def _describe(tally: Counter[Hashable]) -> str:
    return ", ".join(f"{value!r} ({tally[value]})" for value in _sorted(list(tally)))


def _sorted(values: Iterable[Hashable]) -> list[Hashable]:
    items = list(values)
    try:
        return sorted(items)  # type: ignore[type-var]  # labels of one kind sort; mixed ones fall back below
    except TypeError:
        return sorted(items, key=lambda v: (type(v).__name__, repr(v)))
