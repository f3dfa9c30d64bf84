"""The "machine + human sample" source ``ppi:LABELLER``: findings that are means or proportions estimated
from a labeller's labels on every item plus the human consensus on the study's validation sample,
weighted by the sample's stored inclusion probabilities (``metrics/ppi.py``; docs/metrics.md, "Machine +
human sample (PPI)").

Tables: ``ppi_estimates`` (per question, option and group: the prevalence of each option of a single,
binary or multi question, the mean scale position of a likert question; groups: all items, each
condition, each model, each identity), ``ppi_differences`` (each condition against ``base``, else the
first, and each model against the first), ``ppi_accuracy`` (the labeller's accuracy against the consensus,
design-weighted, human-only: nothing stands in for correctness on unlabelled items). Every row carries the
PPI++ estimate and 95% interval, the human-only one beside it, the machine-only mean, lambda, n people- and
machine-labelled, the effective sample size and its gain, and how many more human labels would bring the
interval to ``width``.

Refused (ValidationFailed, a 400 on the page and API): a study without a validation sample, a sample whose
inclusion probabilities are unknown (people labelled what they chose, a sample drawn before designs were
stored, or one restored from an export), a labeller that is not a source of the study.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from django.conf import settings

from annotations.models import Study, ValidationSample
from annotations.selectors.labels import (
    CONSENSUS,
    ItemInfo,
    LabelSet,
    LabelSource,
    labels_for,
    machine_labellers_of,
)
from common.checked_input import whole_number_from_text
from common.errors import ValidationFailed
from findings.tables import Column, Method, PaperFindings, Table
from metrics.ppi import PpiEstimate, labels_needed, ppi_difference, ppi_mean

PREFIX = "ppi:"
DEFAULT_WIDTH = 0.1
# A row (a group) rests on at least this many people-labelled items, else it has no estimate (overridable:
# WORKBENCH_PPI_MIN_PEOPLE, or min_people= on the page, the API and manage.py metrics).
MIN_PEOPLE = 10
MEAN_KINDS = ("single", "binary", "multi", "likert", "text")
# A text question (an observed colour) gives the share of each of its most frequent machine answers.
MAX_TEXT_VALUES = 30
# Item metadata fields the estimates are also grouped by (when they take more than one value).
GROUP_FIELDS = ("identity", "pair", "object", "occupation", "category")
NOT_MEANS = (
    "Only means and proportions have a PPI estimate here. The paper metrics that are not means (SODA's "
    "Jensen-Shannon BDS and CDS, VAC, BiasConnect's Wasserstein w_bar and IS, visage's theta ratio, SSI "
    "t-tests) and Krippendorff's alpha are not offered from this source: read them from consensus or from "
    "the labeller. No bootstrap over the combined estimator is offered yet."
)
# The columns every PPI estimate row ends with.
ESTIMATE_COLUMNS = [
    Column("estimate", "estimate"),
    Column("low", "low"),
    Column("high", "high"),
    Column("human_only", "estimate"),
    Column("human_low", "low"),
    Column("human_high", "high"),
    Column("machine_only", "estimate"),
    Column("lambda", "estimate"),
    Column("n_people", "n"),
    Column("n_machine", "n"),
    Column("n_effective", "n"),
    Column("gain", "estimate"),
    Column("more_for_width", "n"),
    Column("reason", "text"),
]
PPI_ESTIMATOR = (
    "PPI++: the design-weighted human mean on the validation sample + lambda x (the machine mean on every "
    "item - its weighted mean on the sample), lambda power-tuned; Hajek weights 1/pi"
)
PPI_INTERVAL = (
    "95% normal (CLT) interval, estimate +- 1.96 sqrt(V); for a proportion centred and with V read from the "
    "sample plus Agresti and Coull's four pseudo-items; a proportion's estimate and interval clipped to "
    "[0, 1], a difference of proportions' to [-1, 1] (the reason says when an estimate was clipped); "
    "human_low/human_high: the same with lambda = 0 (human labels only)"
)


def ppi_min_people(raw: str | int | None = None) -> int:
    """The fewest people-labelled items a PPI row is estimated from: ``raw`` (a query parameter or option:
    a whole number from 2 to 100000), else ``WORKBENCH_PPI_MIN_PEOPLE``, else 10. Refused otherwise."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return max(2, int(settings.WORKBENCH_PPI_MIN_PEOPLE))
    value = whole_number_from_text(raw, low=2, high=100_000)  # ASCII digits only ('٣' is not 3)
    if value is None:
        raise ValidationFailed(
            f"min_people must be a whole number from 2 to 100000, not {str(raw)[:40]!r}",
            {"min_people": "invalid"},
        )
    return value


PPI_REFERENCE = "Angelopoulos et al. 2023 (PPI) and PPI++ (arXiv:2311.01453); docs/metrics.md"


def is_ppi_source(source: str | None) -> bool:
    """Whether ``source`` names the machine + human sample source (``ppi:LABELLER``)."""
    return bool(source) and str(source).strip().startswith(PREFIX)


def sample_probabilities(study: Study) -> tuple[ValidationSample, dict[int, float]]:
    """The study's validation sample and item id -> inclusion probability; refused when unknown."""
    sample = ValidationSample.objects.filter(study=study).first()
    how = (
        "draw one with known probabilities: manage.py sample_for_validation STUDY --labeller NAME --design "
        "uniform|stratified|active --size N, or the findings page's Validation sample form"
    )
    if sample is None:
        raise ValidationFailed(
            "ppi needs a validation sample drawn with known inclusion probabilities, and this study has "
            f"none; {how}",
            {"source": "no validation sample"},
        )
    rows = list(sample.items.values_list("item_id", "inclusion_probability"))
    if not sample.design or any(p is None for _i, p in rows):
        raise ValidationFailed(
            "the study's human labels have no known inclusion probabilities (people labelled what they "
            "chose, or the sample was drawn before designs were stored or restored from an export), so a "
            f"PPI estimate would carry their selection bias; {how}",
            {"source": "unknown inclusion probabilities"},
        )
    return sample, {item_id: float(p) for item_id, p in rows if p is not None}


def _key(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


Encoder = Callable[[Any, list[str] | None], float | None]


def _encoders(
    study: Study, key: str, kind: str, items: dict[int, ItemInfo], machine: LabelSet | None = None
) -> list[tuple[str, Encoder, set[int] | None]]:
    """(option, value -> Y or None, the items it applies to or None for all) for each number a question
    gives per item; a question whose options come from item metadata gives one per option listed on any
    item, applying to the items that list it."""
    question = study.protocol_obj.question(key)
    scope: dict[str, set[int]] | None = None
    if question.options_from is not None:
        scope = defaultdict(set)
        for item_id, info in items.items():
            for option in question.options_for(info.metadata or {}):
                scope[option.key].add(item_id)
            if question.none_option is not None:
                scope[question.none_option.key].add(item_id)
    if kind == "likert":
        scale = [option.key for option in question.options]

        def position(value: Any, _shown: list[str] | None) -> float | None:
            return float(scale.index(value) + 1) if value in scale else None

        return [("mean position (1 = " + (scale[0] if scale else "?") + ")", position, None)]
    if kind == "binary":
        options = ["1"]
    elif kind == "text":
        counts: dict[str, int] = defaultdict(int)
        for value in (machine.values if machine is not None else {}).values():
            if isinstance(value, str) and value.strip():
                counts[value] += 1
        options = sorted(counts, key=lambda v: (-counts[v], v))[:MAX_TEXT_VALUES]
    elif scope is not None:
        options = sorted(scope)
    else:
        options = [option.key for option in question.options]
        if question.none_option is not None:
            options.append(question.none_option.key)

    def encoder(option: str) -> Callable[[Any, list[str] | None], float | None]:
        def share(value: Any, shown: list[str] | None) -> float | None:
            if value is None:
                return None
            if kind == "multi":
                if shown is not None and option not in shown:
                    return None
                return 1.0 if option in (value or []) else 0.0
            return 1.0 if str(value) == option else 0.0

        return share

    return [(option, encoder(option), scope[option] if scope is not None else None) for option in options]


def _agrees(machine: LabelSet, human: LabelSet, item_id: int) -> float | None:
    """1: the labeller answered as the consensus on the item; 0: it did not; None: either is missing."""
    mine, theirs = machine.values.get(item_id), human.values.get(item_id)
    if mine is None or theirs is None:
        return None
    return 1.0 if _key(mine) == _key(theirs) else 0.0


def _groups(items: dict[int, ItemInfo]) -> dict[tuple[str, str], set[int]]:
    groups: dict[tuple[str, str], set[int]] = defaultdict(set)
    for item_id, info in items.items():
        groups[("all", "all")].add(item_id)
        groups[("condition", info.condition or "(none)")].add(item_id)
        groups[("model", info.model_name or "(none)")].add(item_id)
        for field in GROUP_FIELDS:
            value = (info.metadata or {}).get(field)
            if value not in (None, "") and not isinstance(value, list | dict):
                groups[(field, str(value))].add(item_id)
    by_field: dict[str, int] = defaultdict(int)
    for field, _value in groups:
        by_field[field] += 1
    # A field with one value repeats "all".
    return {g: ids for g, ids in sorted(groups.items()) if g[0] == "all" or by_field[g[0]] > 1}


def _row(estimate: PpiEstimate, width: float) -> list[Any]:
    needed = labels_needed(estimate, width)
    return [
        estimate.ppi.estimate,
        estimate.ppi.low,
        estimate.ppi.high,
        estimate.human_only.estimate,
        estimate.human_only.low,
        estimate.human_only.high,
        estimate.machine_only,
        estimate.lam,
        estimate.n_labelled,
        estimate.n_machine,
        estimate.n_effective,
        estimate.gain,
        max(0, needed - estimate.n_labelled) if needed is not None else None,
        estimate.reason
        or (None if needed is not None else f"width {width} is out of reach of more human labels alone"),
    ]


def _estimate(
    ids: Iterable[int],
    encode: Callable[[Any, list[str] | None], float | None],
    machine: LabelSet,
    human: LabelSet,
    chances: dict[int, float],
    proportion: bool,
    min_people: int = MIN_PEOPLE,
) -> PpiEstimate:
    f_all: list[float] = []
    y: list[float] = []
    f: list[float] = []
    pi: list[float] = []
    m_shown = machine.shown or {}
    h_shown = human.shown or {}
    for item_id in sorted(ids):
        fx = encode(machine.values.get(item_id), m_shown.get(item_id)) if item_id in machine.values else None
        if fx is None:
            continue
        f_all.append(fx)
        if item_id in chances and item_id in human.values:
            yx = encode(human.values[item_id], h_shown.get(item_id))
            if yx is not None:
                y.append(yx)
                f.append(fx)
                pi.append(chances[item_id])
    return ppi_mean(y, f, f_all, pi=pi, proportion=proportion, min_labelled=min_people)


def _ppi_tables(name: str) -> tuple[Table, Table, Table]:
    """The three PPI tables of labeller ``name``, without rows yet: estimates, differences, accuracy."""
    estimates = Table(
        "ppi_estimates",
        f"Machine ({name}) + human sample: PPI++ estimates with 95% intervals",
        [
            Column("question", "label"),
            Column("option", "label"),
            Column("group_by", "label"),
            Column("group", "label"),
            *ESTIMATE_COLUMNS,
        ],
        [],
        0,
        method=Method(
            PPI_ESTIMATOR,
            interval=PPI_INTERVAL,
            reference=PPI_REFERENCE,
            unit="items (n_people: the sample's human-labelled items; n_machine: the machine-labelled ones)",
        ),
    )
    differences = Table(
        "ppi_differences",
        "Differences between conditions and between models (PPI++, 95% intervals)",
        [
            Column("question", "label"),
            Column("option", "label"),
            Column("group_by", "label"),
            Column("group", "label"),
            Column("reference", "label"),
            Column("difference", "estimate"),
            Column("low", "low"),
            Column("high", "high"),
            Column("human_only", "estimate"),
            Column("human_low", "low"),
            Column("human_high", "high"),
            Column("machine_only", "estimate"),
            Column("reason", "text"),
        ],
        [],
        0,
        method=Method(
            "difference of two PPI++ estimates (group - reference); the groups hold different items, so "
            "their variances add",
            interval=PPI_INTERVAL,
            reference=PPI_REFERENCE,
            unit="items",
        ),
    )
    accuracy = Table(
        "ppi_accuracy",
        f"Accuracy of {name} against the human consensus on the sample (design-weighted)",
        [
            Column("question", "label"),
            Column("group_by", "label"),
            Column("group", "label"),
            Column("accuracy", "estimate"),
            Column("low", "low"),
            Column("high", "high"),
            Column("n_people", "n"),
            Column("more_for_width", "n"),
            Column("reason", "text"),
        ],
        [],
        0,
        method=Method(
            "design-weighted share of the sample's human-labelled items where the labeller answered as the "
            "consensus (Hajek weights 1/pi; lambda 0: human labels only)",
            interval="Agresti-Coull 95% interval (the design-weighted share with four pseudo-items), "
            "clipped to [0, 1]",
            reference=PPI_REFERENCE,
            unit="sample items with a human consensus label",
        ),
    )
    return estimates, differences, accuracy


def _difference_rows(
    key: str, option: str, found: dict[tuple[str, str], PpiEstimate], proportion: bool
) -> list[list[Any]]:
    """Each condition against base (else the first) and each model against the first, as rows of the
    differences table."""
    rows: list[list[Any]] = []
    for group_by in ("condition", "model"):
        names = [g for f, g in found if f == group_by]
        if len(names) < 2:
            continue
        reference = "base" if group_by == "condition" and "base" in names else names[0]
        for name in names:
            if name == reference:
                continue
            diff = ppi_difference(
                found[(group_by, name)], found[(group_by, reference)], proportion=proportion
            )
            rows.append(
                [
                    key,
                    option,
                    group_by,
                    name,
                    reference,
                    diff.ppi.estimate,
                    diff.ppi.low,
                    diff.ppi.high,
                    diff.human_only.estimate,
                    diff.human_only.low,
                    diff.human_only.high,
                    diff.machine_only,
                    diff.reason,
                ]
            )
    return rows


def _table_notes(
    estimates: Table, differences: Table, accuracy: Table, name: str, width: float, min_people: int
) -> None:
    """How to read each PPI table."""
    estimates.notes.append(
        "estimate: PPI++ with power-tuned lambda (0 = human-only, 1 = PPI); human_only: the same design's "
        f"weighted human mean; machine_only: the plain mean of {name}'s labels (biased by its "
        "errors; no interval); n_effective = n_people x V(human-only) / V(PPI), gain = n_effective / "
        "n_people; "
        f"more_for_width: human labels to add for a 95% interval {width} wide. "
        "A proportion, its interval and its PPI estimate lie in [0, 1]: the formula can leave it, so the "
        "estimate and bounds are clipped (the reason says when an estimate was). "
        f"A group with fewer than {min_people} people-labelled items has no estimate (null, with the "
        "reason): its interval would rest on a handful of labels."
    )
    differences.notes.append(
        "Each condition against base (else the first), each model against the first; the two groups hold "
        "different items, so their variances add. A difference of proportions and its interval lie in "
        "[-1, 1] (clipped); a group without an estimate has no difference."
    )
    accuracy.notes.append(
        "Human-only (lambda 0): nothing stands in for correctness on items people did not label. Weighted by "
        "1/pi, so an active sample that oversampled doubtful items does not understate the accuracy."
    )


def _sample_notes(sample: Any, name: str, n_machine: int, sampled: int, n_people: int) -> list[str]:
    """What a reader of the PPI tables must know about the validation sample behind them."""
    notes: list[str] = []
    if sample.labeller_name and sample.labeller_name != name.partition("@")[0]:
        notes.append(
            f"The validation sample was drawn from {sample.labeller_name}'s items; its probabilities hold "
            f"for {name} only if both labelled the same items."
        )
    if sample.frame_size is not None and sample.frame_size != n_machine:
        notes.append(
            f"The sample was drawn from {sample.frame_size} items; {name} has labelled "
            f"{n_machine} now. Items added after the draw could not be drawn, which the weights "
            "do not correct: redraw."
        )
    waiting = sampled - n_people
    if waiting:
        notes.append(
            f"{waiting} of the {sampled} sampled items have no counted human label yet (pending, tied "
            "or not judged); the estimates use the others, assuming those are missing at random."
        )
    return notes


def ppi_section(
    study: Study,
    machine: LabelSource,
    items: dict[int, ItemInfo],
    report: PaperFindings,
    *,
    human: LabelSource,
    width: float = DEFAULT_WIDTH,
    min_people: int = MIN_PEOPLE,
) -> None:
    """The PPI tables of ``study`` from ``machine`` (narrowed to the items it answered) and the consensus
    on the validation sample (``human``, narrowed to the counted items); see the module docstring."""
    sample, chances = sample_probabilities(study)
    groups = _groups(items)
    estimates, differences, accuracy = _ppi_tables(machine.name)
    people: set[int] = set()
    machine_items: set[int] = set()
    protocol = study.protocol_obj
    skipped: list[str] = []
    unlabelled: list[str] = []
    for question in protocol.questions:
        if question.kind not in MEAN_KINDS:
            skipped.append(f"{question.key} ({question.kind})")
            continue
        if question.options_from is not None and question.kind == "likert":
            skipped.append(f"{question.key} (a scale from item metadata)")
            continue
        machine_labels = labels_for(study, question.key, machine)
        if not any(v is not None for v in machine_labels.values.values()):
            unlabelled.append(question.key)
            continue
        human_labels = labels_for(study, question.key, human)
        human_labels = replace(
            human_labels,
            values={i: v for i, v in human_labels.values.items() if i in chances and v is not None},
        )
        machine_items |= {i for i, v in machine_labels.values.items() if v is not None}
        people |= set(human_labels.values) & set(machine_labels.values)
        proportion = question.kind != "likert"
        if question.kind == "text":
            distinct = {v for v in machine_labels.values.values() if isinstance(v, str) and v.strip()}
            if len(distinct) > MAX_TEXT_VALUES:
                report.notes.append(
                    f"{question.key}: the shares of {machine.name}'s {MAX_TEXT_VALUES} most frequent answers "
                    f"of {len(distinct)} (exact text; a normaliser declared on the question applies first)."
                )
        for option, encode, applies in _encoders(study, question.key, question.kind, items, machine_labels):
            found: dict[tuple[str, str], PpiEstimate] = {}
            for (group_by, group), ids in groups.items():
                scoped = ids if applies is None else applies & ids
                result = _estimate(
                    scoped, encode, machine_labels, human_labels, chances, proportion, min_people
                )
                if not result.n_machine:
                    continue  # the labeller answered no item of this group on this option
                found[(group_by, group)] = result
                estimates.rows.append([question.key, option, group_by, group, *_row(result, width)])
            differences.rows += _difference_rows(question.key, option, found, proportion)

        for (group_by, group), ids in groups.items():
            if group_by in GROUP_FIELDS:
                continue
            pairs = [
                (_agrees(machine_labels, human_labels, i), chances[i]) for i in sorted(ids) if i in chances
            ]
            known = [(a, p) for a, p in pairs if a is not None]
            result = ppi_mean(
                [a for a, _p in known],
                [0.0] * len(known),
                [0.0] * max(len(known), 2),
                pi=[p for _a, p in known],
                lam=0.0,
                proportion=True,
                min_labelled=min_people,
            )
            needed = labels_needed(result, width)
            accuracy.rows.append(
                [
                    question.key,
                    group_by,
                    group,
                    result.ppi.estimate,
                    result.ppi.low,
                    result.ppi.high,
                    result.n_labelled,
                    max(0, needed - result.n_labelled) if needed is not None else None,
                    result.reason,
                ]
            )
    estimates.n_items = len(machine_items)
    differences.n_items = len(machine_items)
    accuracy.n_items = len(people)
    _table_notes(estimates, differences, accuracy, machine.name, width, min_people)
    report.tables.extend([estimates, differences, accuracy])
    design = sample.design + (
        f" by {sample.stratify_by}" if sample.design == "stratified" and sample.stratify_by else ""
    )
    report.summary["ppi"] = {
        "labeller": machine.name,
        "design": design,
        "sample_size": len(chances),
        "sample_labeller": sample.labeller_name,
        "n_people": len(people),
        "n_machine": len(machine_items),
        "target_width": width,
        "min_people": min_people,
    }
    report.notes += _sample_notes(sample, machine.name, len(machine_items), len(chances), len(people))
    if unlabelled:
        report.notes.append(f"{machine.name} answered no item on: {', '.join(unlabelled)} (no rows).")
    if skipped:
        report.notes.append("Not means, so no PPI estimate: " + ", ".join(skipped) + ".")
    report.notes.append(NOT_MEANS)


def width_parse(raw: str | None) -> float | None:
    """The ``width`` query parameter: blank -> None (the default), else a number in (0, 100]; anything
    else is refused (a 400 naming it)."""
    text = (raw or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 100:  # NaN fails too
        raise ValidationFailed(
            f"width must be a number above 0 and at most 100, not {text[:40]!r}", {"width": "invalid"}
        )
    return value


def ppi_sources(study: Study, machines: list[str]) -> list[str]:
    """``ppi:LABELLER`` for each labeller when the study's validation sample has known probabilities."""
    try:
        sample_probabilities(study)
    except ValidationFailed:
        return []
    return [PREFIX + name for name in machines]


def ppi_sources_of(studies: Iterable[Study]) -> list[str]:
    """``ppi:LABELLER`` for the labellers of those of ``studies`` whose validation sample has a design
    (stored inclusion probabilities); two queries."""
    ids = [s.pk for s in studies]
    # the same test as ``sample_probabilities``: a design, and a probability stored for every sampled item
    with_design = list(
        Study.objects.filter(pk__in=ids, validation_sample__isnull=False)
        .exclude(validation_sample__design="")
        .exclude(validation_sample__items__inclusion_probability__isnull=True)
        .distinct()
    )
    return [PREFIX + name for name in machine_labellers_of(with_design)] if with_design else []


def human_source() -> LabelSource:
    """The consensus source the PPI section reads the human labels from (narrowed by the report)."""
    return LabelSource(CONSENSUS, CONSENSUS)
