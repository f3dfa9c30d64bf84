"""SODA findings (object-attributes protocol): the tables of ``metrics/soda.py``.

``soda_section`` reads each object image's attribute labels and computes the baseline divergence BDS
with its permutation p (paper Table 2), the cross-demographic divergence CDS, the visual attribute
concentration VAC, fully concentrated cases and the base -> group shifts of the dominant value.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotations.models import Study
from annotations.selectors.findings.tables import (
    SIGNIFICANCE,
    Figure,
    Method,
    Report,
    Table,
    adjust_p_values,
    label_sets,
)
from annotations.selectors.labels import ItemInfo, LabelSource
from metrics import soda

N_PERMUTATIONS = 1000
# What the SODA paper did about its many permutation tests (read in its section 4 and Table 2).
PAPER_CORRECTION = (
    "none: each cell's permutation test is read on its own (Table 2 shades the cells with p < 0.01), with "
    "no correction for multiple comparisons; note the paper's threshold is 0.01 where significant here "
    f"uses {SIGNIFICANCE}."
)


def soda_section(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: Report) -> None:
    """BDS with permutation p, CDS, VAC, concentrated cases and base -> group shifts (SODA Table 2)."""
    protocol = study.protocol_obj
    keys = [q.key for q in protocol.questions if q.kind in ("single", "text")]
    labels = label_sets(study, keys, source)
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
    seed = study.seed or 0
    reports = soda.soda_report(images, n_permutations=N_PERMUTATIONS, seed=seed)
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
    bds_table = Table(
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
            f"JS distance (natural log) vs the base prompt; {N_PERMUTATIONS} seeded permutations; "
            f"significant: p < {SIGNIFICANCE}."
        ],
        kinds=["label", "label", "label", "estimate", "p", "flag", "n", "n", "n", "text"],
        method=Method(
            "BDS = mean over the attributes of the Jensen-Shannon distance (natural log) between the value "
            "distributions of the base prompt's and the group's images",
            test=(
                f"one-sided permutation test: base and group images pooled and relabelled {N_PERMUTATIONS} "
                f"times (seed {seed}), p = (1 + #{{BDS_perm >= BDS}}) / (1 + {N_PERMUTATIONS}); "
                f"significant: p < {SIGNIFICANCE}"
            ),
            reference="SODA section 4, Table 2",
            unit="images",
        ),
    )
    adjust_p_values(
        bds_table,
        report.correction,
        family="one permutation test per model, object and group condition",
        paper=PAPER_CORRECTION,
    )
    report.tables += [
        bds_table,
        Table(
            "soda_cds",
            "Cross-demographic divergence CDS per dimension (models and objects pooled)",
            ["dimension", "cds", "groups", "reason"],
            cds_rows,
            n,
            kinds=["label", "estimate", "text", "text"],
            method=Method(
                "CDS = mean over the attributes of the mean Jensen-Shannon divergence (log base 2) over the "
                "unordered pairs of the dimension's groups",
                reference="SODA section 3 (CDS)",
                unit="images",
            ),
        ),
        Table(
            "soda_vac",
            "Visual attribute concentration VAC per condition",
            ["model", "object", "condition", "vac", "n_images", "reason"],
            vac_rows,
            n,
            kinds=["label", "label", "label", "estimate", "n", "text"],
            method=Method(
                "VAC = mean over the attributes of 1 - H(P) / log k, k the distinct values observed (1.0 "
                "when k = 1)",
                reference="SODA section 3 (VAC)",
                unit="images",
            ),
        ),
        Table(
            "soda_vac_thresholded",
            "VAC, released-code aggregate (mean of scores >= 0.05)",
            ["model", "object", "vac", "n_scores_used", "n_scores"],
            thr_rows,
            n,
            kinds=["label", "label", "estimate", "n", "n"],
            method=Method(
                "mean of the per (condition, attribute) VAC scores >= 0.05 (the released code's aggregate)",
                reference="SODA released code (analysis/)",
                unit="VAC scores (one per condition and attribute)",
            ),
        ),
        Table(
            "soda_concentrated",
            "Fully concentrated cases (all images share one value)",
            ["model", "object", "condition", "attribute", "value", "n"],
            conc_rows,
            n,
            kinds=["label", "label", "label", "label", "label", "n"],
            method=Method(
                "the (condition, attribute) cases where every image has one value (listed; no statistic)",
                reference="SODA section 5",
                unit="images",
            ),
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
            kinds=["label", "label", "label", "label", "label", "estimate", "label", "estimate", "flag"],
            method=Method(
                "the most frequent value of each attribute and its share of the images, under the base "
                "prompt and under the group's; changed: the two values differ",
                reference="SODA section 5",
                unit="images",
            ),
        ),
    ]
    report.figures.append(Figure("soda_bds", "BDS per condition (* p < 0.05)", "soda_bds"))
