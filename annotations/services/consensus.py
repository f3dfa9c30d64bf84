"""Consensus labels (SPEC 5) over the rules in ``metrics/consensus.py``, and adjudication.

A study chooses a rule per question: a ``ConsensusRuleChoice`` row (rule ``all-agree-set``, params
``{"agree_values": ["agree", "strongly_agree"]}`` for question ``visual``); the default is ``majority``
(ties stay unresolved). Only human judgements count. Recomputing gives the same rows; adjudicated
rows (an expert's decision) are never overwritten. Unresolved labels, and resolved ones that a
machine labeller contradicts, form the adjudication queue. Annotations on control items and by
annotators excluded from the study do not count (``selectors.counted_annotations``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotations.locks import study_lock
from annotations.models import (
    Annotator,
    ConsensusLabel,
    ConsensusRule,
    ConsensusRuleChoice,
    Item,
    Study,
    User,
)
from annotations.selectors.counted import counted_annotations
from annotations.selectors.coverage import item_judges, stopped_items
from annotations.services.annotation_writes import item_context
from common.errors import ValidationFailed
from common.planner_statistics import statistics_refresh
from metrics import consensus as rules
from protocols.answers import AnswerError, clean_answer
from protocols.schema import Question

RULES: tuple[str, ...] = tuple(ConsensusRule.values)
PRESET_RULES: dict[str, dict[str, dict[str, Any]]] = {
    # visage: an attribute is "visual" when every rater chose Agree or Strongly Agree.
    "visualness": {"visual": {"rule": "all-agree-set", "agree_values": ["agree", "strongly_agree"]}},
}


def rules_chosen(study: Study) -> dict[str, dict[str, Any]]:
    """The rules the study chose, by question key (``{"rule": name, **params}``), in the order chosen."""
    return {choice.question_key: choice.as_dict() for choice in study.consensus_rules.all()}


def rule_for(study: Study, question_key: str) -> dict[str, Any]:
    """The rule of one question: the study's choice, else the preset's default, else majority."""
    chosen = ConsensusRuleChoice.objects.filter(study=study, question_key=question_key).first()
    if chosen is not None:
        return chosen.as_dict()
    return dict(PRESET_RULES.get(study.preset, {}).get(question_key, {"rule": "majority"}))


def rule_check(rule: dict[str, Any]) -> dict[str, Any]:
    """The rule if it names a known rule with the parameters it needs; else ValidationFailed."""
    if not isinstance(rule, dict):
        raise ValidationFailed("a rule must be an object with a 'rule' name")
    name = rule.get("rule")
    if name not in RULES:
        raise ValidationFailed(f"rule must be one of {', '.join(RULES)}")
    if name == "at-least-k" and not (isinstance(rule.get("k"), int) and rule["k"] >= 1):
        raise ValidationFailed("the at-least-k rule needs k (a whole number >= 1)")
    if name == "all-agree-set" and not rule.get("agree_values"):
        raise ValidationFailed(
            "the all-agree-set rule needs agree_values (the options that count as agreeing)"
        )
    return rule


def _rule_function(rule: dict[str, Any]) -> rules.Rule:
    return rules.rule_named(rule["rule"], rule)


def _key(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


@transaction.atomic
def consensus_compute(
    *, study: Study, question: str | None = None, rule: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Compute (again) the consensus of one question or all; ``rule`` also becomes the study's choice.
    Returns counts per question: labels, resolved, unresolved, pending, adjudicated (kept).

    An item with fewer human judgements than the study's overlap is stored *pending* (no value,
    ``pending`` True, reason "pending: 1 of 3 judgements"): it is neither a label nor a disagreement for
    adjudication, and becomes one when its last judgement arrives and the consensus is computed again."""
    protocol = study.protocol_obj
    keys = [question] if question else [q.key for q in protocol.questions if q.kind != "boxes"]
    for key in keys:
        if not protocol.has_question(key):
            raise ValidationFailed(f"'{key}' is not a question of this study")
        if protocol.question(key).kind == "boxes":
            raise ValidationFailed(
                f"'{key}' holds boxes: agreement on boxes is measured by IoU, not a consensus"
            )
    if rule is not None:
        consensus_rule_choose(study=study, question_keys=keys, rule=rule)
    summary = {}
    for key in keys:
        summary[key] = _compute_question(study, protocol.question(key), rule_check(rule_for(study, key)))
    # Labels replaced by the thousand: the export pages them by key (common/planner_statistics.py).
    statistics_refresh(ConsensusLabel, rows=sum(counts["labels"] for counts in summary.values()))
    return summary


@transaction.atomic
def consensus_rule_choose(*, study: Study, question_keys: list[str], rule: dict[str, Any]) -> None:
    """Make ``rule`` (checked) the study's rule for each of ``question_keys``, replacing earlier choices."""
    rule = rule_check(rule)
    params = {key: value for key, value in rule.items() if key != "rule"}
    locked = study_lock(study.pk)
    for key in question_keys:
        ConsensusRuleChoice.objects.update_or_create(
            study=locked, question_key=key, defaults={"rule": rule["rule"], "params": params}
        )
    locked.save(update_fields=["updated_at"])


def _compute_question(study: Study, question: Question, rule: dict[str, Any]) -> dict[str, int]:
    annotations = (
        counted_annotations(study)
        .filter(question_key=question.key, annotator__kind=Annotator.Kind.HUMAN)
        .values_list("id", "item_id", "annotator_id", "value", "shown")
    )
    by_item: dict[int, list[tuple[int, int, Any, Any]]] = defaultdict(list)
    for annotation_id, item_id, annotator_id, value, shown in annotations:
        by_item[item_id].append((annotation_id, annotator_id, value, shown))
    adjudicated = set(
        ConsensusLabel.objects.filter(study=study, question_key=question.key, rule="adjudicated").values_list(
            "item_id", flat=True
        )
    )
    params = {k: v for k, v in rule.items() if k != "rule"}
    judges = item_judges(study)
    # Short of the overlap and not stopped by the study's overlap policy: pending (an item the policy
    # stopped early is settled with the judgements it has; docs/overlap.md).
    stopped = stopped_items(study)
    short = {
        item_id for item_id in by_item if judges.get(item_id, 0) < study.overlap and item_id not in stopped
    }
    results: dict[int, tuple[Any, bool, list[int], float | None, str, int]] = {}
    if rule["rule"] == "dawid-skene" and question.kind != "multi":
        outcome = rules.dawid_skene(
            [(item_id, row[1], _key(row[2])) for item_id, rows in by_item.items() for row in rows]
        )
        for item_id, rows in by_item.items():
            result = outcome.items.get(item_id)
            if result is None:
                continue
            originals = {_key(row[2]): row[2] for row in rows}
            value = originals.get(result.value) if result.resolved else None
            support = [row[0] for row in rows if result.resolved and _key(row[2]) == result.value]
            results[item_id] = (
                value,
                result.resolved,
                support,
                result.confidence,
                result.reason or "",
                len(rows),
            )
    else:
        if rule["rule"] == "dawid-skene":
            raise ValidationFailed("Dawid-Skene applies to single-answer questions, not to multi questions")
        decide = _rule_function(rule)
        for item_id, rows in by_item.items():
            if question.kind == "multi":
                shown = {row[1]: row[3] for row in rows if row[3] is not None} or None
                options = list(
                    dict.fromkeys(
                        key
                        for row in rows
                        for key in (row[3] if row[3] is not None else [o.key for o in question.options])
                    )
                )
                per = rules.per_option(
                    [(row[1], row[2] or []) for row in rows], options=options, rule=decide, shown=shown
                )
                resolved = all(result.resolved for result in per.values())
                value = [option for option, result in per.items() if result.value == 1] if resolved else None
                unresolved = [str(option) for option, result in per.items() if not result.resolved]
                support = [row[0] for row in rows if resolved and sorted(row[2] or []) == sorted(value or [])]
                results[item_id] = (
                    value,
                    resolved,
                    support,
                    None,
                    f"undecided options: {', '.join(unresolved)}" if unresolved else "",
                    len(rows),
                )
                continue
            originals = {_key(row[2]): row[2] for row in rows}
            result = decide([(row[1], _key(row[2])) for row in rows])
            value = (originals.get(result.value, result.value)) if result.resolved else None
            support = [row[0] for row in rows if row[1] in set(result.support)]
            results[item_id] = (
                value,
                result.resolved,
                support,
                result.confidence,
                result.reason or "",
                len(rows),
            )
    # An item with fewer judgements than the overlap gets no label yet, whatever the rule says of the
    # judgements it has: the missing ones could overturn it (metrics.consensus.pending).
    for item_id in short & results.keys():
        waiting = rules.pending(judges.get(item_id, 0), study.overlap)
        results[item_id] = (None, False, [], None, waiting.reason or "", results[item_id][5])
    ConsensusLabel.objects.filter(study=study, question_key=question.key).exclude(rule="adjudicated").delete()
    ConsensusLabel.objects.bulk_create(
        [
            ConsensusLabel(
                study=study,
                item_id=item_id,
                question_key=question.key,
                value=value,
                resolved=resolved,
                rule=rule["rule"],
                params=params,
                support=support,
                confidence=confidence,
                reason=reason,
                n_votes=n_votes,
                pending=item_id in short,
            )
            for item_id, (value, resolved, support, confidence, reason, n_votes) in results.items()
            if item_id not in adjudicated
        ],
        batch_size=2000,
    )
    computed = sum(1 for item_id in results if item_id not in adjudicated)
    pending = sum(1 for item_id in results if item_id in short and item_id not in adjudicated)
    resolved_count = sum(1 for item_id, row in results.items() if row[1] and item_id not in adjudicated)
    return {
        "labels": computed,
        "resolved": resolved_count,
        "unresolved": computed - resolved_count - pending,
        "pending": pending,
        "adjudicated": len(adjudicated),
    }


@transaction.atomic
def consensus_adjudicate(
    *, study: Study, item: Item, question_key: str, value: Any, user: User, note: str = ""
) -> ConsensusLabel:
    """An expert's decision: validated like an answer, it overrides the rule (``adjudicated``)."""
    protocol = study.protocol_obj
    if item.study_id != study.pk:
        raise ValidationFailed("the item is not in this study")
    if not protocol.has_question(question_key):
        raise ValidationFailed(f"'{question_key}' is not a question of this study")
    question = protocol.question(question_key)
    try:
        answer = clean_answer(question, value, context=item_context(item), protocol=protocol)
    except AnswerError as exc:
        raise ValidationFailed(exc.message, {question_key: exc.message}) from exc
    return _adjudicated_write(
        study=study, item=item, question_key=question_key, value=answer.value, user=user, note=note
    )


def _adjudicated_write(
    *,
    study: Study,
    item: Item,
    question_key: str,
    value: Any,
    user: User,
    note: str,
    params: dict[str, Any] | None = None,
) -> ConsensusLabel:
    """Write an expert's decision whose value has been validated (``clean_answer``'s value); ``params``
    records how it was made (the adjudication page: ``preselected`` and whether it was ``kept``)."""
    label, _ = ConsensusLabel.objects.update_or_create(
        item=item,
        question_key=question_key,
        defaults={
            "study": study,
            "value": value,
            "resolved": True,
            "rule": "adjudicated",
            "params": params or {},
            "support": [],
            "confidence": 1.0,
            "reason": "",
            "adjudicated_by": user,
            "note": note[:2000],
        },
    )
    ConsensusLabel.objects.filter(pk=label.pk).update(computed_at=timezone.now())
    return label


@transaction.atomic
def consensus_adjudicate_item(
    *,
    study: Study,
    item: Item,
    decisions: dict[str, Any],
    allowed: set[str],
    required: set[str],
    user: User,
    note: str = "",
    preselected: dict[str, Any] | None = None,
) -> list[ConsensusLabel]:
    """Several decisions on one item at once ("Save and next"): every question of ``required`` needs
    one, none may be outside ``allowed`` (the item's flagged questions, and the others when the expert
    asked to see them) and each is validated like an answer. All are written, or none (ValidationFailed
    with the problems by question key). ``preselected``: what the form offered per question (None: no
    pre-selection); each decision records it and whether the expert ``kept`` it or chose otherwise."""
    if item.study_id != study.pk:
        raise ValidationFailed("the item is not in this study")
    protocol = study.protocol_obj
    errors: dict[str, str] = {}
    for key in decisions:
        if key not in allowed:
            errors[key] = f"'{key}' is not a question open for a decision on this item"
    for key in sorted(required - decisions.keys()):
        errors[key] = "needs a decision"
    cleaned: dict[str, Any] = {}
    for key, value in decisions.items():
        if key in errors:
            continue
        try:
            cleaned[key] = clean_answer(
                protocol.question(key), value, context=item_context(item), protocol=protocol
            ).value
        except AnswerError as exc:
            errors[key] = exc.message
    if errors:
        raise ValidationFailed("; ".join(f"{key}: {message}" for key, message in errors.items()), errors)
    if not cleaned:
        raise ValidationFailed("no decision to record: choose an answer for at least one question")
    offered = preselected or {}
    return [
        _adjudicated_write(
            study=study,
            item=item,
            question_key=key,
            value=value,
            user=user,
            note=note,
            params={"preselected": offered.get(key), "kept": _same(offered.get(key), value)},
        )
        for key, value in cleaned.items()
    ]


def _same(offered: Any, value: Any) -> bool:
    """Whether a decision is the pre-selection (lists compared as sets: a multi answer's order is not
    a choice)."""
    if offered is None:
        return False
    if isinstance(offered, list) and isinstance(value, list):
        return sorted(map(str, offered)) == sorted(map(str, value))
    return bool(offered == value)
