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
- ``consensus@KEY=VALUE`` and ``judgements@KEY=VALUE``: the same, read from one *rater pool* only, the
  humans who gave the value VALUE of the attribute KEY to this study (``selectors.pools.attribute_pools``,
  the grouping of ``agreement --breakdown annotator:KEY``). A pool's consensus is never stored: it is the
  study's rule for the question (``consensus_rule_of``) run on the pool's own judgements, and an item is
  settled for the pool once ``ceil(overlap / number of pools)`` of its people judged it, or, where the
  study declares a quota for the pool (``Study.rater_pool_quotas`` on KEY), once it holds that quota
  (``PoolSpec``; docs/metrics.md, "Rater pools").

Only counted annotations are read (``selectors.counted.counted_annotations``): none on control items, none by
annotators excluded from the study; ``items_info`` lists the real items only.

Reads are flat ``values_list`` queries (one per question), so 100k annotations cost one query and a
Python pass, not 100k model instances.

``findings_reading(excluded)``: while a findings report is built, the questions ``labels_for`` and
``judgements_for`` are asked for are recorded (the report's reliability gate lists one entry per question the
findings read) and a question the researcher left out of the findings reads as unanswered (no labels), so
no table counts it (docs/metrics.md, "Reliability gate"); read from a pool, ``judgements_for`` gives only
the pool's judgements inside it (``findings_reading(pool=...)``), so a paper's section that reads
every judgement reads the pool's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import QuerySet

from annotations.models import Annotation, Annotator, ConsensusLabel, ConsensusRuleChoice, Item, Study
from annotations.selectors.counted import counted_annotations, counted_items
from annotations.selectors.coverage import item_judges, short_items
from annotations.selectors.pools import attribute_keys, attribute_pools
from common.errors import ValidationFailed
from metrics.consensus import Rule, dawid_skene, majority, per_option, rule_named

CONSENSUS = "consensus"
JUDGEMENTS = "judgements"
# A pool source: ``consensus@KEY=VALUE`` or ``judgements@KEY=VALUE``.
POOL_AT = "@"
DAWID_SKENE = "dawid-skene"


@dataclass
class FindingsReading:
    """The questions a findings report read (in order) and those it must not read (left out)."""

    excluded: frozenset[str] = frozenset()
    read: list[str] = field(default_factory=list)
    # Read from a pool: the pool source; inside the block every judgement read is its annotators' and
    # the human consensus is the pool's.
    pool: LabelSource | None = None

    def note(self, question_key: str) -> bool:
        """Record ``question_key`` as read; whether it is left out (then it reads as unanswered)."""
        if question_key not in self.read:
            self.read.append(question_key)
        return question_key in self.excluded


_READING: ContextVar[FindingsReading | None] = ContextVar("findings_reading", default=None)


@contextmanager
def findings_reading(
    excluded: Iterable[str] = (), *, pool: LabelSource | None = None
) -> Iterator[FindingsReading]:
    """Record the questions read inside the block; ``excluded`` ones read as unanswered; with ``pool`` (a
    pool source), every judgement read inside the block is its pool's and so is the human consensus
    (module docstring)."""
    reading = FindingsReading(frozenset(excluded), pool=pool if pool is not None and pool.pool else None)
    token = _READING.set(reading)
    try:
        yield reading
    finally:
        _READING.reset(token)


def _left_out(question_key: str) -> bool:
    reading = _READING.get()
    return reading.note(question_key) if reading is not None else False


def _reading_pool() -> LabelSource | None:
    reading = _READING.get()
    return reading.pool if reading is not None else None


@dataclass(frozen=True)
class PoolSpec:
    """The rater pool a source reads: the humans who gave ``value`` of the attribute ``key`` to the study.

    ``pools``: every value of ``key`` given (the pools); ``needed``: the judgements of the pool an item
    needs to be *settled* for it, ``ceil(overlap / len(pools))`` (at least 1): the study asks ``overlap``
    judgements per item of all pools together, so a pool's fair share of them is what its consensus waits
    for; an item with fewer (but some) is *partial* for the pool, its pool consensus pending. ``quota``:
    the pool's quota per item where the study declares one on ``key`` (then ``needed`` is the quota: the
    claim collects exactly that many of the pool's judgements per item, ``selectors/pool_quotas.py``).
    """

    key: str
    value: str
    members: tuple[int, ...]
    pools: tuple[str, ...]
    needed: int
    overlap: int
    quota: int | None = None

    @property
    def rule(self) -> str:
        """How ``needed`` was found, as a reader reads it."""
        if self.quota is not None:
            plural = "s" if self.quota != 1 else ""
            return f"the study's quota of the pool, {self.quota} judgement{plural} per item"
        return f"ceil(overlap {self.overlap} / {len(self.pools)} pools of {self.key})"

    @property
    def words(self) -> str:
        """The pool as a person reads it: 'the region = in pool'."""
        return f"the {self.key} = {self.value} pool"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "annotators": len(self.members),
            "pools": list(self.pools),
            "needed": self.needed,
            "overlap": self.overlap,
            "settled_rule": (
                f"an item is settled for the pool once {self.needed} of its people judged it: {self.rule}"
            ),
        }


@dataclass(frozen=True)
class LabelSource:
    """A parsed source: ``kind`` is consensus, judgements or labeller (then ``annotator_ids`` are set);
    ``pool`` set: a pool source (``consensus@KEY=VALUE``, ``judgements@KEY=VALUE``) reading that pool only.

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
    pool: PoolSpec | None = None

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


def pool_source_split(source: str | None) -> tuple[str, str, str] | None:
    """``(kind, key, value)`` of a pool source's name (``consensus@KEY=VALUE``, ``judgements@KEY=VALUE``;
    key and value trimmed, either possibly blank), or None for any other name. No query."""
    head, at, rest = (source or "").strip().partition(POOL_AT)
    if not at or head not in (CONSENSUS, JUDGEMENTS):
        return None
    key, _eq, value = rest.partition("=")
    return head, key.strip(), value.strip()


def _pool_refused(message: str, problem: str) -> ValidationFailed:
    return ValidationFailed(message, {"source": problem})


def _pool_source(study: Study, name: str, kind: str, key: str, value: str) -> LabelSource:
    """The pool source ``kind@key=value`` of ``study``, or refused with the reason and what exists."""
    shape = (
        f"name a rater pool as {kind}@KEY=VALUE: an attribute the annotators gave to this study and one "
        "of its values"
    )
    if "=" not in name.partition(POOL_AT)[2] or not key:
        raise _pool_refused(f"{name[:80]!r}: {shape} (e.g. {kind}@region=in)", "not KEY=VALUE")
    pools = attribute_pools(study, key)
    if not value:
        values = ", ".join(pools) or "none"
        raise _pool_refused(
            f"{name[:80]!r} names no value: {shape} (values of {key[:40]}: {values})", "no value"
        )
    if not pools:
        given = ", ".join(attribute_keys(study)) or "none"
        raise _pool_refused(
            f"{name[:80]!r}: no annotator of this study gave {key[:40]!r} (attributes given: {given})",
            "unknown attribute",
        )
    if value not in pools:
        raise _pool_refused(
            f"{name[:80]!r}: no annotator of this study gave {key[:40]} = {value[:40]!r} "
            f"(values of {key[:40]}: {', '.join(pools)})",
            "unknown pool",
        )
    quota = (study.rater_pool_quotas or {}).get(value) if study.rater_pool_attribute == key else None
    pool = PoolSpec(
        key=key,
        value=value,
        members=tuple(pools[value]),
        pools=tuple(pools),
        needed=quota if isinstance(quota, int) else max(1, math.ceil(study.overlap / len(pools))),
        overlap=study.overlap,
        quota=quota if isinstance(quota, int) else None,
    )
    return LabelSource(pool_source_name(kind, pool), kind, pool=pool)


def pool_source_name(kind: str, pool: PoolSpec) -> str:
    """The source name of ``pool`` read as ``kind`` (consensus or judgements): ``consensus@region=in``."""
    return f"{kind}{POOL_AT}{pool.key}={pool.value}"


def source_parse(study: Study, source: str | None) -> LabelSource:
    """Validate a source string for ``study``; an unknown labeller is refused with the known ones, a pool
    source (``consensus@KEY=VALUE``) naming no attribute or value given in the study with those given."""
    name = (source or CONSENSUS).strip()
    if name in (CONSENSUS, JUDGEMENTS):
        return LabelSource(name, name)
    split = pool_source_split(name)
    if split is not None:
        return _pool_source(study, name, *split)
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
    given), ordered by item. Inside ``findings_reading(pool=...)`` "every human" is the pool's."""
    if _left_out(question_key):
        return []
    pool = _reading_pool()
    if annotator_ids is None and pool is not None and pool.pool is not None:
        annotator_ids = pool.pool.members
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
    annotator_ids: Iterable[int] | None = None,
) -> LabelSet:
    """The labels ``decide`` (majority by default) gives each item from its judgements (or from those of
    ``annotator_ids``), now."""
    if kind == "boxes":
        raise ValidationFailed(f"'{question_key}' holds boxes: no consensus label is computed for boxes")
    by_item: dict[int, list[Judgement]] = defaultdict(list)
    for judgement in judgements_for(study, question_key, annotator_ids=annotator_ids, item_ids=item_ids):
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
    reading_pool = _reading_pool() if parsed.kind == CONSENSUS and parsed.pool is None else None
    if reading_pool is not None and reading_pool.pool is not None:
        # Inside a report read from a pool, the human consensus is the pool's.
        parsed = replace(reading_pool, kind=CONSENSUS, name=pool_source_name(CONSENSUS, reading_pool.pool))
    if parsed.kind == CONSENSUS and parsed.pool is not None:
        return _pool_labels(study, question_key, kind, parsed, parsed.pool)
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


def consensus_rule_of(study: Study, question_key: str) -> tuple[str, dict[str, Any]]:
    """The study's consensus rule of one question as (name, params): the rule the study chose for it, else
    the rule its stored consensus labels were computed with (the preset's default, once computed), else
    majority (what the pooled consensus computed on the fly uses). A pool's consensus runs it."""
    chosen = (
        ConsensusRuleChoice.objects.filter(study=study, question_key=question_key)
        .values_list("rule", "params")
        .first()
    )
    if chosen is None:
        chosen = (
            ConsensusLabel.objects.filter(study=study, question_key=question_key)
            .exclude(rule__in=("adjudicated", "pending"))
            .values_list("rule", "params")
            .first()
        )
    if chosen is None:
        return "majority", {}
    return str(chosen[0]), dict(chosen[1] or {})


def pool_judges(study: Study, pool: PoolSpec) -> dict[int, int]:
    """Item id -> the pool's people with a counted judgement on it (items none of them judged absent)."""
    return item_judges(study, pool.members)


def pool_short_items(study: Study, pool: PoolSpec, judges: dict[int, int] | None = None) -> frozenset[int]:
    """Items some of the pool's people judged, but fewer than ``pool.needed`` (their pool consensus is
    pending)."""
    judges = pool_judges(study, pool) if judges is None else judges
    return frozenset(item for item, n in judges.items() if 0 < n < pool.needed)


def _dawid_skene_labels(
    study: Study, question_key: str, source: LabelSource, members: Iterable[int]
) -> LabelSet:
    """Dawid-Skene fitted on every judgement of the pool on one single-answer question (as the stored
    consensus is fitted on everyone's), its labels of ``source.items``."""
    rows = judgements_for(study, question_key, annotator_ids=members)
    originals: dict[Hashable, Any] = {_hashable(j.value): j.value for j in rows}
    outcome = dawid_skene([(j.item_id, j.annotator_id, _hashable(j.value)) for j in rows])
    values: dict[int, Any] = {}
    for item_id in dict.fromkeys(j.item_id for j in rows):
        if source.items is not None and item_id not in source.items:
            continue
        result = outcome.items.get(item_id)
        values[item_id] = (
            originals.get(result.value, result.value) if result is not None and result.resolved else None
        )
    unresolved = sum(1 for value in values.values() if value is None)
    return LabelSet(source.name, question_key, values, None, len(values), unresolved)


def _pool_labels(study: Study, question_key: str, kind: str, source: LabelSource, pool: PoolSpec) -> LabelSet:
    """The pool's consensus of one question: the study's rule (``consensus_rule_of``) on the pool's own
    judgements, computed now; an item with fewer than ``pool.needed`` of them is pending (None, in
    ``pending``), or with ``source.provisional`` keeps the rule's label and is listed in ``partial``. An
    expert's adjudication settles the pooled consensus, not a pool's: it is not applied here."""
    name, params = consensus_rule_of(study, question_key)
    if name == DAWID_SKENE and kind != "multi":
        labels = _dawid_skene_labels(study, question_key, source, pool.members)
    else:
        try:
            decide = rule_named(name, params)
        except (ValueError, KeyError, TypeError):  # Dawid-Skene of a multi question, params of an older shape
            decide = majority
        labels = _rule_labels(
            study, question_key, kind, decide, item_ids=source.items, annotator_ids=pool.members
        )
    short = source.short if source.short is not None else pool_short_items(study, pool)
    waiting = frozenset(item for item in short if item in labels.values)
    values = dict(labels.values)
    shown = dict(labels.shown) if labels.shown is not None else None
    partial = frozenset(waiting) if source.provisional else frozenset()
    pending = frozenset(waiting - partial)
    for item in pending:
        values[item] = None
        if shown is not None:
            shown[item] = []
    unresolved = sum(1 for i, v in values.items() if v is None and i not in pending)
    return LabelSet(source.name, question_key, values, shown, len(values), unresolved, pending, partial)
