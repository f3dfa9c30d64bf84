"""Every metric that applies to a study's protocol, as one JSON-serialisable report (SPEC 6, docs/metrics.md).

``metrics_report(study=..., source=...)`` reads labels through ``annotations.selectors.labels`` and calls the
pure functions of ``metrics/``. The report is a list of *tables* (key, title, columns, rows, ``n_items``
behind it, notes), a ``summary`` of headline numbers and the *figures* the findings page draws from the
tables. It writes nothing; ``metrics_report_cached`` keeps a report until the study's annotations or
stereotype table change.

| protocol | metrics |
| --- | --- |
| stereotype-markers | visage L(attr, id), L(stereo), L(random), theta, thrice ratio, offensiveness O(id) |
| visualness | consensus shares of each Likert label, the visual attributes |
| ssi-rubric | SSI cells, initial vs refined (relative drop, paired t-test), rubric prevalence |
| bias-axes | per-axis distributions, w_bar against uniform, IS matrix per prompt group |
| subgroup | stereotype score per instruction pair; machine vs human per labeller |
| object-attributes | SODA BDS + permutation p, VAC, CDS, concentrated cases, base -> group shifts |
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max

from annotations.models import Annotation, ConsensusLabel, Item, StereotypeEntry, Study
from annotations.protocols.schema import NONE_OPTION_KEY
from annotations.selectors.labels import (
    CONSENSUS,
    JUDGEMENTS,
    ItemInfo,
    LabelSource,
    items_info,
    judgements_for,
    labels_for,
    machine_labellers,
    source_parse,
)
from common.errors import ValidationFailed
from metrics import agent, biasconnect, soda, ssi, visage

SIGNIFICANCE = 0.05
MIN_NA_STEREO = 2
VISUAL_KEYS = ("agree", "strongly_agree")
DISABILITY_PARTS = (
    ("disability_blind", "blind"),
    ("disability_hearing_aid", "hearing_aid"),
    ("disability_wheelchair", "wheelchair"),
)
JUDGEMENT_PROTOCOLS = ("stereotype-markers", "visualness")


@dataclass
class Table:
    key: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    n_items: int
    notes: list[str] = field(default_factory=list)


@dataclass
class Figure:
    key: str
    title: str
    table: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class Report:
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and numpy scalars to plain JSON values; NaN and infinities to None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _identity_of(info: ItemInfo) -> str:
    return str(info.metadata.get("identity", ""))


# --- visage: stereotype markers ----------------------------------------------------------------------


def _visage(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    question = study.protocol_obj.question("attributes")
    label_maps: dict[int, dict[str, str]] = {}

    def labels(item_id: int) -> dict[str, str]:
        if item_id not in label_maps:
            md = items[item_id].metadata
            label_maps[item_id] = {o.key: o.label for o in question.options_for(md)} | {
                NONE_OPTION_KEY: visage.NONE_OF_THE_ABOVE
            }
        return label_maps[item_id]

    showings: list[visage.Showing] = []
    images_by_identity: dict[str, set[int]] = defaultdict(set)
    if source.kind == JUDGEMENTS:
        for j in judgements_for(study, "attributes"):
            names, identity = labels(j.item_id), _identity_of(items[j.item_id])
            chosen = set(j.value or [])
            for key in j.shown if j.shown is not None else names:
                showings.append(visage.Showing(identity, names.get(key, key), key in chosen))
            images_by_identity[identity].add(j.item_id)
    else:
        label_set = labels_for(study, "attributes", source)
        assert label_set.shown is not None
        for item_id, keys in label_set.shown.items():
            names, identity = labels(item_id), _identity_of(items[item_id])
            chosen = set(label_set.values.get(item_id) or [])
            for key in keys:
                showings.append(visage.Showing(identity, names.get(key, key), key in chosen))
            images_by_identity[identity].add(item_id)
        report.notes.append(
            "L(attr, id) here is over per-image labels (one per image, from "
            + source.name
            + "); the paper's "
            "Table 1 counts every judgement: use source=judgements to reproduce it."
        )
    entries = list(
        StereotypeEntry.objects.filter(study=study).values_list(
            "identity", "attribute", "na_stereo", "offensiveness", "visual"
        )
    )
    if not entries:
        report.notes.append(
            "No stereotype table: every attribute counts as random (import one with import_seegull)."
        )
    stereotypes = {
        (i, a) for i, a, na, _o, vis in entries if na is not None and na >= MIN_NA_STEREO and vis is not False
    }
    scores = {(i, a): o for i, a, _na, o, _v in entries}
    likelihoods = visage.attribute_likelihoods(showings)
    tendencies = visage.stereotype_tendency(likelihoods, stereotypes)
    ratio = visage.thrice_ratio(tendencies)
    offensive = visage.offensiveness(likelihoods, tendencies, stereotypes, scores)
    n_images = sum(len(v) for v in images_by_identity.values())

    def order(t: visage.Tendency) -> tuple[int, float, float]:
        # Paper Table 1 order: undefined theta because L(random) = 0 first (by L(stereo)), then by theta.
        zero = t.theta is None and t.l_random == 0
        return (0 if zero else 1, -(t.theta or 0.0), -(t.l_stereo or 0.0))

    eligible = sorted((t for t in tendencies if t.eligible), key=order)
    rest = sorted((t for t in tendencies if not t.eligible), key=lambda t: t.identity)
    report.tables.append(
        Table(
            "visage_tendency",
            "Stereotype likelihood and tendency per identity (ViSAGe Table 1)",
            [
                "identity",
                "l_stereo",
                "l_random",
                "theta",
                "eligible",
                "n_stereo_attributes",
                "n_random_terms",
                "n_showings",
                "n_images",
                "reason",
            ],
            [
                [
                    t.identity,
                    t.l_stereo,
                    t.l_random,
                    t.theta,
                    t.eligible,
                    t.n_stereo_attributes,
                    t.n_random_terms,
                    t.n_showings,
                    len(images_by_identity.get(t.identity, ())),
                    t.reason,
                ]
                for t in eligible + rest
            ],
            n_images,
            [
                f"Stereotypical: stereotype-table pairs with NA_stereo >= {MIN_NA_STEREO} whose attribute is visual; "
                "'None of the above' counts as one more random term; theta only with >= 2 stereotypical attributes."
            ],
        )
    )
    report.tables.append(
        Table(
            "visage_likelihoods",
            "L(attr, id) = k/n per identity and attribute",
            ["identity", "attribute", "stereotypical", "k", "n", "likelihood"],
            [
                [lk.identity, lk.attribute, (lk.identity, lk.attribute) in stereotypes, lk.k, lk.n, lk.value]
                for lk in likelihoods.values()
            ],
            n_images,
        )
    )
    report.tables.append(
        Table(
            "visage_offensiveness",
            "Offensiveness O(id) of the stereotypes found present",
            [
                "identity",
                "offensiveness",
                "l_stereo",
                "n_present",
                "present_attributes",
                "n_missing_score",
                "reason",
            ],
            [
                [
                    o.identity,
                    o.value,
                    o.l_stereo,
                    len(o.present_attributes),
                    "; ".join(o.present_attributes),
                    o.n_missing_score,
                    o.reason,
                ]
                for o in sorted(offensive, key=lambda o: (o.value is None, -(o.value or 0.0), o.identity))
            ],
            n_images,
            [
                "Present = selected at least once (L > 0); the paper's ranking does not reproduce (docs/metrics.md)."
            ],
        )
    )
    report.summary["thrice_ratio"] = jsonable(ratio)
    report.summary["identities_eligible"] = len(eligible)
    report.figures.append(
        Figure("visage_tendency", "L(stereo) and L(random) of the top identities", "visage_tendency")
    )


# --- visage: visual-ness -----------------------------------------------------------------------------


def _visualness(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    question = study.protocol_obj.question("visual")
    keys = [o.key for o in question.options] + ([question.unsure.key] if question.unsure else [])
    by_item: dict[int, list[str]] = defaultdict(list)
    for j in judgements_for(study, "visual"):
        by_item[j.item_id].append(j.value)
    if source.kind == JUDGEMENTS:
        shares = visage.likert_consensus_shares(list(by_item.values()), keys, min_agree=2)
        rows = [[s.label, s.count, s.n_attributes, s.share] for s in shares]
        n = len(by_item)
        note = "Share of rated attributes where at least 2 raters chose the label (visage appendix 8.1)."
        visual = visage.visual_attributes(((items[i].text, r) for i, r in by_item.items()), VISUAL_KEYS)
    else:
        label_set = labels_for(study, "visual", source)
        n = label_set.n_items
        counts = {k: sum(1 for v in label_set.values.values() if v == k) for k in keys}
        rows = [[k, counts[k], n, counts[k] / n if n else None] for k in keys]
        note = f"Share of items whose {source.name} label is the label" + (
            " (with 3 raters: the label at least 2 chose)." if source.kind == CONSENSUS else "."
        )
        if source.kind == CONSENSUS:
            visual = visage.visual_attributes(((items[i].text, r) for i, r in by_item.items()), VISUAL_KEYS)
        else:
            visual = list(
                dict.fromkeys(items[i].text for i, v in label_set.values.items() if v in VISUAL_KEYS)
            )
    report.tables.append(
        Table(
            "visualness_shares",
            "Consensus shares of the visual-ness labels (ViSAGe Fig. 6)",
            ["label", "count", "n_items", "share"],
            rows,
            n,
            [note],
        )
    )
    report.tables.append(
        Table(
            "visual_attributes",
            "Visual attributes (every rating Agree or Strongly Agree)",
            ["attribute"],
            [[a] for a in sorted(visual)],
            n,
            ["All-agree rule over every judgement (SPEC 5 all-agree-set); a term listed twice counts once."],
        )
    )
    report.summary["visual_attributes"] = len(visual)
    report.figures.append(Figure("visualness_shares", "Visual-ness consensus shares", "visualness_shares"))


# --- ssi -----------------------------------------------------------------------------------------------


def _label_sets(study: Study, keys: Iterable[str], source: LabelSource) -> dict[str, dict[int, Any]]:
    return {key: labels_for(study, key, source).values for key in keys}


def _ssi(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    protocol = study.protocol_obj
    keys = [q.key for q in protocol.questions if q.kind == "binary"]
    labels = _label_sets(study, keys, source)
    records: list[ssi.SsiRecord] = []
    incomplete = 0
    for item_id, info in items.items():
        if info.condition not in (ssi.INITIAL, ssi.REFINED):
            continue
        applicable = [q.key for q in protocol.questions_for(info.metadata) if q.kind == "binary"]
        scores = {k: labels[k].get(item_id) for k in applicable}
        if not applicable or any(v is None for v in scores.values()):
            incomplete += 1
            continue
        query = str(info.metadata.get("query") or info.prompt or info.text or info.external_id)
        records.append(
            ssi.SsiRecord(
                query,
                str(info.metadata.get("category", "")),
                info.model_name or "model",
                info.condition,
                {k: int(v) for k, v in scores.items()},
            )
        )
    notes = (
        [f"{incomplete} image sets left out: a rubric label is missing or unresolved."] if incomplete else []
    )
    cells = ssi.ssi_cells(records)
    comparisons = ssi.ssi_comparisons(records)
    prevalence = ssi.rubric_prevalence(records)
    report.tables.append(
        Table(
            "ssi_cells",
            "Mean SSI by category, model and condition",
            ["category", "model", "condition", "mean_ssi", "n_sets", "reason"],
            [[c.category, c.model, c.condition, c.mean, c.n_sets, c.reason] for c in cells],
            len(records),
            notes,
        )
    )
    report.tables.append(
        Table(
            "ssi_comparisons",
            "Initial vs refined: relative drop and paired t-test (SSI Table 4)",
            [
                "category",
                "model",
                "initial_mean",
                "refined_mean",
                "relative_drop",
                "t",
                "p_value",
                "significant",
                "n_pairs",
                "n_initial",
                "n_refined",
                "reason",
            ],
            [
                [
                    c.category,
                    c.model,
                    c.initial_mean,
                    c.refined_mean,
                    c.relative_drop,
                    c.t,
                    c.p_value,
                    None if c.p_value is None else c.p_value < SIGNIFICANCE,
                    c.n_pairs,
                    c.n_initial,
                    c.n_refined,
                    c.test_reason or c.drop_reason,
                ]
                for c in comparisons
            ],
            len(records),
            [f"significant: paired t-test p < {SIGNIFICANCE}."],
        )
    )
    report.tables.append(
        Table(
            "ssi_prevalence",
            "Rubric item prevalence before and after (SSI Fig. 2)",
            ["category", "item", "condition", "share", "n_marked", "n_sets"],
            [[p.category, p.item, p.condition, p.share, p.n_marked, p.n_sets] for p in prevalence],
            len(records),
        )
    )
    report.figures.append(Figure("ssi_comparisons", "SSI before and after refinement", "ssi_comparisons"))


# --- biasconnect ----------------------------------------------------------------------------------------


def _disability(parts: Sequence[Any]) -> str | None:
    if any(v is None for v in parts):
        return None
    for value, (_key, name) in zip(parts, DISABILITY_PARTS, strict=True):
        if value == "yes":
            return name
    return "fit"


def _group_of(info: ItemInfo) -> str:
    return str(info.metadata.get("occupation") or info.metadata.get("prompt_group") or "all")


def _biasconnect(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    protocol = study.protocol_obj
    part_keys = {k for k, _ in DISABILITY_PARTS}
    axes = {
        q.key: [o.key for o in q.options]
        for q in protocol.questions
        if q.kind == "single" and q.key != "person" and q.key not in part_keys
    }
    has_disability = all(protocol.has_question(k) for k in part_keys)
    if has_disability:
        axes["disability"] = ["fit", *(name for _k, name in DISABILITY_PARTS)]
    keys = [k for k in axes if k != "disability"] + (sorted(part_keys) if has_disability else [])
    labels = _label_sets(study, [*keys, "person"] if protocol.has_question("person") else keys, source)
    groups: dict[str, list[biasconnect.AxisImage]] = defaultdict(list)
    for item_id, info in items.items():
        values = {k: labels[k].get(item_id) for k in axes if k != "disability"}
        if has_disability:
            values["disability"] = _disability([labels[k].get(item_id) for k, _ in DISABILITY_PARTS])
        person = labels["person"].get(item_id) == "yes" if "person" in labels else True
        groups[_group_of(info)].append(biasconnect.AxisImage(info.condition or "base", values, person))
    is_rows, dev_rows, dist_rows = [], [], []
    n_person = 0
    for group, images in sorted(groups.items()):
        try:
            matrix = biasconnect.intersectional_sensitivity(images, axes)
        except ValueError as exc:
            report.notes.append(f"{group}: {exc}")
            continue
        n_person += sum(1 for i in images if i.person)
        for x, row in zip(matrix.rows, matrix.values, strict=True):
            for y, value in zip(matrix.columns, row, strict=True):
                is_rows.append([group, x, y, value])
        base = [i for i in images if i.person and i.condition == biasconnect.BASE_CONDITION]
        for axis, options in axes.items():
            d = biasconnect.distribution((i.labels.get(axis) for i in base), options)
            dev_rows.append([group, axis, matrix.w_initial.get(axis), d.n])
            for option, count, share in zip(options, d.counts, d.probs or [None] * len(options), strict=True):
                dist_rows.append([group, "base", axis, option, count, share])
        report.notes.extend(f"{group}: {w}" for w in matrix.warnings)
    report.tables.append(
        Table(
            "biasconnect_is",
            "Intersectional sensitivity IS[x][y] per prompt group",
            ["group", "intervened_axis", "axis", "is"],
            is_rows,
            n_person,
            ["IS_xy = w_bar_y(base) - w_bar_y(pooled counterfactuals of x); negative = skew."],
        )
    )
    report.tables.append(
        Table(
            "biasconnect_deviation",
            "Normalised Wasserstein distance to uniform (base prompt)",
            ["group", "axis", "w_bar", "n_images"],
            dev_rows,
            n_person,
        )
    )
    report.tables.append(
        Table(
            "biasconnect_distributions",
            "Axis distributions of the base prompt",
            ["group", "condition", "axis", "option", "count", "share"],
            dist_rows,
            n_person,
        )
    )
    for group in sorted(groups):
        report.figures.append(
            Figure(f"biasconnect_is:{group}", f"IS matrix: {group}", "biasconnect_is", {"group": group})
        )


# --- agent -------------------------------------------------------------------------------------------


def _pairs(items: dict[int, ItemInfo]) -> dict[str, list[int]]:
    pairs: dict[str, list[int]] = defaultdict(list)
    for item_id, info in items.items():
        md = info.metadata
        pair = md.get("pair") or md.get("pair_id") or f"{info.prompt or info.text} | {md.get('subgroup', '')}"
        pairs[str(pair)].append(item_id)
    return pairs


def _subgroup_labels(study: Study, source: LabelSource) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for question in study.protocol_obj.questions:
        if question.kind == "single":
            for item_id, value in labels_for(study, question.key, source).values.items():
                out[item_id] = None if value in (None, "none") else value
    return out


def _agent(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    labels = _subgroup_labels(study, source)
    pairs = _pairs(items)
    rows = []
    for pair, ids in sorted(pairs.items()):
        md = items[ids[0]].metadata
        score = agent.stereotype_score([labels.get(i) for i in ids], str(md.get("subgroup", "")))
        rows.append(
            [
                pair,
                md.get("dimension"),
                md.get("subgroup"),
                score.majority,
                score.score,
                score.target_share,
                score.n,
                score.detected,
                score.reason,
            ]
        )
    report.tables.append(
        Table(
            "agent_scores",
            f"Stereotype score per instruction pair ({source.name})",
            ["pair", "dimension", "subgroup", "majority", "score", "target_share", "n", "detected", "reason"],
            rows,
            len(labels),
            ["'None / cannot tell' labels are left out; a tie has no majority."],
        )
    )
    machines = [source.name] if source.is_machine else machine_labellers(study)
    human = _subgroup_labels(study, source_parse(study, CONSENSUS)) if machines else {}
    comp_rows, pair_rows, summary = [], [], {}
    for name in machines:
        machine = labels if name == source.name else _subgroup_labels(study, source_parse(study, name))
        comparison = agent.compare_machine_to_human(
            agent.PairLabels(
                pair,
                str(items[ids[0]].metadata.get("dimension", "")),
                str(items[ids[0]].metadata.get("subgroup", "")),
                [human.get(i) for i in ids],
                [machine.get(i) for i in ids],
            )
            for pair, ids in sorted(pairs.items())
        )
        summary[name] = {
            "detection_accuracy": comparison.detection_accuracy,
            "n_pairs": comparison.n_compared,
        }
        comp_rows += [[name, d.dimension, d.mean_abs_difference, d.n_pairs] for d in comparison.per_dimension]
        pair_rows += [
            [name, p.pair_id, p.dimension, p.human.target_share, p.machine.target_share, p.agree]
            for p in comparison.pairs
        ]
    if machines:
        report.tables.append(
            Table(
                "agent_comparison",
                "Machine vs human: mean |difference| of the target share",
                ["labeller", "dimension", "mean_abs_difference", "n_pairs"],
                comp_rows,
                len(human),
            )
        )
        report.tables.append(
            Table(
                "agent_pairs",
                "Target-subgroup share per pair: human consensus vs machine",
                ["labeller", "pair", "dimension", "human_share", "machine_share", "detection_agrees"],
                pair_rows,
                len(human),
            )
        )
        report.summary["detection_accuracy"] = summary
        report.figures.append(Figure("agent_scatter", "Human vs machine stereotype score", "agent_pairs"))


# --- soda --------------------------------------------------------------------------------------------


def _soda(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    protocol = study.protocol_obj
    keys = [q.key for q in protocol.questions if q.kind in ("single", "text")]
    labels = _label_sets(study, keys, source)
    images: list[soda.SodaImage] = []
    for item_id, info in items.items():
        obj = str(info.metadata.get("object", ""))
        attrs = {}
        for q in protocol.questions_for(info.metadata):
            if q.key in labels:
                value = labels[q.key].get(item_id)
                attrs[q.key.removeprefix(f"{obj}_")] = None if value is None else str(value)
        if any(v is not None for v in attrs.values()):
            images.append(soda.SodaImage(info.model_name or "model", obj, info.condition or "base", attrs))
    reports = soda.soda_report(images, n_permutations=1000, seed=study.seed or 0)
    bds_rows, vac_rows, thr_rows, conc_rows, shift_rows = [], [], [], [], []
    for r in reports:
        for cond, d in r.bds.items():
            perm = r.permutation.get(cond)
            p = perm.p_value if perm else None
            bds_rows.append(
                [
                    r.model,
                    r.object,
                    cond,
                    d.value,
                    p,
                    None if p is None else p < SIGNIFICANCE,
                    d.n_left,
                    d.n_right,
                    d.n_attributes,
                    d.reason,
                ]
            )
        for cond, v in r.vac.items():
            vac_rows.append([r.model, r.object, cond, v.value, r.n_images.get(cond, 0), v.reason])
        if r.vac_thresholded is not None:
            thr_rows.append(
                [
                    r.model,
                    r.object,
                    r.vac_thresholded.value,
                    r.vac_thresholded.n_scores_used,
                    r.vac_thresholded.n_scores,
                ]
            )
        conc_rows += [[c.model, c.object, c.condition, c.attribute, c.value, c.n] for c in r.concentrated]
        for cond, shifts in r.shifts.items():
            shift_rows += [
                [
                    r.model,
                    r.object,
                    cond,
                    s.attribute,
                    s.base_value,
                    s.base_share,
                    s.group_value,
                    s.group_share,
                    s.changed,
                ]
                for s in shifts
            ]
    dims: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for img in images:
        if ":" in img.condition:
            dims[img.condition.split(":", 1)[0]][img.condition].append(img.attributes)
    cds_rows = []
    for dim, groups in sorted(dims.items()):
        c = soda.cds(groups)
        cds_rows.append([dim, c.value, ", ".join(c.groups), c.reason])
    n = len(images)
    report.tables += [
        Table(
            "soda_bds",
            "Baseline divergence BDS per condition with permutation p (SODA Table 2)",
            [
                "model",
                "object",
                "condition",
                "bds",
                "p_value",
                "significant",
                "n_base",
                "n_group",
                "n_attributes",
                "reason",
            ],
            bds_rows,
            n,
            [
                f"JS distance (natural log) vs the base prompt; 1000 seeded permutations; significant: p < {SIGNIFICANCE}."
            ],
        ),
        Table(
            "soda_cds",
            "Cross-demographic divergence CDS per dimension (models and objects pooled)",
            ["dimension", "cds", "groups", "reason"],
            cds_rows,
            n,
        ),
        Table(
            "soda_vac",
            "Visual attribute concentration VAC per condition",
            ["model", "object", "condition", "vac", "n_images", "reason"],
            vac_rows,
            n,
        ),
        Table(
            "soda_vac_thresholded",
            "VAC, released-code aggregate (mean of scores >= 0.05)",
            ["model", "object", "vac", "n_scores_used", "n_scores"],
            thr_rows,
            n,
        ),
        Table(
            "soda_concentrated",
            "Fully concentrated cases (all images share one value)",
            ["model", "object", "condition", "attribute", "value", "n"],
            conc_rows,
            n,
        ),
        Table(
            "soda_shifts",
            "Base -> group shift of the dominant value",
            [
                "model",
                "object",
                "condition",
                "attribute",
                "base_value",
                "base_share",
                "group_value",
                "group_share",
                "changed",
            ],
            shift_rows,
            n,
        ),
    ]
    report.figures.append(Figure("soda_bds", "BDS per condition (* p < 0.05)", "soda_bds"))


SECTIONS = {
    "stereotype-markers": _visage,
    "visualness": _visualness,
    "ssi-rubric": _ssi,
    "bias-axes": _biasconnect,
    "subgroup": _agent,
    "object-attributes": _soda,
}


def study_metric_kind(study: Study) -> str | None:
    """The preset whose metrics apply (by the protocol's key, else the study's preset), or None."""
    key = study.protocol_obj.key or study.preset
    return key if key in SECTIONS else None


def metrics_report(*, study: Study, source: str | None = CONSENSUS) -> dict[str, Any]:
    """Every metric that applies to ``study``'s protocol from ``source`` (see the module docstring).

    Raises ValidationFailed for an unknown source, or ``judgements`` where metrics need one label per
    item (every protocol but stereotype-markers and visualness). Reads only; no locks.
    """
    parsed = source_parse(study, source)
    kind = study_metric_kind(study)
    if parsed.kind == JUDGEMENTS and kind not in JUDGEMENT_PROTOCOLS:
        raise ValidationFailed(
            "source 'judgements' applies to visage studies only; these metrics read one "
            "label per item (consensus or a labeller)",
            {"source": "not applicable"},
        )
    items = items_info(study)
    report = Report()
    if kind is None:
        report.notes.append("No paper metric applies to this protocol; see the agreement report instead.")
    else:
        SECTIONS[kind](study, parsed, items, report)
    return jsonable(
        {
            "study": study.pk,
            "name": study.name,
            "protocol": kind,
            "source": parsed.name,
            "sources": [
                CONSENSUS,
                *([JUDGEMENTS] if kind in JUDGEMENT_PROTOCOLS else []),
                *machine_labellers(study),
            ],
            "n_items": len(items),
            "summary": report.summary,
            "notes": report.notes,
            "tables": report.tables,
            "figures": report.figures,
        }
    )


def _fingerprint(study: Study, source: str) -> str:
    annotations = Annotation.objects.filter(study=study).aggregate(n=Count("id"), last=Max("updated_at"))
    entries = StereotypeEntry.objects.filter(study=study).count()
    consensus = ConsensusLabel.objects.filter(study=study).aggregate(n=Count("id"), last=Max("computed_at"))
    items = Item.objects.filter(study=study).aggregate(n=Count("id"), last=Max("id"))
    raw = (
        f"{study.pk}|{source}|{study.updated_at.isoformat()}|{annotations['n']}|{annotations['last']}|"
        f"{entries}|{items['n']}|{items['last']}|{consensus['n']}|{consensus['last']}"
    )
    return "metrics-report:" + hashlib.sha256(raw.encode()).hexdigest()


def metrics_report_cached(
    *, study: Study, source: str | None = CONSENSUS, timeout: int = 3600
) -> dict[str, Any]:
    """``metrics_report`` kept in the cache until an annotation, a consensus label, the stereotype table or
    the study changes."""
    key = _fingerprint(study, source or CONSENSUS)
    report = cache.get(key)
    if report is None:
        report = metrics_report(study=study, source=source)
        cache.set(key, report, timeout)
    return report
