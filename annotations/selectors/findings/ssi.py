"""SSI findings (Stereotype Score Index, rubric protocol): the tables of ``metrics/ssi.py``.

``ssi_section`` turns each image set's rubric labels into SSI cells by category, model and condition,
the initial vs refined comparison (relative drop, paired t-test; paper Table 4) and rubric prevalence
(paper Fig. 2).
"""

from __future__ import annotations

from annotations.models import Study
from annotations.selectors.findings.tables import SIGNIFICANCE, Figure, Report, Table, label_sets
from annotations.selectors.labels import ItemInfo, LabelSource
from metrics import ssi


def ssi_section(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    """SSI cells, initial vs refined comparisons and rubric prevalence (SSI Table 4, Fig. 2)."""
    protocol = study.protocol_obj
    keys = [q.key for q in protocol.questions if q.kind == "binary"]
    labels = label_sets(study, keys, source)
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
                {k: int(v) for k, v in scores.items() if v is not None},
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
