"""Every metric that applies to a study's protocol, as one typed report (SPEC 6, docs/metrics.md).

``findings_report(study=..., source=...)`` reads labels through ``annotations.selectors.labels`` and
calls the pure functions of ``metrics/``. The report (``FindingsReport``) is a list of typed *tables*
(key, title, columns with their kinds, rows, ``n_items`` behind it, notes), a ``summary`` of headline
numbers and the *figures* the findings page draws from the tables; ``to_json`` makes the API's JSON at its
edge. It writes nothing; ``findings_report_cached`` keeps a report until the study's annotations or
stereotype table change.

Which labels a report reads: the caller's ``source``, else the protocol's default from ``DEFAULT_SOURCES``
(the reading its paper's numbers use). The report says which source it used and why (``source``,
``source_default``, ``source_note``), every source the study accepts (``sources``) and those that hold
labels now (``sources_available``); a table with no rows carries ``empty_reason``. Each paper's tables are
built in the module of its name beside this one (mirroring ``metrics/``); the shared shapes live in
``tables.py``.

| protocol | metrics |
| --- | --- |
| stereotype-markers | visage L(attr, id), L(stereo), L(random), theta, thrice ratio, offensiveness O(id) |
| (+ any study with the visage pull sets) | stereotypical pull Sim(d,s), Sim(d,ns), Sim(s,ns); salience |
| visualness | consensus shares of each Likert label, the visual attributes |
| ssi-rubric | SSI cells, initial vs refined (relative drop, paired t-test), rubric prevalence |
| bias-axes | per-axis distributions, w_bar against uniform, IS matrix per prompt group |
| subgroup | stereotype score per instruction pair; machine vs human per labeller |
| object-attributes | SODA BDS + permutation p, VAC, CDS, concentrated cases, base -> group shifts |
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, replace
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max

from annotations.models import (
    Annotation,
    Annotator,
    ConsensusLabel,
    Item,
    StereotypeEntry,
    Study,
    ValidationSample,
)
from annotations.selectors.counted import counted_annotations, counted_items
from annotations.selectors.coverage import Coverage, coverage_of, findings_minimum, item_judges, short_items
from annotations.selectors.cross_pools import pool_reliability_entries
from annotations.selectors.features import (
    CAPTIONS,
    EMBEDDING,
    FeatureSource,
    feature_source_parse,
    feature_sources,
    features_fingerprint,
)
from annotations.selectors.labels import (
    CONSENSUS,
    JUDGEMENTS,
    ItemInfo,
    LabelSource,
    findings_reading,
    items_info,
    machine_labellers,
    pool_judges,
    pool_short_items,
    pool_source_split,
    source_parse,
)
from annotations.selectors.pools import pools_fingerprint
from annotations.selectors.reliability import (
    findings_exclusions,
    reliability_entries,
    reliability_headline,
    reliability_thresholds,
)
from common.errors import ValidationFailed
from findings.papers.agent import agent_section
from findings.papers.biasconnect import biasconnect_section
from findings.papers.ppi import (
    DEFAULT_WIDTH,
    PREFIX,
    human_source,
    is_ppi_source,
    ppi_min_people,
    ppi_section,
    ppi_sources,
)
from findings.papers.soda import soda_section
from findings.papers.ssi import ssi_section
from findings.papers.visage import (
    visage_features_apply,
    visage_pull_section,
    visage_salience_section,
    visage_section,
    visualness_section,
)
from findings.reliability_gate import reliability_apply
from findings.tables import Figure, PaperFindings, Section, Table, jsonable
from metrics.multiple_testing import CORRECTION_NAMES, CORRECTIONS, DEFAULT_CORRECTION, correction_parse
from metrics.reliability import Thresholds

# The protocols whose metrics can read every judgement (source=judgements), not only one label per item.
JUDGEMENT_PROTOCOLS = ("stereotype-markers", "visualness")


@dataclass(frozen=True)
class DefaultSource:
    """The source a protocol's findings read when none is asked for, and why (the paper's reading)."""

    source: str
    why: str


_ONE_LABEL = (
    "the paper's numbers read one label per {unit}, from {labeller} ({where}); the human consensus gives one "
    "label per {unit} the same way. To reproduce the published numbers, choose the machine labeller that "
    "stands in for {labeller}."
)
# Protocol key -> its default source: the one place that decides it (docs/metrics.md, "Label sources").
DEFAULT_SOURCES: dict[str, DefaultSource] = {
    "stereotype-markers": DefaultSource(
        JUDGEMENTS,
        "visage Table 1 counts every judgement: L(attr, id) = k/n over every showing to every annotator.",
    ),
    "visualness": DefaultSource(
        CONSENSUS, "visage appendix 8.1 counts the label that at least 2 of the 3 raters gave."
    ),
    "ssi-rubric": DefaultSource(
        CONSENSUS,
        _ONE_LABEL.format(unit="image set and rubric item", labeller="GPT-4o", where="ssi section 4"),
    ),
    "bias-axes": DefaultSource(
        CONSENSUS,
        _ONE_LABEL.format(unit="image and axis", labeller="MiniGPT-v2 VQA", where="biasconnect 3.2"),
    ),
    "subgroup": DefaultSource(
        CONSENSUS,
        _ONE_LABEL.format(unit="image", labeller="the agent's BLIP detector", where="agent section 3"),
    ),
    "object-attributes": DefaultSource(
        CONSENSUS, _ONE_LABEL.format(unit="image and attribute", labeller="GPT-4o", where="soda section 3")
    ),
}
FALLBACK_DEFAULT = DefaultSource(CONSENSUS, "no paper metric applies; the human consensus is read.")

# Protocol key -> the section builder of its paper.
SECTIONS: dict[str, Section] = {
    "stereotype-markers": visage_section,
    "visualness": visualness_section,
    "ssi-rubric": ssi_section,
    "bias-axes": biasconnect_section,
    "subgroup": agent_section,
    "object-attributes": soda_section,
}


def study_metric_kind(study: Study) -> str | None:
    """The preset whose metrics apply (by the protocol's key, else the study's preset), or None."""
    key = study.protocol_obj.key or study.preset
    return key if key in SECTIONS else None


# Tables read from stored embeddings and captions, not from labels: their notes say why they are empty.
FEATURE_TABLES = ("visage_pull", "visage_salience")
FEATURE_SUMMARIES = ("stereotypical_pull", "salience_captions")


def default_source(study: Study) -> DefaultSource:
    """The source ``study``'s findings read when none is asked for (``DEFAULT_SOURCES``)."""
    return DEFAULT_SOURCES.get(study_metric_kind(study) or "", FALLBACK_DEFAULT)


def sources_available(study: Study) -> list[str]:
    """The sources that hold labels in ``study`` now: consensus and (visage) judgements once a person has
    answered, each machine labeller that answered. Three small queries."""
    kind = study_metric_kind(study)
    human = (
        counted_annotations(study).filter(annotator__kind=Annotator.Kind.HUMAN).exists()
        or ConsensusLabel.objects.filter(study=study).exists()
    )
    people = [CONSENSUS, *([JUDGEMENTS] if kind in JUDGEMENT_PROTOCOLS else [])] if human else []
    machines = machine_labellers(study)
    return [*people, *machines, *(ppi_sources(study, machines) if human else [])]


def _insufficient(summary: Any) -> Any:
    """A summary with every number replaced by None (undefined: no item counted yet)."""
    if isinstance(summary, dict):
        return {key: _insufficient(value) for key, value in summary.items()}
    return None if isinstance(summary, int | float) and not isinstance(summary, bool) else summary


def _counted_words(coverage: Coverage) -> str:
    return (
        f"{coverage.settled} settled + {coverage.partial} partial, provisional"
        if coverage.include_partial and coverage.partial
        else "settled"
    )


def _empty_reason(source: str, available: list[str], coverage: Coverage | None = None) -> str:
    """Why a table of a report from ``source`` has no rows (``sources_available`` offers the others)."""
    if coverage is not None and source in available and not coverage.counted:
        more = (
            f"; {coverage.partial} partial items wait for their judgements (include them, provisional, with "
            "?partial=1)"
            if coverage.partial and not coverage.include_partial
            else ""
        )
        return (
            f"insufficient data: no item has its {coverage.needed} "
            f"{'judgement' if coverage.needed == 1 else 'judgements'} from {source} yet{more}"
        )
    if source not in available:
        who = "nobody has answered yet" if source in (CONSENSUS, JUDGEMENTS) else "it has no answers here"
        more = "" if available else "; no source has labels yet"
        return f"{source} has no labels in this study ({who}){more}"
    return f"the labels from {source} give this table nothing to count (see its notes)"


def findings_coverage(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], include_partial: bool
) -> tuple[Coverage, LabelSource]:
    """The coverage of ``study``'s items for ``source`` and the source narrowed to the items findings
    count: people's labels (consensus, judgements) need the study's overlap of judgements per item, a
    machine labeller its one answer (``annotations.selectors.coverage``)."""
    if source.pool is not None:
        pool = source.pool
        judges = pool_judges(study, pool)
        needed = pool.needed
        basis = f"judgements of {pool.words} ({len(pool.members)} people; {pool.rule})"
    elif source.is_machine:
        judges = item_judges(study, source.annotator_ids)
        needed, basis = 1, f"answers of {source.name} (one per item)"
    else:
        judges = item_judges(study)
        needed, basis = study.overlap, f"human judgements (overlap {study.overlap})"
    coverage, counted, _partial = coverage_of(
        study=study,
        item_ids=items,
        judges=judges,
        needed=needed,
        basis=basis,
        include_partial=include_partial,
    )
    short = (
        pool_short_items(study, source.pool, judges)
        if source.pool is not None
        else short_items(study, judges)
        if not source.is_machine
        else frozenset()
    )
    return coverage, replace(source, items=counted, short=short, provisional=include_partial)


@dataclass
class FindingsReport:
    """Every finding of one study from one label source: the one thing the findings app hands out.

    ``tables`` and ``figures`` are typed (each column declares its kind); the rest says which labels the
    findings read and how far they can be trusted. ``to_json`` gives the metrics API's JSON (and
    ``manage.py metrics --json``'s); ``from_json`` reads it back (the cache keeps JSON)."""

    study: int
    name: str
    protocol: str | None
    source: str
    source_default: dict[str, str]
    source_note: str
    sources: list[str]
    sources_available: list[str]
    source_labels: dict[str, str]
    embeddings: str | None
    captions: str | None
    embedding_sources: list[str]
    caption_sources: list[str]
    n_items: int
    coverage: dict[str, Any]
    include_partial: bool
    width: float | None
    correction: str
    correction_note: str
    warning: str | None
    source_label: str
    reliability: list[dict[str, Any]]
    reliability_thresholds: dict[str, Any]
    reliability_headline: dict[str, Any]
    reliability_note: str
    excluded_questions: list[dict[str, Any]]
    min_people: int | None
    summary: dict[str, Any]
    notes: list[str]
    tables: list[Table]
    figures: list[Figure]
    # Read from a rater pool (``consensus@KEY=VALUE``): the pool (``PoolSpec.to_dict``); None otherwise, and
    # then absent from the JSON, so a report of any other source reads as it always did.
    pool: dict[str, Any] | None = None

    def table(self, key: str) -> Table | None:
        """The table keyed ``key``, or None."""
        return next((table for table in self.tables if table.key == key), None)

    def to_json(self) -> dict[str, Any]:
        """The report as the metrics API gives it."""
        out: dict[str, Any] = {
            f.name: jsonable(getattr(self, f.name))
            for f in fields(self)
            if f.name not in ("tables", "figures") and not (f.name == "pool" and self.pool is None)
        }
        out["tables"] = [table.to_json() for table in self.tables]
        out["figures"] = [figure.to_json() for figure in self.figures]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FindingsReport:
        """The report ``to_json`` gave."""
        plain: dict[str, Any] = {
            f.name: data[f.name] if f.name != "pool" else data.get("pool")
            for f in fields(cls)
            if f.name not in ("tables", "figures")
        }
        return cls(
            **plain,
            tables=[Table.from_json(t) for t in data["tables"]],
            figures=[Figure.from_json(f) for f in data["figures"]],
        )


@dataclass(frozen=True)
class _Request:
    """What a caller asked of ``findings_report``, checked."""

    source: LabelSource
    ppi: bool
    embeddings: FeatureSource | None
    captions: FeatureSource | None
    kind: str | None
    default: DefaultSource


def _request_check(
    study: Study,
    source: str | None,
    embeddings: str | None,
    captions: str | None,
    width: float | None,
    correction: str,
) -> _Request:
    """``findings_report``'s arguments checked (ValidationFailed with the reason otherwise)."""
    if correction not in CORRECTIONS:
        raise ValidationFailed(
            f"correction must be one of {', '.join(CORRECTIONS)}, not {str(correction)[:40]!r}",
            {"correction": "invalid"},
        )
    default = default_source(study)
    ppi = is_ppi_source(source)
    if width is not None and not 0 < width <= 100:
        raise ValidationFailed("width must be a number above 0 (at most 100)", {"width": "out of range"})
    parsed = source_parse(
        study, (source or "").strip()[len(PREFIX) :] if ppi else (source or "").strip() or default.source
    )
    if ppi and not parsed.is_machine:
        raise ValidationFailed(
            "ppi:LABELLER needs a machine labeller's name after 'ppi:'", {"source": "not a machine labeller"}
        )
    embedding_source = feature_source_parse(study, EMBEDDING, embeddings)
    caption_source = feature_source_parse(study, CAPTIONS, captions)
    kind = study_metric_kind(study)
    if parsed.kind == JUDGEMENTS and kind not in JUDGEMENT_PROTOCOLS:
        raise ValidationFailed(
            "source 'judgements' applies to visage studies only; these metrics read one "
            "label per item (consensus or a labeller)",
            {"source": "not applicable"},
        )
    return _Request(parsed, ppi, embedding_source, caption_source, kind, default)


def _nothing_counted(found: PaperFindings) -> None:
    """Nothing counted: a headline number (0 visual attributes, 0 identities) or a row of zero shares
    would read as a finding; the tables say "insufficient data" instead."""
    for table in found.tables:
        if table.key not in FEATURE_TABLES:
            table.rows = []
    found.figures = [f for f in found.figures if f.table in FEATURE_TABLES]
    found.summary = {
        key: value if key in FEATURE_SUMMARIES else _insufficient(value)
        for key, value in found.summary.items()
    }


def _coverage_set(
    found: PaperFindings, coverage: Coverage, counts: dict[str, Any], source: str, available: list[str]
) -> None:
    """Each table's coverage and empty reason, each figure's title with the items it counts."""
    for table in found.tables:
        if table.key not in FEATURE_TABLES:
            table.coverage = counts
        if not table.rows:
            table.empty_reason = (
                "the notes above say which labeller to run or what to import"
                if table.key in FEATURE_TABLES
                else _empty_reason(source, available, coverage)
            )
    for figure in found.figures:
        if figure.table not in FEATURE_TABLES:
            figure.title += f" ({coverage.counted} of {coverage.n_items} items: {_counted_words(coverage)})"


def findings_report(
    *,
    study: Study,
    source: str | None = None,
    embeddings: str | None = None,
    captions: str | None = None,
    include_partial: bool = False,
    width: float | None = None,
    correction: str = DEFAULT_CORRECTION,
    min_people: int | None = None,
) -> FindingsReport:
    """Every metric that applies to ``study``'s protocol from ``source`` (see the module docstring);
    ``source`` None or blank: the protocol's default (``DEFAULT_SOURCES``).

    ``source`` ``ppi:LABELLER``: the machine + human sample estimates of the means and proportions
    (``findings/papers/ppi.py``) instead of the paper's metrics; ``width`` the target width of a 95%
    interval the report says how many more human labels would reach (default 0.1).

    ``embeddings`` and ``captions`` name the machine source (``name[@version]``) whose stored image
    embeddings and captions the visage stereotypical pull and salience read (default: the only one,
    else the first by name); they apply to stereotype-markers studies and to any study holding the
    visage pull sets (conditions default / stereotypical / non-stereotypical).

    Findings count *settled* items (every judgement the overlap asks for; a machine labeller's one answer)
    and, with ``include_partial``, partial ones too (provisional, marked: ``coverage``, each table's
    ``partial``); ``coverage`` says how many items are settled, partial and unjudged, and ``warning`` why
    the findings rest on too few items (``annotations.selectors.coverage``).

    ``correction`` (holm, the default, or bh): how a table that runs many tests (SSI's paired t-tests,
    SODA's permutation tests) adjusts its p-values for multiple comparisons: its ``p_adjusted`` and
    ``significant_adjusted`` columns, beside the raw ``p_value`` and the paper's ``significant``
    (``metrics.multiple_testing``); the report says which (``correction``).

    ``reliability``: the gate (``findings/reliability_gate.py``): one entry per question the findings read
    with Krippendorff's alpha of the people, its interval and verdict under the study's thresholds; each
    table and figure reading a question that is not reliable carries a ``warning`` naming it; questions
    the researcher left out (``excluded_questions``) feed no table. ``min_people`` (ppi only): the fewest
    people-labelled items a PPI row is estimated from (default ``WORKBENCH_PPI_MIN_PEOPLE``, 10).

    Raises ValidationFailed for an unknown correction, an unknown source, or ``judgements`` where metrics
    need one label per item (every protocol but stereotype-markers and visualness). Reads only; no locks.
    """
    asked = _request_check(study, source, embeddings, captions, width, correction)
    kind, ppi = asked.kind, asked.ppi
    items = items_info(study)
    coverage, parsed = findings_coverage(study, asked.source, items, include_partial)
    assert parsed.items is not None
    counted = {i: info for i, info in items.items() if i in parsed.items}
    found = PaperFindings(correction=correction)
    features = visage_features_apply(kind, items)
    thresholds = reliability_thresholds(study)
    exclusions = findings_exclusions(study)
    excluded = [e["question"] for e in exclusions]
    least = ppi_min_people(min_people) if ppi else None
    machine_name = parsed.name
    with findings_reading(excluded, pool=parsed) as reading:
        if ppi:
            _coverage, people = findings_coverage(study, human_source(), items, include_partial)
            ppi_section(
                study,
                parsed,
                counted,
                found,
                human=people,
                width=width or DEFAULT_WIDTH,
                min_people=least or 10,
            )
            parsed = replace(parsed, name=PREFIX + parsed.name)
        elif kind is None and not features:
            found.notes.append("No paper metric applies to this protocol; see the agreement report instead.")
        elif kind is not None:
            SECTIONS[kind](study, parsed, counted, found)
    if features and not ppi:
        visage_pull_section(study, items, found, asked.embeddings)
        visage_salience_section(study, items, found, asked.captions)
    machine_only = parsed.is_machine and not ppi
    read = [key for key in reading.read if key not in excluded]
    left_out = [k for k in excluded if k in reading.read]
    entries = _gate_entries(study, parsed, read, left_out, thresholds, machine_only, found.notes)
    blank = counted_items(study).filter(images__is_blank=True).distinct().count()
    if blank:
        found.notes.append(
            f"{blank} of the {len(items)} items have a blank or single-colour image (flagged at import: a "
            "safety filter's black frame, a failed render); they are counted here. The items page lists "
            "them (filter 'blank')."
        )
    if not coverage.counted and kind is not None:
        _nothing_counted(found)
    available = sources_available(study)
    counts = coverage.as_dict()
    if ppi:
        counts = _ppi_coverage(counts, found.summary.get("ppi") or {}, machine_name)
    _coverage_set(found, coverage, counts, parsed.name, _holding(available, parsed))
    default = asked.default
    used = (
        f"the default for {kind or 'this protocol'}: {default.why}"
        if parsed.name == default.source
        else f"as chosen; the default for {kind or 'this protocol'} is {default.source}: {default.why}"
    )
    machines = machine_labellers(study)
    reliability_apply(found.tables, found.figures, [e for e in entries if not e.get("excluded")])
    return FindingsReport(
        study=study.pk,
        name=study.name,
        protocol=kind,
        source=parsed.name,
        source_default={"source": default.source, "why": default.why},
        source_note=(
            f"Labels from {parsed.name}, {used} Switch with ?source=NAME (page and API) or --source NAME "
            f"(manage.py metrics); sources with labels now: {', '.join(available) or 'none'}."
        ),
        sources=[
            CONSENSUS,
            *([JUDGEMENTS] if kind in JUDGEMENT_PROTOCOLS else []),
            *machines,
            *ppi_sources(study, machines),
        ],
        sources_available=available,
        source_labels=_source_labels(study, [CONSENSUS, JUDGEMENTS, *machines, *available]),
        embeddings=asked.embeddings.name if asked.embeddings else None,
        captions=asked.captions.name if asked.captions else None,
        embedding_sources=feature_sources(study, EMBEDDING),
        caption_sources=feature_sources(study, CAPTIONS),
        n_items=len(items),
        coverage=jsonable(counts),
        include_partial=include_partial,
        width=(width or DEFAULT_WIDTH) if ppi else None,
        correction=correction,
        correction_note=(
            f"Tables that run many tests give p-values adjusted by {CORRECTION_NAMES[correction]} "
            "(p_adjusted, significant_adjusted) beside the raw p_value and the paper's significant flag; "
            "switch with ?correction=holm|bh (page and API) or --correction (manage.py metrics)."
        ),
        warning=coverage.warning(),
        source_label=source_words(parsed.name, found.summary.get("ppi")),
        reliability=jsonable(entries),
        reliability_thresholds={**thresholds.to_dict(), "statement": thresholds.statement()},
        reliability_headline=reliability_headline(entries),
        reliability_note=_reliability_note(
            parsed.name, machine_only, ppi, entries, parsed.pool.words if parsed.pool else None
        ),
        excluded_questions=exclusions,
        min_people=least,
        summary=jsonable(found.summary),
        notes=found.notes,
        tables=found.tables,
        figures=found.figures,
        pool=parsed.pool.to_dict() if parsed.pool is not None else None,
    )


def _holding(available: list[str], parsed: LabelSource) -> list[str]:
    """The sources holding labels, for the empty reasons of ``parsed``'s tables: a pool source holds labels
    where its kind does (its empty tables then say "insufficient data", not "no labels")."""
    return [*available, parsed.name] if parsed.pool is not None and parsed.kind in available else available


def _gate_entries(
    study: Study,
    parsed: LabelSource,
    read: list[str],
    left_out: list[str],
    thresholds: Thresholds,
    machine_only: bool,
    notes: list[str],
) -> list[dict[str, Any]]:
    """The reliability gate's entries of the questions read (none for a machine's labels), then those of
    the questions left out, marked ``excluded``; read from a pool, the pool's own alpha (and ``notes``
    gain what a pool's findings rest on)."""
    if parsed.pool is not None:
        notes.append(_pool_note(parsed.pool.to_dict(), parsed.kind))
        members = list(parsed.pool.members)
        entries = pool_reliability_entries(study, read, thresholds, members)
        left = pool_reliability_entries(study, left_out, thresholds, members)
    else:
        entries = [] if machine_only else reliability_entries(study, read, thresholds)
        left = reliability_entries(study, left_out, thresholds)
    return entries + [{**entry, "excluded": True} for entry in left]


def _pool_note(pool: dict[str, Any], kind: str) -> str:
    """What findings read from a rater pool rest on (docs/metrics.md, "Rater pools")."""
    who = f"the {pool['key']} = {pool['value']} pool ({pool['annotators']} people)"
    read = (
        f"every judgement of {who}"
        if kind == JUDGEMENTS
        else f"the consensus of {who}: the study's rule for each question run on the pool's own judgements "
        "(computed now, never stored; an expert's adjudication settles the pooled consensus, not a pool's)"
    )
    return (
        f"Read from {read}. {pool['settled_rule'][0].upper()}{pool['settled_rule'][1:]}; pools of "
        f"{pool['key']}: {', '.join(pool['pools'])}. The reliability gate reads the alpha of the pool's "
        "people."
    )


def labeller_words(name: str) -> str:
    """A labeller's ``name@version`` as a person reads it: 'vlm-x v1', 'colour-rule c8b2d0e364c'."""
    base, _at, version = name.partition("@")
    if not version:
        return base
    return (
        f"{base} v{version.removeprefix('v')}"
        if version.removeprefix("v")[:1].isdigit()
        else f"{base} {version}"
    )


def source_words(name: str, ppi: dict[str, Any] | None = None) -> str:
    """The source named in words wherever a person reads it: 'human consensus', 'every human judgement',
    'vlm-x v1 (machine labeller)', 'vlm-x v1 + human sample (uniform, 60)'."""
    if name == CONSENSUS:
        return "human consensus"
    if name == JUDGEMENTS:
        return "every human judgement"
    pool = pool_source_split(name)
    if pool is not None:
        kind, key, value = pool
        return (
            f"human consensus of the {key} = {value} pool"
            if kind == CONSENSUS
            else f"every judgement of the {key} = {value} pool"
        )
    if name.startswith(PREFIX):
        labeller = labeller_words(name[len(PREFIX) :])
        if ppi:
            return f"{labeller} + human sample ({ppi.get('design')}, {ppi.get('sample_size')})"
        return f"{labeller} + human sample"
    return f"{labeller_words(name)} (machine labeller)"


def _source_labels(study: Study, names: list[str]) -> dict[str, str]:
    """Each source named in words (``source_words``), a ppi: source with its sample's design and size."""
    sample: dict[str, Any] | None = None
    if any(name.startswith(PREFIX) for name in names):
        row = ValidationSample.objects.filter(study=study).first()
        if row is not None:
            design = row.design + (
                f" by {row.stratify_by}" if row.design == "stratified" and row.stratify_by else ""
            )
            sample = {"design": design, "sample_size": row.items.count()}
    names = [*names, *ppi_sources(study, machine_labellers(study))] if sample else names
    return {name: source_words(name, sample) for name in dict.fromkeys(names)}


def _reliability_note(
    source: str, machine_only: bool, ppi: bool, entries: list[dict[str, Any]], pool: str | None = None
) -> str:
    if machine_only:
        return (
            f"Labels from {source_words(source)}: a machine's labels carry no human reliability, so no "
            "question is gated here. How far it agrees with people is the agreement page's comparison (and "
            "ppi_accuracy with a validation sample)."
        )
    part = "the human sample part of these estimates" if ppi else "these findings"
    people = f"the people of {pool}" if pool else "the people"
    weak = [
        e["question"]
        for e in entries
        if e["verdict"] != "reliable" and not e.get("excluded") and e.get("n_raters")
    ]
    return (
        f"Krippendorff's alpha of {people} on each question {part} read; "
        + (
            f"not reliable: {', '.join(weak)} (each table that reads one says so)."
            if weak
            else "every one is reliable."
        )
        + (" The machine part carries no human reliability." if ppi else "")
    )


def _ppi_coverage(counts: dict[str, Any], ppi: dict[str, Any], machine: str) -> dict[str, Any]:
    """The coverage of a ppi: source, its machine and its human items counted apart."""
    sampled, people = ppi.get("sample_size", 0), ppi.get("n_people", 0)
    human = {"sampled": sampled, "labelled": people, "waiting": max(0, sampled - people)}
    return {
        **counts,
        "machine": {key: counts[key] for key in ("settled", "partial", "none", "n_items", "basis")},
        "human": human,
        "summary": (
            f"machine part: {counts['settled']} of {counts['n_items']} items answered by {machine}; human "
            f"part: {people} of the {sampled} sampled items carry a settled human consensus"
        ),
    }


def correction_param(raw: str | None) -> str:
    """The ``correction`` query parameter or option: blank -> holm (the default), holm or bh (any case);
    anything else is refused (ValidationFailed: a 400 on the API, the page's error)."""
    try:
        return correction_parse(raw)
    except ValueError as exc:
        raise ValidationFailed(str(exc), {"correction": "invalid"}) from exc


def _fingerprint(
    study: Study,
    source: str,
    embeddings: str | None,
    captions: str | None,
    include_partial: bool = False,
    width: float | None = None,
    correction: str = DEFAULT_CORRECTION,
    min_people: int | None = None,
) -> str:
    annotations = Annotation.objects.filter(study=study).aggregate(n=Count("id"), last=Max("updated_at"))
    entries = StereotypeEntry.objects.filter(study=study).count()
    consensus = ConsensusLabel.objects.filter(study=study).aggregate(n=Count("id"), last=Max("computed_at"))
    items = Item.objects.filter(study=study).aggregate(n=Count("id"), last=Max("id"))
    pool = pool_source_split(source)
    # Who is in which pool changes with an enrolment's answers, which no annotation counts.
    members = f"|pools:{pools_fingerprint(study, pool[1])}" if pool is not None and pool[1] else ""
    raw = (
        f"{study.pk}|{source}|{embeddings}|{captions}|{include_partial}|{width}|{correction}|"
        f"{min_people or ppi_min_people()}|"
        f"{findings_minimum()}|{study.overlap}|"
        f"{study.updated_at.isoformat()}|{annotations['n']}|"
        f"{annotations['last']}|{entries}|{items['n']}|{items['last']}|{consensus['n']}|{consensus['last']}|"
        f"{features_fingerprint(study)}{members}"
    )
    return "metrics-report:" + hashlib.sha256(raw.encode()).hexdigest()


def findings_report_cached(
    *,
    study: Study,
    source: str | None = None,
    embeddings: str | None = None,
    captions: str | None = None,
    include_partial: bool = False,
    width: float | None = None,
    correction: str = DEFAULT_CORRECTION,
    min_people: int | None = None,
    timeout: int = 3600,
) -> FindingsReport:
    """``findings_report`` kept in the cache (as its JSON) until an annotation, a consensus label, the
    stereotype table, a stored embedding or caption, or the study changes."""
    key = _fingerprint(
        study,
        (source or "").strip() or default_source(study).source,
        embeddings or None,
        captions or None,
        include_partial,
        width,
        correction,
        min_people,
    )
    cached: dict[str, Any] | None = cache.get(key)
    if cached is not None:
        return FindingsReport.from_json(cached)
    report = findings_report(
        study=study,
        source=source,
        embeddings=embeddings,
        captions=captions,
        include_partial=include_partial,
        width=width,
        correction=correction,
        min_people=min_people,
    )
    cache.set(key, report.to_json(), timeout)
    return report
