"""Overlap policies: how many judgements an item gets, replayed on judgements already collected
(docs/overlap.md).

A policy says when to stop asking for judgements of one item:

- ``fixed:K``: every item gets K judgements (the study's overlap today);
- ``agree:K/MAX``: collect until K judgements agree (K equal answers), at most MAX;
- ``posterior:P/MAX``: collect until the item's consensus under Dawid-Skene has posterior probability
  at least P, at most MAX.

``overlap_replay`` replays a policy on judgements ``(item, annotator, value)`` given in the order they
were collected: an item's used judgements are its first ones in that order. It reports how many
judgements the policy would have used of those available and, per item, the label it would have
adopted, compared with the *full consensus*: the majority of all the item's judgements (a tie has
none). ``same_as_full_consensus`` is the share of the items with a full consensus whose replayed label
equals it; a replayed tie (no label) counts as different; items without a full consensus are left out
of that share (``items_with_full_consensus`` is its denominator). ``same_by_label`` splits it by the
full consensus, so that a rare class's losses show.

The replayed label: ``fixed:K`` the majority of the K used (a tie: none); ``agree:K/MAX`` the value
that reached K, else (MAX reached, or the item ran out of judgements) the majority of the used (a tie:
none); ``posterior:P/MAX`` the class of highest posterior given the used judgements (an exact tie:
none) under the *final* model, the one a study would aggregate with once collection ends.

Dawid-Skene (Dawid & Skene 1979) is fitted here by EM in numpy, seedless and deterministic:

- classes: every value of the judgements (and of the gold labels), sorted; a class prior
  pi_k = (sum_i T_ik + 1) / (N + K) over the non-gold items (Laplace, one pseudo-item per class);
- confusion ``kind``: ``full`` (each annotator w a row e_w[k] per true class k, shrunk towards the
  pooled rows: e_w[k, l] = (C_w[k, l] + s * E[k, l]) / (sum_l C_w[k, l] + s), s = ``shrink``), ``one-coin``
  (each annotator one accuracy a_w = (correct_w + s * a) / (n_w + s), the rest of the row spread
  evenly over the other classes) or ``pooled`` (one confusion E for everyone: anonymous raters);
  the pooled rows E[k, l] = (sum_w C_w[k, l] + 1) / (sum_w sum_l C_w[k, l] + K) and the pooled
  accuracy a = (sum_w correct_w + 1) / (sum_w n_w + 2) are Laplace-smoothed; C_w[k, l] is the soft count
  sum_i T_ik [w answered l on i];
- start: T_i = the shares of item i's votes (soft majority); gold items fixed at their label
  throughout (they train the confusion, not the prior);
- then M-step, E-step (T_ik ∝ pi_k prod_w e_w[k, vote_w]) until no prior or confusion entry moves by
  ``tol`` (1e-6) or ``max_iter`` (1000) rounds; the model is the last M-step's parameters.

Which judgements the model is fitted on (``fit``):

- ``used`` (the default: no judgement is seen before the policy collected it): the items, in the
  order of their first judgement, go in ``batches`` consecutive batches. The first batch is a pilot
  that collects up to MAX (no model exists yet); each later batch stops by the model fitted on the
  judgements used by the batches before it (and the gold judgements that came before its first
  judgement). Labels come from a final fit on every used judgement (and all gold judgements).
  Stopping on a rule that reads only the collected answers leaves the likelihood, and so EM on the
  collected answers, valid.
- ``all``: one model fitted on every judgement, used or not, for stopping and labels: what the
  issue's first wording asks for, and a leak (an item's unused judgements shape the confusion its
  stop is decided with). Kept to measure the leak.

Annotators the model has not seen (in ``used``, someone whose answers were all in later batches) answer
with the pooled rows (one-coin: the pooled accuracy).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

Judgement = tuple[Hashable, Hashable, Hashable]
"""(item, annotator, value), in the order the judgements were collected."""
ConfusionKind = Literal["full", "one-coin", "pooled"]
FitKind = Literal["used", "all"]
CONFUSION_KINDS: tuple[ConfusionKind, ...] = ("full", "one-coin", "pooled")
FIT_KINDS: tuple[FitKind, ...] = ("used", "all")
MAX_JUDGEMENTS = 1000
POLICY_FORMS = "fixed:K, agree:K/MAX or posterior:P/MAX (e.g. fixed:3, agree:2/3, posterior:0.95/3)"

FloatArray = NDArray[np.float64]


class PolicyError(ValueError):
    """A policy string that cannot be read; the message says why."""


@dataclass(frozen=True)
class FixedPolicy:
    """``fixed:K``: every item gets K judgements."""

    k: int

    @property
    def max(self) -> int:
        return self.k

    def __str__(self) -> str:
        return f"fixed:{self.k}"


@dataclass(frozen=True)
class AgreePolicy:
    """``agree:K/MAX``: until K judgements agree, at most MAX."""

    k: int
    max: int

    def __str__(self) -> str:
        return f"agree:{self.k}/{self.max}"


@dataclass(frozen=True)
class PosteriorPolicy:
    """``posterior:P/MAX``: until the Dawid-Skene posterior of the leading class is at least P, at
    most MAX."""

    p: float
    max: int

    def __str__(self) -> str:
        return f"posterior:{self.p:g}/{self.max}"


Policy = FixedPolicy | AgreePolicy | PosteriorPolicy


def _whole(text: str, policy: str, name: str) -> int:
    value = text.strip()
    if not re.fullmatch(r"[0-9]+", value) or not 1 <= int(value) <= MAX_JUDGEMENTS:
        raise PolicyError(
            f"policy {policy!r}: {name} must be a whole number from 1 to {MAX_JUDGEMENTS}, not {value!r}"
        )
    return int(value)


def _probability(text: str, policy: str) -> float:
    value = text.strip()
    p = float(value) if re.fullmatch(r"[0-9]*\.?[0-9]+([eE]-?[0-9]+)?", value) else math.nan
    if not 0.0 < p < 1.0:
        raise PolicyError(
            f"policy {policy!r}: P must be a probability strictly between 0 and 1 (e.g. 0.95), not {value!r}"
        )
    return p


def policy_parse(text: str) -> Policy:
    """The policy a string names; ``PolicyError`` saying what is wrong otherwise."""
    kind, colon, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if not colon or kind not in ("fixed", "agree", "posterior"):
        raise PolicyError(f"{text!r} is not a policy: use {POLICY_FORMS}")
    if kind == "fixed":
        if "/" in rest:
            raise PolicyError(f"policy {text!r}: fixed takes one number, fixed:K (e.g. fixed:3)")
        return FixedPolicy(_whole(rest, text, "K"))
    first, slash, second = rest.partition("/")
    form = "agree:K/MAX (e.g. agree:2/3)" if kind == "agree" else "posterior:P/MAX (e.g. posterior:0.95/3)"
    if not slash or "/" in second:
        raise PolicyError(f"policy {text!r}: {kind} takes two numbers, {form}")
    maximum = _whole(second, text, "MAX")
    if kind == "agree":
        k = _whole(first, text, "K")
        if k > maximum:
            raise PolicyError(
                f"policy {text!r}: K ({k}) must not exceed MAX ({maximum}): no item gets more than MAX "
                "judgements, so K of them could never agree"
            )
        return AgreePolicy(k, maximum)
    return PosteriorPolicy(_probability(first, text), maximum)


@dataclass(frozen=True)
class ReplaySettings:
    """How ``posterior`` policies fit Dawid-Skene (see the module docstring); ignored by the others."""

    confusion: ConfusionKind = "full"
    fit: FitKind = "used"
    batches: int = 10
    shrink: float = 2.0
    max_iter: int = 1000
    tol: float = 1e-6

    def check(self) -> None:
        """ValueError naming the first setting out of range."""
        if self.confusion not in CONFUSION_KINDS:
            raise ValueError(f"confusion must be one of {', '.join(CONFUSION_KINDS)}")
        if self.fit not in FIT_KINDS:
            raise ValueError(f"fit must be one of {', '.join(FIT_KINDS)}")
        if not 1 <= self.batches <= 10_000:
            raise ValueError("batches must be a whole number from 1 to 10000")
        if not (math.isfinite(self.shrink) and self.shrink > 0):
            raise ValueError("shrink must be a positive number of pseudo-answers")
        if self.max_iter < 1:
            raise ValueError("max_iter must be at least 1")
        if not (math.isfinite(self.tol) and self.tol > 0):
            raise ValueError("tol must be positive")


@dataclass(frozen=True)
class DawidSkeneModel:
    """A fitted Dawid-Skene model: class prior, pooled confusion and each annotator's confusion
    (``confusion[w][k, l]`` = P(w answers class l | the item's class is k))."""

    classes: tuple[Hashable, ...]
    prior: FloatArray
    pooled: FloatArray
    fallback: FloatArray
    confusion: dict[Hashable, FloatArray]
    kind: ConfusionKind
    iterations: int
    converged: bool

    def row(self, annotator: Hashable, value: Hashable) -> FloatArray:
        """P(``annotator`` answers ``value`` | class k), for every k."""
        matrix = self.confusion.get(annotator, self.fallback)
        return matrix[:, self.classes.index(value)]

    def posterior(self, votes: Sequence[tuple[Hashable, Hashable]]) -> FloatArray:
        """P(class k | the (annotator, value) votes) for every k."""
        log = np.log(self.prior).copy()
        for annotator, value in votes:
            log += np.log(self.row(annotator, value))
        log -= log.max()
        weights: FloatArray = np.exp(log)
        return weights / float(weights.sum())

    def summary(self) -> dict[str, Any]:
        """What a record of the fit needs: kind, rounds, the prior and the pooled confusion."""
        names = [_plain(c) for c in self.classes]
        return {
            "confusion": self.kind,
            "iterations": self.iterations,
            "converged": self.converged,
            "prior": {str(name): round(float(p), 6) for name, p in zip(names, self.prior, strict=True)},
            "pooled_confusion": {
                str(true): {str(seen): round(float(self.pooled[k, j]), 6) for j, seen in enumerate(names)}
                for k, true in enumerate(names)
            },
        }


def _plain(value: Hashable) -> Any:
    return list(value) if isinstance(value, tuple) else value


def class_order(values: Sequence[Hashable] | set[Hashable]) -> tuple[Hashable, ...]:
    """The classes, sorted (by type name and text when they do not compare)."""
    unique = set(values)
    try:
        return tuple(sorted(unique))  # type: ignore[type-var]
    except TypeError:
        return tuple(sorted(unique, key=lambda v: (type(v).__name__, repr(v))))


def dawid_skene_fit(
    judgements: Sequence[Judgement],
    *,
    classes: Sequence[Hashable],
    gold: Mapping[Hashable, Hashable] | None = None,
    kind: ConfusionKind = "full",
    shrink: float = 2.0,
    max_iter: int = 1000,
    tol: float = 1e-6,
) -> DawidSkeneModel:
    """Dawid-Skene by EM on ``judgements`` (see the module docstring for every choice); ``gold`` maps
    items of known class to it (their judgements train the confusion; they stay out of the prior)."""
    gold = gold or {}
    classes = tuple(classes)
    n_classes = len(classes)
    if n_classes == 0:
        raise ValueError("Dawid-Skene needs at least one class")
    class_index = {value: index for index, value in enumerate(classes)}
    item_index: dict[Hashable, int] = {}
    annotator_index: dict[Hashable, int] = {}
    rows = [
        (
            item_index.setdefault(item, len(item_index)),
            annotator_index.setdefault(annotator, len(annotator_index)),
            class_index[value],
        )
        for item, annotator, value in judgements
    ]
    n_items, n_annotators = len(item_index), len(annotator_index)
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    on_item, by, said = table[:, 0], table[:, 1], table[:, 2]
    is_gold = np.zeros(n_items, dtype=bool)
    gold_rows = np.zeros((n_items, n_classes))
    for item, index in item_index.items():
        if item in gold:
            is_gold[index] = True
            gold_rows[index, class_index[gold[item]]] = 1.0

    posterior = np.zeros((n_items, n_classes))
    np.add.at(posterior, (on_item, said), 1.0)
    posterior /= np.maximum(posterior.sum(axis=1, keepdims=True), 1.0)
    posterior[is_gold] = gold_rows[is_gold]

    previous: FloatArray | None = None
    converged = False
    iterations = 0
    prior = np.full(n_classes, 1.0 / n_classes)
    pooled = np.full((n_classes, n_classes), 1.0 / n_classes)
    fallback = pooled
    each = np.broadcast_to(pooled, (n_annotators, n_classes, n_classes))
    for _round in range(max_iter):
        iterations += 1
        # M-step: soft counts C[w, k, l] of annotator w answering l on items of class k.
        counts = np.zeros((n_annotators, n_classes, n_classes))
        for k in range(n_classes):
            counts[:, k, :] = np.bincount(
                by * n_classes + said, weights=posterior[on_item, k], minlength=n_annotators * n_classes
            ).reshape(n_annotators, n_classes)
        plain = ~is_gold
        prior = (posterior[plain].sum(axis=0) + 1.0) / (plain.sum() + n_classes)
        total = counts.sum(axis=0)
        pooled = (total + 1.0) / (total.sum(axis=1, keepdims=True) + n_classes)
        if kind == "full":
            fallback = pooled
            each = (counts + shrink * pooled[None, :, :]) / (counts.sum(axis=2, keepdims=True) + shrink)
        elif kind == "one-coin":
            correct = np.trace(counts, axis1=1, axis2=2)
            answered = counts.sum(axis=(1, 2))
            accuracy = (correct.sum() + 1.0) / (answered.sum() + 2.0)
            fallback = _one_coin(np.array([accuracy]), n_classes)[0]
            each = _one_coin((correct + shrink * accuracy) / (answered + shrink), n_classes)
        else:
            fallback = pooled
            each = np.broadcast_to(pooled, (n_annotators, n_classes, n_classes))
        parameters = np.concatenate([prior, pooled.ravel(), np.asarray(each).ravel()])
        if previous is not None and float(np.max(np.abs(parameters - previous))) < tol:
            converged = True
            break
        previous = parameters
        # E-step: log T_ik = log pi_k + sum of log e_w[k, vote].
        logs = np.log(each)
        log_posterior = np.tile(np.log(prior), (n_items, 1))
        for k in range(n_classes):
            log_posterior[:, k] += np.bincount(on_item, weights=logs[by, k, said], minlength=n_items)
        log_posterior -= log_posterior.max(axis=1, keepdims=True)
        posterior = np.exp(log_posterior)
        posterior /= posterior.sum(axis=1, keepdims=True)
        posterior[is_gold] = gold_rows[is_gold]

    confusion = (
        {}
        if kind == "pooled"
        else {annotator: np.array(each[index]) for annotator, index in annotator_index.items()}
    )
    return DawidSkeneModel(
        classes=classes,
        prior=prior,
        pooled=pooled,
        fallback=np.array(fallback),
        confusion=confusion,
        kind=kind,
        iterations=iterations,
        converged=converged,
    )


def _one_coin(accuracy: FloatArray, n_classes: int) -> FloatArray:
    """Confusion matrices with ``accuracy`` on the diagonal and the rest spread evenly."""
    if n_classes == 1:
        return np.ones((len(accuracy), 1, 1))
    off = (1.0 - accuracy) / (n_classes - 1)
    matrices = np.repeat(off[:, None, None], n_classes, axis=1).repeat(n_classes, axis=2)
    index = np.arange(n_classes)
    matrices[:, index, index] = accuracy[:, None]
    return matrices


def majority(values: Sequence[Hashable]) -> Hashable | None:
    """The value given more often than any other; None for a tie or no values."""
    if not values:
        return None
    ranked = Counter(values).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def counting_replay(
    values: Sequence[Hashable], policy: FixedPolicy | AgreePolicy
) -> tuple[int, Hashable | None]:
    """(used, label) of one item's values, in order, under a policy that counts answers."""
    if isinstance(policy, FixedPolicy):
        used = min(policy.k, len(values))
        return used, majority(values[:used])
    tally: Counter[Hashable] = Counter()
    for used, value in enumerate(values[: policy.max], start=1):
        tally[value] += 1
        if tally[value] >= policy.k:
            return used, value
    used = min(policy.max, len(values))
    return used, majority(values[:used])


def posterior_stop(
    votes: Sequence[tuple[Hashable, Hashable]], model: DawidSkeneModel | None, policy: PosteriorPolicy
) -> int:
    """How many of an item's votes ``policy`` uses: the first n whose leading posterior under
    ``model`` is at least P, else MAX (or all it has); without a model (a pilot), MAX."""
    most = min(policy.max, len(votes))
    if model is None:
        return most
    for used in range(1, most + 1):
        if float(model.posterior(votes[:used]).max()) >= policy.p:
            return used
    return most


def posterior_label(votes: Sequence[tuple[Hashable, Hashable]], model: DawidSkeneModel) -> Hashable | None:
    """The class of highest posterior given ``votes``; None for an exact tie (or no votes)."""
    if not votes:
        return None
    posterior = model.posterior(votes)
    leaders = np.flatnonzero(posterior == posterior.max())
    return model.classes[int(leaders[0])] if len(leaders) == 1 else None


@dataclass(frozen=True)
class ItemReplay:
    item: Hashable
    available: int
    used: int
    label: Hashable | None
    full_consensus: Hashable | None


@dataclass(frozen=True)
class ReplayResult:
    """The replay of one policy on one question's judgements (see the module docstring)."""

    policy: Policy
    items: list[ItemReplay]
    judgements_available: int
    judgements_used: int
    items_with_full_consensus: int
    same: int
    model: dict[str, Any] | None = None
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def saved_share(self) -> float | None:
        available = self.judgements_available
        return (available - self.judgements_used) / available if available else None

    @property
    def same_as_full_consensus(self) -> float | None:
        compared = self.items_with_full_consensus
        return self.same / compared if compared else None

    def same_by_label(self) -> list[dict[str, Any]]:
        """Per full-consensus label: its items and how many of them kept it (a rare class can lose
        many items while the overall share stays high)."""
        tally: dict[Hashable, list[int]] = {}
        for row in self.items:
            if row.full_consensus is not None:
                counts = tally.setdefault(row.full_consensus, [0, 0])
                counts[0] += 1
                counts[1] += row.label == row.full_consensus
        return [
            {"label": _plain(label), "items": tally[label][0], "same": tally[label][1]}
            for label in class_order(set(tally))
        ]

    def to_dict(self) -> dict[str, Any]:
        """The replay as JSON-ready data: the issue's fields, then the record of the fit."""
        return {
            "policy": str(self.policy),
            "items": len(self.items),
            "judgements_available": self.judgements_available,
            "judgements_used": self.judgements_used,
            "saved_share": self.saved_share,
            "same_as_full_consensus": self.same_as_full_consensus,
            "items_with_full_consensus": self.items_with_full_consensus,
            "same_by_label": self.same_by_label(),
            "per_item": [
                {"item": _plain(row.item), "used": row.used, "label": _plain(row.label)} for row in self.items
            ],
            "model": self.model,
            "left_out": self.left_out,
        }


def overlap_replay(
    judgements: Sequence[Judgement],
    policy: Policy,
    *,
    gold: Mapping[Hashable, Hashable] | None = None,
    settings: ReplaySettings | None = None,
) -> ReplayResult:
    """Replay ``policy`` on ``judgements`` in their order (see the module docstring). Judgements on
    ``gold`` items are left out of the replay; a posterior policy fits on them with their labels."""
    gold = gold or {}
    settings = settings or ReplaySettings()
    settings.check()
    order: dict[Hashable, list[tuple[Hashable, Hashable]]] = {}
    gold_judgements: list[tuple[int, Judgement]] = []
    for position, (item, annotator, value) in enumerate(judgements):
        if item in gold:
            gold_judgements.append((position, (item, annotator, value)))
        else:
            order.setdefault(item, []).append((annotator, value))
    first_position: dict[Hashable, int] = {}
    for position, (item, _annotator, _value) in enumerate(judgements):
        first_position.setdefault(item, position)

    model_record: dict[str, Any] | None = None
    if isinstance(policy, PosteriorPolicy):
        used, labels, model_record = _posterior_replay(
            order, first_position, gold, gold_judgements, policy, settings
        )
    else:
        used, labels = {}, {}
        for item, votes in order.items():
            used[item], labels[item] = counting_replay([value for _annotator, value in votes], policy)

    rows: list[ItemReplay] = []
    same = compared = 0
    for item, votes in order.items():
        full = majority([value for _annotator, value in votes])
        rows.append(ItemReplay(item, len(votes), used[item], labels[item], full))
        if full is not None:
            compared += 1
            same += labels[item] == full
    return ReplayResult(
        policy=policy,
        items=rows,
        judgements_available=sum(len(votes) for votes in order.values()),
        judgements_used=sum(used.values()),
        items_with_full_consensus=compared,
        same=same,
        model=model_record,
        left_out={"gold_judgements": len(gold_judgements)},
    )


def _posterior_replay(
    order: dict[Hashable, list[tuple[Hashable, Hashable]]],
    first_position: dict[Hashable, int],
    gold: Mapping[Hashable, Hashable],
    gold_judgements: list[tuple[int, Judgement]],
    policy: PosteriorPolicy,
    settings: ReplaySettings,
) -> tuple[dict[Hashable, int], dict[Hashable, Hashable | None], dict[str, Any]]:
    values: set[Hashable] = {value for votes in order.values() for _annotator, value in votes}
    values |= {value for _position, (_item, _annotator, value) in gold_judgements}
    values |= set(gold.values())
    classes = class_order(values) if values else ()

    def fit(batch: list[Judgement]) -> DawidSkeneModel:
        return dawid_skene_fit(
            batch,
            classes=classes,
            gold=gold,
            kind=settings.confusion,
            shrink=settings.shrink,
            max_iter=settings.max_iter,
            tol=settings.tol,
        )

    items = list(order)
    used: dict[Hashable, int] = {}
    fits: list[DawidSkeneModel] = []
    if not items:
        return used, {}, {"fit": settings.fit, "fits": 0}
    if settings.fit == "all":
        final = fit(
            [(item, a, v) for item, votes in order.items() for a, v in votes]
            + [judgement for _position, judgement in gold_judgements]
        )
        fits.append(final)
        for item in items:
            used[item] = posterior_stop(order[item], final, policy)
    else:
        n_batches = min(settings.batches, len(items))
        bounds = [len(items) * b // n_batches for b in range(n_batches + 1)]
        collected: list[Judgement] = []
        for b in range(n_batches):
            batch = items[bounds[b] : bounds[b + 1]]
            model = None
            if b > 0:
                start = first_position[batch[0]]
                model = fit(collected + [j for position, j in gold_judgements if position < start])
                fits.append(model)
            for item in batch:
                used[item] = posterior_stop(order[item], model, policy)
                collected.extend((item, a, v) for a, v in order[item][: used[item]])
        final = fit(collected + [judgement for _position, judgement in gold_judgements])
        fits.append(final)
    labels = {item: posterior_label(order[item][: used[item]], final) for item in items}
    record = {
        "fit": settings.fit,
        "batches": 1 if settings.fit == "all" else min(settings.batches, len(items)),
        "shrink": settings.shrink if settings.confusion != "pooled" else None,
        "fits": len(fits),
        "all_fits_converged": all(model.converged for model in fits),
        "final": final.summary(),
    }
    return used, labels, record
