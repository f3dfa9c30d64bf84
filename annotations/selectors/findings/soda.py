"""SODA findings (object-attributes protocol): the tables of ``metrics/soda.py``.

``soda_section`` reads each object image's attribute labels and computes the baseline divergence BDS
with its permutation p (paper Table 2), the cross-demographic divergence CDS, the visual attribute
concentration VAC, fully concentrated cases and the base -> group shifts of the dominant value.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotations.models import Study
from annotations.selectors.findings.tables import SIGNIFICANCE, Figure, Report, Table, label_sets
from annotations.selectors.labels import ItemInfo, LabelSource
from metrics import soda


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
                "JS distance (natural log) vs the base prompt; 1000 seeded permutations; "
                f"significant: p < {SIGNIFICANCE}."
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
