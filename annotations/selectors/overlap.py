"""A study's overlap policy on the claim path: the question it reads, how many judgements each item may
still take, the Dawid-Skene model a posterior policy stops by, and the replay of a policy on the study's
own answers (docs/overlap.md, "A study under a policy").

The policies are ``metrics/overlap_policy.py``'s: ``fixed:K`` (a study's ``overlap_policy`` is empty and
its ``overlap`` is K, as before policies existed), ``agree:K/MAX`` and ``posterior:P/MAX`` (stored in
``Study.overlap_policy``; the study's ``overlap`` is then MAX). The claim reads one number per item,
``Item.policy_slots``: the judgements the item may hold now, that is the ones it has plus the *fewest more
after which its policy could stop* (all of them the same answer; for ``posterior``, each from an
annotator the model knows only as the pool's average). The submit computes it here, in plain Python,
from the item's stored votes (``Item.policy_votes``: annotator -> answer to the policy's question), the
study it already holds and, for ``posterior``, the model stored on the study: no statement of its own.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db.models import Exists, OuterRef

from annotations.models import Annotation, Annotator, Assignment, ControlKind, Study
from annotations.selectors.counted import active_exclusions, counted_annotations
from metrics.overlap_policy import (
    AgreePolicy,
    ConfusionKind,
    DawidSkeneModel,
    FixedPolicy,
    Judgement,
    Policy,
    PolicyError,
    PosteriorPolicy,
    ReplaySettings,
    class_order,
    dawid_skene_fit,
    overlap_replay,
    policy_parse,
)
from protocols.schema import Protocol, Question

# The kinds of question a policy can read: one answer per judgement, compared whole.
POLICY_KINDS = ("single", "binary", "likert")


@lru_cache(maxsize=256)
def _parsed(text: str) -> Policy:
    return policy_parse(text)


def study_policy(study: Study) -> Policy:
    """The study's policy: ``fixed:overlap`` when it names none."""
    if not study.overlap_policy:
        return FixedPolicy(study.overlap)
    return _parsed(study.overlap_policy)


def policy_questions(protocol: Protocol) -> list[Question]:
    """The questions a policy may read (single, binary or likert), in protocol order."""
    return [question for question in protocol.questions if question.kind in POLICY_KINDS]


def policy_question(study: Study, key: str | None = None) -> Question | None:
    """The question the study's policy reads (or ``key``'s): the one named, else the protocol's first
    single, binary or likert question; None when the protocol has none (or ``key`` is not one)."""
    key = study.overlap_question if key is None else key
    eligible = policy_questions(study.protocol_obj)
    if key:
        return next((question for question in eligible if question.key == key), None)
    return eligible[0] if eligible else None


def question_classes(question: Question) -> list[Hashable]:
    """The answers a question can take, as far as the protocol declares them (options from an item's
    metadata are not: the model learns those from the answers)."""
    if question.kind == "binary":
        return [0, 1]
    return list(question.choice_keys({})) if question.options_from is None else []


# --- The model a posterior policy stops by ---------------------------------------------------------


@dataclass(frozen=True)
class StoredModel:
    """A Dawid-Skene model as ``Study.overlap_model`` holds it (``model_record``), read for the submit:
    plain lists, so a posterior costs a few logarithms and no numpy."""

    classes: list[Any]
    prior: list[float]
    fallback: list[list[float]]
    confusion: dict[str, list[list[float]]]

    @classmethod
    def of(cls, study: Study) -> StoredModel | None:
        data = study.overlap_model or {}
        if not data.get("classes"):
            return None
        return cls(data["classes"], data["prior"], data["fallback"], data.get("confusion") or {})

    def log_posterior(self, votes: Mapping[str, Any]) -> list[float]:
        """log P(class) + sum of log P(vote | class), unnormalised; a vote the model has no class for
        (an option added since the fit) tells it nothing and is left out."""
        logs = [math.log(p) for p in self.prior]
        for annotator, value in votes.items():
            if value not in self.classes:
                continue
            column = self.classes.index(value)
            rows = self.confusion.get(annotator, self.fallback)
            for k, row in enumerate(rows):
                logs[k] += math.log(row[column])
        return logs

    def leading(self, logs: list[float]) -> float:
        """The largest posterior probability given unnormalised log posteriors."""
        top = max(logs)
        return 1.0 / sum(math.exp(value - top) for value in logs)

    def average_vote(self, value: Any) -> list[float]:
        """log P(an average annotator answers ``value`` | class), for every class."""
        column = self.classes.index(value)
        return [math.log(row[column]) for row in self.fallback]


def model_summary(study: Study) -> dict[str, Any] | None:
    """What a researcher reads of a posterior policy's model: when and on what it was fitted, its classes,
    prior and opening; None when the study has none (another policy, or no answer yet: a pilot)."""
    data = study.overlap_model or {}
    if not data.get("classes"):
        return None
    keys = ("fitted_at", "judgements", "gold_items", "kind", "converged", "classes", "prior", "opening")
    return {key: data.get(key) for key in keys}


def model_record(
    model: DawidSkeneModel, *, judgements: int, gold_items: int, fitted_at: str
) -> dict[str, Any]:
    """``Study.overlap_model``: the classes, prior, fallback (pooled) rows and each annotator's rows,
    with how and on what it was fitted."""
    return {
        "classes": list(model.classes),
        "prior": [float(p) for p in model.prior],
        "fallback": [[float(p) for p in row] for row in model.fallback],
        "confusion": {
            str(annotator): [[float(p) for p in row] for row in matrix]
            for annotator, matrix in model.confusion.items()
        },
        "kind": model.kind,
        "iterations": model.iterations,
        "converged": model.converged,
        "judgements": judgements,
        "gold_items": gold_items,
        "fitted_at": fitted_at,
    }


# --- What an item still wants --------------------------------------------------------------------


def _agree_stops(policy: AgreePolicy, votes: Mapping[str, Any], n: int) -> bool:
    tally: dict[Any, int] = {}
    for value in votes.values():
        tally[value] = tally.get(value, 0) + 1
    return n >= policy.max or max(tally.values(), default=0) >= policy.k


def _posterior_more(
    policy: PosteriorPolicy, votes: Mapping[str, Any], n: int, model: StoredModel | None
) -> int:
    """The fewest more judgements after which ``policy`` could stop (0: it stops now). As in the replay,
    an item stops only on an answer, never on the prior alone."""
    room = max(policy.max - n, 0)
    if model is None or room == 0:
        return room  # a pilot (no model yet) collects up to MAX: the replay's first batch
    logs = model.log_posterior(votes)
    if any(value in model.classes for value in votes.values()) and model.leading(logs) >= policy.p:
        return 0
    best = room
    for value in model.classes:
        step = model.average_vote(value)
        trial = list(logs)
        for more in range(1, best):
            trial = [a + b for a, b in zip(trial, step, strict=True)]
            if model.leading(trial) >= policy.p:
                best = more
                break
    return best


def policy_slots(policy: Policy, votes: Mapping[str, Any], judgements: int, model: StoredModel | None) -> int:
    """The judgements an item with ``judgements`` submitted and these ``votes`` may hold now under
    ``policy``: those it has plus the fewest more after which the policy could stop. Equal to
    ``judgements`` when the policy stops the item (it wants no more)."""
    n = judgements
    if isinstance(policy, FixedPolicy):
        return max(policy.k, n)
    if isinstance(policy, AgreePolicy):
        if _agree_stops(policy, votes, n):
            return n
        tally: dict[Any, int] = {}
        for value in votes.values():
            tally[value] = tally.get(value, 0) + 1
        return n + min(policy.max - n, policy.k - max(tally.values(), default=0))
    return n + _posterior_more(policy, votes, n, model)


_READ = object()


def policy_opening(study: Study, *, stored: Any = _READ) -> int:
    """The slots of an item nobody has judged under the study's policy (``Item.policy_slots`` empty):
    the overlap under ``fixed:K``, K under ``agree:K/MAX``, under ``posterior`` the fewest agreeing
    average judgements that reach P (``overlap_model["opening"]``; MAX while no model is fitted).
    ``stored``: that opening as a query read it, when the study was read without its model."""
    policy = study_policy(study)
    if isinstance(policy, FixedPolicy):
        return study.overlap
    if isinstance(policy, AgreePolicy):
        return policy.k
    opening = (study.overlap_model or {}).get("opening") if stored is _READ else stored
    return int(opening) if opening else policy.max


def votes_with(votes: Mapping[str, Any] | None, annotator_id: int, answer: Any) -> dict[str, Any]:
    """``votes`` with this annotator's answer to the policy's question (none: their vote removed)."""
    changed = dict(votes or {})
    if is_vote(answer):
        changed[str(annotator_id)] = answer
    else:
        changed.pop(str(annotator_id), None)
    return changed


@dataclass(frozen=True)
class ItemPolicyState:
    """What a submit writes on the item: its votes, its slots and whether its policy stopped."""

    votes: dict[str, Any]
    slots: int | None
    stopped: bool


def item_policy_state(
    study: Study, votes: Mapping[str, Any], judgements: int, model: StoredModel | None = None
) -> ItemPolicyState:
    """The item's stored state after a submit (or a recount) under the study's policy; under ``fixed:K``
    nothing is kept (the overlap decides, as before policies)."""
    policy = study_policy(study)
    if isinstance(policy, FixedPolicy):
        return ItemPolicyState({}, None, False)
    if model is None and isinstance(policy, PosteriorPolicy):
        model = StoredModel.of(study)
    if judgements == 0 and not votes:
        return ItemPolicyState({}, None, False)  # the opening: the claim passes it for every such item
    slots = policy_slots(policy, votes, judgements, model)
    return ItemPolicyState(dict(votes), slots, slots <= judgements)


# --- Reads for the fit, the recount and the replay -----------------------------------------------


def policy_votes(study: Study, question_key: str) -> dict[int, dict[str, Any]]:
    """Item id -> {annotator id: answer to ``question_key``} of the people whose judgement of the item is
    submitted (the judgements ``Item.judgements`` counts) and who are not excluded. One query."""
    submitted = Assignment.objects.filter(
        item_id=OuterRef("item_id"), annotator_id=OuterRef("annotator_id"), status=Assignment.Status.SUBMITTED
    )
    rows = (
        counted_annotations(study)
        .filter(question_key=question_key, annotator__kind=Annotator.Kind.HUMAN)
        .filter(Exists(submitted))
        .order_by("item_id", "created_at", "id")
        .values_list("item_id", "annotator_id", "value")
    )
    votes: dict[int, dict[str, Any]] = {}
    for item_id, annotator_id, value in rows.iterator(chunk_size=5000):
        if is_vote(value):
            votes.setdefault(item_id, {})[str(annotator_id)] = value
    return votes


def is_vote(value: Any) -> bool:
    """Whether an answer is one a policy counts: an option key or a number (a binary answer is 0 or 1)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class StudyAnswers:
    """One question's human answers in a study, in the order they were given (gold items' among them),
    and the gold items' labels."""

    judgements: list[Judgement]
    gold: dict[Hashable, Hashable]

    @property
    def real(self) -> int:
        """Answers on real items (not gold)."""
        return sum(1 for item, _annotator, _value in self.judgements if item not in self.gold)


def study_answers(study: Study, question_key: str) -> StudyAnswers:
    """The human answers to ``question_key`` (item id, annotator id, answer) on real and gold items, in the
    order they were first given, by annotators not excluded, and each gold item's label
    (``Item.control_answers``). One query."""
    rows = (
        Annotation.objects.filter(
            study=study,
            question_key=question_key,
            annotator__kind=Annotator.Kind.HUMAN,
            item__control_kind__in=["", ControlKind.GOLD],
        )
        .exclude(annotator_id__in=active_exclusions(study).values("annotator_id"))
        .order_by("created_at", "id")
        .values_list("item_id", "annotator_id", "value", "item__control_kind", "item__control_answers")
    )
    judgements: list[Judgement] = []
    gold: dict[Hashable, Hashable] = {}
    for item, annotator, value, kind, expected in rows.iterator(chunk_size=5000):
        if not is_vote(value):
            continue
        if kind:
            label = (expected or {}).get(question_key)
            if not is_vote(label):
                continue  # a gold item without this question's answer: neither gold nor real
            gold[item] = label
        judgements.append((item, str(annotator), value))
    return StudyAnswers(judgements, gold)


def policy_model_record(
    study: Study,
    question: Question,
    policy: PosteriorPolicy,
    *,
    fitted_at: str,
    confusion: ConfusionKind = "full",
) -> dict[str, Any]:
    """``Study.overlap_model`` for ``policy``: Dawid-Skene (``metrics.overlap_policy.dawid_skene_fit``, the
    replay's defaults) on the study's human answers to ``question`` and its gold items (their answers
    train the confusion), with the opening slots it implies; empty before any answer (a pilot: MAX)."""
    answers = study_answers(study, question.key)
    if not answers.real:
        return {}
    values = {value for _item, _annotator, value in answers.judgements}
    values |= set(answers.gold.values()) | set(question_classes(question))
    settings = ReplaySettings(confusion=confusion)
    model = dawid_skene_fit(
        answers.judgements,
        classes=class_order(values),
        gold=answers.gold,
        kind=settings.confusion,
        shrink=settings.shrink,
        max_iter=settings.max_iter,
        tol=settings.tol,
    )
    record = model_record(model, judgements=answers.real, gold_items=len(answers.gold), fitted_at=fitted_at)
    stored = StoredModel(record["classes"], record["prior"], record["fallback"], record["confusion"])
    record["opening"] = policy_slots(policy, {}, 0, stored)
    return record


def study_replay(
    study: Study, *, policy: str, question_key: str = "", confusion: ConfusionKind = "full"
) -> dict[str, Any]:
    """``metrics.overlap_policy.overlap_replay`` of ``policy`` on the study's own answers to one question
    (the first the policies read, when none is named), in the order they were given, with its gold items
    (what ``manage.py replay_overlap`` does with a file): the study page's replay. ``PolicyError`` for a
    policy or question it cannot replay."""
    parsed = policy_parse(policy)
    question = policy_question(study, question_key)
    if question is None:
        raise PolicyError(
            f"question {question_key!r} cannot be replayed: a policy reads a single, binary or likert one"
            if question_key
            else "this protocol has no single, binary or likert question for a policy to read"
        )
    answers = study_answers(study, question.key)
    settings = ReplaySettings(confusion=confusion)
    result = overlap_replay(answers.judgements, parsed, gold=answers.gold, settings=settings)
    report = {"question": question.key} | result.to_dict()
    report["same_by_label"] = [
        row | {"share": row["same"] / row["items"] if row["items"] else None}
        for row in report["same_by_label"]
    ]
    return report
