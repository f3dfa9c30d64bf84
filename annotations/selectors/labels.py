"""Selectors that turn a study's annotations into the inputs of the pure metric functions (``metrics/``).

A *label source* says whose labels a metric reads (SPEC 6):

- ``consensus`` (default): the human consensus of each (item, question). ``labels_for`` is the ONE place
  that decides it: the stored consensus labels (``ConsensusLabel``, computed by
  ``annotations.services.consensus`` with the study's rule per question, adjudications included) when the
  question has any, else a majority computed on the fly (``metrics.consensus.majority``; a multi
  question gets one majority per option among the annotators who were shown it).
- a machine labeller's name (``name`` or ``name@version``): that labeller's answers.
- ``judgements``: every individual human judgement (visage's likelihoods count them all);
  ``judgements_for`` returns them as flat rows.

Only counted annotations are read (``selectors.counted.counted_annotations``): none on control items, none by
annotators excluded from the study; ``items_info`` lists the real items only.

Reads are flat ``values_list`` queries (one per question), so 100k annotations cost one query and a
Python pass, not 100k model instances.

``findings_reading(excluded)``: while a findings report is built, the questions ``labels_for`` and
``judgements_for`` are asked for are recorded (the report's reliability gate lists one entry per question the
findings read) and a question the researcher left out of the findings reads as unanswered (no labels), so
no table counts it (docs/metrics.md, "Reliability gate").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from annotations.models import Annotation, Annotator, ConsensusLabel, Item, Study
from annotations.selectors.counted import counted_annotations, counted_items
from annotations.selectors.coverage import short_items
from common.errors import ValidationFailed
from metrics.consensus import Rule, majority, per_option, rule_named

CONSENSUS = "consensus"
JUDGEMENTS = "judgements"


@dataclass
class FindingsReading:
    """The questions a findings report read (in order) and those it must not read (left out)."""

    excluded: frozenset[str] = frozenset()
    read: list[str] = field(default_factory=list)

    def note(self, question_key: str) -> bool:
        """Record ``question_key`` as read; whether it is left out (then it reads as unanswered)."""
        if question_key not in self.read:
            self.read.append(question_key)
        return question_key in self.excluded


_READING: ContextVar[FindingsReading | None] = ContextVar("findings_reading", default=None)


@contextmanager
def findings_reading(excluded: Iterable[str] = ()) -> Iterator[FindingsReading]:
    """Record the questions read inside the block; ``excluded`` ones read as unanswered (module docstring)."""
    reading = FindingsReading(frozenset(excluded))
    token = _READING.set(reading)
    try:
        yield reading
    finally:
        _READING.reset(token)


def _left_out(question_key: str) -> bool:
    reading = _READING.get()
    return reading.note(question_key) if reading is not None else False


@dataclass(frozen=True)
class LabelSource:
    """A parsed source: ``kind`` is consensus, judgements or labeller (then ``annotator_ids`` are set).

    ``items``: the items findings count (None: every item; ``findings.report`` sets the settled ones, or
    settled and partial, ``annotations.selectors.coverage``); ``short``: items with fewer human judgements
    than the overlap (None: computed when needed), whose consensus is pending unless ``provisional``, when
    the rule is run on the judgements they have and the label is marked partial.
    """

    name: str
    kind: str
    annotator_ids: tuple[int, ...] = ()
    items: frozenset[int] | None = None
    short: frozenset[int] | None = None
    provisional: bool = False

    @property
    def is_machine(self) -> bool:
        return self.kind == "labeller"


@dataclass(frozen=True)
class LabelSet:
    """One adopted value per item for one question.

    ``values[item_id]`` is the value (None: unresolved or unanswered). For multi questions, ``shown``
    lists per item the options that have a decision (consensus: options with a resolved majority;
    labeller: the options it was shown), and ``values`` the selected ones among them.
    """

    source: str
    question_key: str
    values: dict[int, Any]
    shown: dict[int, list[str]] | None
    n_items: int
    n_unresolved: int
    # Items whose consensus waits for more judgements (value None), and those given a provisional label
    # from fewer judgements than the overlap (``LabelSource.provisional``).
    pending: frozenset[int] = frozenset()
    partial: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Judgement:
    item_id: int
    annotator_id: int
    value: Any
    shown: list[str] | None


@dataclass(frozen=True)
class ItemInfo:
    id: int
    external_id: str
    text: str
    prompt: str
    model_name: str
    condition: str
    metadata: dict[str, Any]


def machine_labellers(study: Study) -> list[str]:
    """Names of the machine labellers that answered in ``study`` (``name@version`` when versioned)."""
    rows = (
        Annotator.objects.filter(kind=Annotator.Kind.MACHINE, annotations__study=study)
        .values_list("name", "version")
        .distinct()
        .order_by("name", "version")
    )
    return [f"{name}@{version}" if version else name for name, version in rows]


def machine_labellers_of(studies: Iterable[Study]) -> list[str]:
    """``machine_labellers`` over several studies at once (one query), each name once."""
    rows = (
        Annotator.objects.filter(kind=Annotator.Kind.MACHINE, annotations__study__in=list(studies))
        .values_list("name", "version")
        .distinct()
        .order_by("name", "version")
    )
    return [f"{name}@{version}" if version else name for name, version in rows]


def source_parse(study: Study, source: str | None) -> LabelSource:
    """Validate a source string for ``study``; an unknown labeller is refused with the known ones."""
    name = (source or CONSENSUS).strip()
    if name in (CONSENSUS, JUDGEMENTS):
        return LabelSource(name, name)
    labeller, _, version = name.partition("@")
    machines = Annotator.objects.filter(kind=Annotator.Kind.MACHINE, name=labeller, annotations__study=study)
    if version:
        machines = machines.filter(version=version)
    ids = tuple(sorted(set(machines.values_list("id", flat=True))))
    if len(ids) != 1:
        known = ", ".join([CONSENSUS, JUDGEMENTS, *machine_labellers(study)])
        problem = (
            "has several versions here; name one as name@version" if ids else "is not a source of this study"
        )
        raise ValidationFailed(f"{name!r} {problem} (sources: {known})", {"source": problem})
    return LabelSource(name, "labeller", ids)


def labeller_named(study: Study, name: str) -> Annotator:
    """The machine labeller ``name[@version]`` of ``study`` (``source_parse``'s rule; refused otherwise)."""
    parsed = source_parse(study, name)
    if not parsed.is_machine:
        raise ValidationFailed(f"{name[:64]!r} is not a machine labeller", {"labeller": "not a labeller"})
    return Annotator.objects.get(pk=parsed.annotator_ids[0])


def items_info(study: Study) -> dict[int, ItemInfo]:
    """Every item of the study with the fields metrics group by (one query)."""
    rows = counted_items(study).values_list(
        "id", "external_id", "text", "prompt", "model_name", "condition", "metadata"
    )
    return {row[0]: ItemInfo(*row) for row in rows}


def _annotations(study: Study, question_key: str) -> QuerySet[Annotation]:
    return counted_annotations(study).filter(question_key=question_key)


def judgements_for(
    study: Study,
    question_key: str,
    *,
    annotator_ids: Iterable[int] | None = None,
    item_ids: Iterable[int] | None = None,
) -> list[Judgement]:
    """Every human judgement of one question (or those of ``annotator_ids``; on ``item_ids`` only when
    given), ordered by item."""
    if _left_out(question_key):
        return []
    qs = _annotations(study, question_key)
    if item_ids is not None:
        wanted = set(item_ids)
        return [
            j for j in judgements_for(study, question_key, annotator_ids=annotator_ids) if j.item_id in wanted
        ]
    qs = (
        qs.filter(annotator_id__in=list(annotator_ids))
        if annotator_ids is not None
        else qs.filter(annotator__kind=Annotator.Kind.HUMAN)
    )
    return [
        Judgement(*row)
        for row in qs.order_by("item_id", "annotator_id").values_list(
            "item_id", "annotator_id", "value", "shown"
        )
    ]


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _item_choice_keys(study: Study, question_key: str, item_ids: Iterable[int]) -> dict[int, list[str]]:
    """Every option key of a multi question per item (for answers that did not record ``shown``)."""
    question = study.protocol_obj.question(question_key)
    rows = Item.objects.filter(study=study, id__in=list(item_ids)).values_list("id", "metadata")
    return {item_id: question.choice_keys(metadata) for item_id, metadata in rows}


def _rule_labels(
    study: Study,
    question_key: str,
    kind: str,
    decide: Rule = majority,
    item_ids: Iterable[int] | None = None,
) -> LabelSet:
    """The labels ``decide`` (majority by default) gives each item from its judgements, now."""
    if kind == "boxes":
        raise ValidationFailed(f"'{question_key}' holds boxes: no consensus label is computed for boxes")
    by_item: dict[int, list[Judgement]] = defaultdict(list)
    for judgement in judgements_for(study, question_key, item_ids=item_ids):
        by_item[judgement.item_id].append(judgement)
    values: dict[int, Any] = {}
    unresolved = 0
    if kind == "multi":
        shown: dict[int, list[str]] = {}
        unshown = {item_id for item_id, rows in by_item.items() if any(j.shown is None for j in rows)}
        all_keys = _item_choice_keys(study, question_key, unshown) if unshown else {}
        for item_id, rows in by_item.items():
            selections = [(j.annotator_id, list(j.value or [])) for j in rows]
            every = all_keys.get(item_id, [])
            shown_map = {j.annotator_id: j.shown if j.shown is not None else every for j in rows}
            options = list(dict.fromkeys(key for j in rows for key in shown_map[j.annotator_id]))
            results = per_option(selections, options=options, rule=decide, shown=shown_map)
            decided = [option for option, result in results.items() if result.resolved]
            unresolved += len(options) - len(decided)
            shown[item_id] = [str(o) for o in decided]
            values[item_id] = [str(o) for o in decided if results[o].value == 1]
        return LabelSet(CONSENSUS, question_key, values, shown, len(by_item), unresolved)
    for item_id, rows in by_item.items():
        originals = {_hashable(j.value): j.value for j in rows}
        result = decide([(j.annotator_id, _hashable(j.value)) for j in rows])
        values[item_id] = originals.get(result.value, result.value) if result.resolved else None
        unresolved += not result.resolved
    return LabelSet(CONSENSUS, question_key, values, None, len(by_item), unresolved)


def _stored_labels(study: Study, question_key: str, kind: str) -> LabelSet | None:
    rows = list(
        ConsensusLabel.objects.filter(
            study=study, question_key=question_key, item__control_kind=""
        ).values_list("item_id", "value", "resolved")
    )
    if not rows:
        return None
    values = {item_id: value if resolved else None for item_id, value, resolved in rows}
    shown = None
    if kind == "multi":
        every = _item_choice_keys(study, question_key, values)
        shown = {item_id: every.get(item_id, []) for item_id in values}
    unresolved = sum(1 for _item, _value, resolved in rows if not resolved)
    return LabelSet(CONSENSUS, question_key, values, shown, len(rows), unresolved)


def _stored_rule(study: Study, question_key: str) -> Rule:
    """The per-item rule the stored labels of a question were computed with (majority if none applies)."""
    row = (
        ConsensusLabel.objects.filter(study=study, question_key=question_key)
        .exclude(rule__in=("adjudicated", "pending"))
        .values_list("rule", "params")
        .first()
    )
    if row is None:
        return majority
    try:
        return rule_named(row[0], row[1] or {})
    except (ValueError, KeyError, TypeError):  # dawid-skene, or params of an older shape
        return majority


def _settle(study: Study, question_key: str, kind: str, labels: LabelSet, source: LabelSource) -> LabelSet:
    """Consensus of items with fewer judgements than the overlap made pending (None), or provisional."""
    short = source.short if source.short is not None else short_items(study)
    adjudicated = set(
        ConsensusLabel.objects.filter(study=study, question_key=question_key, rule="adjudicated").values_list(
            "item_id", flat=True
        )
    )
    waiting = {i for i in short if i not in adjudicated}
    if source.items is not None:
        waiting &= source.items
    values = dict(labels.values)
    shown = dict(labels.shown) if labels.shown is not None else None
    partial: frozenset[int] = frozenset()
    if source.provisional and waiting:
        rule = _stored_rule(study, question_key)
        provisional = _rule_labels(study, question_key, kind, rule, item_ids=waiting)
        partial = frozenset(provisional.values)
        values.update(provisional.values)
        if shown is not None and provisional.shown is not None:
            shown.update(provisional.shown)
    pending = frozenset(waiting - partial)
    for item in pending:
        values[item] = None
        if shown is not None:
            shown[item] = []
    if source.items is not None:
        values = {i: v for i, v in values.items() if i in source.items}
        if shown is not None:
            shown = {i: v for i, v in shown.items() if i in source.items}
    unresolved = sum(1 for i, v in values.items() if v is None and i not in pending)
    return LabelSet(labels.source, question_key, values, shown, len(values), unresolved, pending, partial)


def labels_for(study: Study, question_key: str, source: LabelSource | str = CONSENSUS) -> LabelSet:
    """The adopted label of every answered item for one question, from ``source`` (not ``judgements``).

    This is the single switch point for where consensus labels come from (see the module docstring). An
    item with fewer human judgements than the study's overlap has no consensus yet: its value is None and
    it is listed in ``pending`` (or, with ``source.provisional``, the rule's label from the judgements it
    has, listed in ``partial``), whatever the stored row says. ``source.items`` narrows the items.
    """
    parsed = source if isinstance(source, LabelSource) else source_parse(study, source)
    protocol = study.protocol_obj
    if not protocol.has_question(question_key):
        raise ValidationFailed(f"'{question_key}' is not a question of this study")
    kind = protocol.question(question_key).kind
    if parsed.kind == JUDGEMENTS:
        raise ValidationFailed("labels_for gives one label per item; use judgements_for for every judgement")
    if _left_out(question_key):
        return LabelSet(parsed.name, question_key, {}, {} if kind == "multi" else None, 0, 0)
    if parsed.kind == CONSENSUS:
        stored = _stored_labels(study, question_key, kind)
        labels = stored if stored is not None else _rule_labels(study, question_key, kind)
        return _settle(study, question_key, kind, labels, parsed)
    rows = judgements_for(study, question_key, annotator_ids=parsed.annotator_ids, item_ids=parsed.items)
    values = {j.item_id: j.value for j in rows}
    shown = None
    if kind == "multi":
        every = _item_choice_keys(study, question_key, {j.item_id for j in rows if j.shown is None})
        shown = {j.item_id: list(j.shown) if j.shown is not None else every.get(j.item_id, []) for j in rows}
    return LabelSet(parsed.name, question_key, values, shown, len(values), 0)
