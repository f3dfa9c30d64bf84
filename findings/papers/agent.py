"""Agent findings (subgroup protocol): the tables of ``metrics/agent.py``.

``agent_section`` scores each instruction pair's images for its target subgroup and, where the study
has machine labellers, compares each machine with the human consensus per pair and per dimension.
"""

from __future__ import annotations

from collections import defaultdict

from annotations.models import Study
from annotations.selectors.labels import (
    CONSENSUS,
    ItemInfo,
    LabelSource,
    labels_for,
    machine_labellers,
    source_parse,
)
from findings.tables import Column, Figure, Method, PaperFindings, Table
from metrics import agent


def _pairs(items: dict[int, ItemInfo]) -> dict[str, list[int]]:
    """Instruction pair -> its items (by ``pair`` / ``pair_id`` metadata, else prompt and subgroup)."""
    pairs: dict[str, list[int]] = defaultdict(list)
    for item_id, info in items.items():
        md = info.metadata
        pair = md.get("pair") or md.get("pair_id") or f"{info.prompt or info.text} | {md.get('subgroup', '')}"
        pairs[str(pair)].append(item_id)
    return pairs


def _subgroup_labels(study: Study, source: LabelSource) -> dict[int, str | None]:
    """Item id -> the subgroup ``source`` labels it with; "none" (cannot tell) stays a label (it counts in
    the score's denominator, ``metrics.agent``); None: no label (unanswered or unresolved)."""
    out: dict[int, str | None] = {}
    for question in study.protocol_obj.questions:
        if question.kind == "single":
            for item_id, value in labels_for(study, question.key, source).values.items():
                out[item_id] = value
    return out


def agent_section(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings
) -> None:
    """Stereotype score per instruction pair, and machine vs human where machine labels exist."""
    labels = _subgroup_labels(study, source)
    pairs = _pairs(items)
    rows = []
    n_none = 0
    for pair, ids in sorted(pairs.items()):
        md = items[ids[0]].metadata
        score = agent.stereotype_score([labels.get(i) for i in ids], str(md.get("subgroup", "")))
        n_none += score.n_none
        rows.append(
            [
                pair,
                md.get("dimension"),
                md.get("subgroup"),
                score.majority,
                score.score,
                score.target_share,
                score.n,
                score.n_none,
                score.detected,
                score.reason,
            ]
        )
    report.tables.append(
        Table(
            "agent_scores",
            f"Stereotype score per instruction pair ({source.name})",
            [
                Column("pair", "label"),
                Column("dimension", "label"),
                Column("subgroup", "label"),
                Column("majority", "label"),
                Column("score", "estimate"),
                Column("target_share", "estimate"),
                Column("n", "n"),
                Column("n_none", "n"),
                Column("detected", "flag"),
                Column("reason", "text"),
            ],
            rows,
            len(labels),
            [
                "n counts every labelled image; the n_none labelled 'None / cannot tell' stay in the "
                "denominator (agent section 3: majority-subgroup images / all images) and are never the "
                "majority. Unanswered or unresolved images are left out. A tie has no majority."
            ],
            method=Method(
                "stereotype score = share of the pair's labelled images whose label is the majority subgroup "
                "(images labelled 'None / cannot tell' in the denominator); target_share = the share of the "
                "pair's subgroup; detected = the majority is the pair's subgroup",
                reference="agent section 3",
                unit="images",
            ),
        )
    )
    report.summary["images_labelled_none"] = {
        "n_none": n_none,
        "n_labelled": sum(1 for value in labels.values() if value is not None),
        "counted_in_denominator": True,
    }
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
                [
                    Column("labeller", "label"),
                    Column("dimension", "label"),
                    Column("mean_abs_difference", "estimate"),
                    Column("n_pairs", "n"),
                ],
                comp_rows,
                len(human),
                method=Method(
                    "mean over the dimension's instruction pairs of |machine - human consensus| target-"
                    "subgroup share",
                    reference="agent section 4.2, Fig. 7",
                    unit="instruction pairs",
                ),
            )
        )
        report.tables.append(
            Table(
                "agent_pairs",
                "Target-subgroup share per pair: human consensus vs machine",
                [
                    Column("labeller", "label"),
                    Column("pair", "label"),
                    Column("dimension", "label"),
                    Column("human_share", "estimate"),
                    Column("machine_share", "estimate"),
                    Column("detection_agrees", "flag"),
                ],
                pair_rows,
                len(human),
                method=Method(
                    "share of the pair's images labelled with its target subgroup, by the human consensus "
                    "and by the machine; detection_agrees: both decide 'detected' alike",
                    reference="agent section 4.2, Fig. 7",
                    unit="images",
                ),
            )
        )
        report.summary["detection_accuracy"] = summary
        report.figures.append(Figure("agent_scatter", "Human vs machine stereotype score", "agent_pairs"))
