"""SODA findings (object-attributes protocol): the tables of ``metrics/soda.py``.

``soda_section`` reads each object image's attribute labels and computes the baseline divergence BDS
with its permutation p (paper Table 2), the cross-demographic divergence CDS, the visual attribute
concentration VAC, fully concentrated cases and the base -> group shifts of the dominant value.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotations.models import Study
from annotations.selectors.labels import ItemInfo, LabelSource
from findings.tables import (
    SIGNIFICANCE,
    Column,
    Figure,
    Method,
    PaperFindings,
    Table,
    adjust_p_values,
    label_sets,
)
from metrics import soda

N_PERMUTATIONS = 1000
# What the SODA paper did about its many permutation tests (read in its section 4 and Table 2).
PAPER_CORRECTION = (
    "none: each cell's permutation test is read on its own (Table 2 shades the cells with p < 0.01), with "
    "no correction for multiple comparisons; note the paper's threshold is 0.01 where significant here "
    f"uses {SIGNIFICANCE}."
)


def _soda_images(study: Study, source: LabelSource, items: dict[int, ItemInfo]) -> list[soda.SodaImage]:
    """Each item with a label on any attribute, as SODA's image record (model, object, condition)."""
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
    return images


def _soda_rows(reports: list[soda.SodaReport]) -> tuple[list[list[Any]], ...]:
    """The rows of the BDS, VAC, thresholded VAC, concentrated and shift tables."""
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
    return bds_rows, vac_rows, thr_rows, conc_rows, shift_rows


def _cds_rows(images: list[soda.SodaImage]) -> list[list[Any]]:
    """CDS per dimension (the part of a condition before ':'), models and objects pooled."""
    dims: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for img in images:
        if ":" in img.condition:
            dims[img.condition.split(":", 1)[0]][img.condition].append(img.attributes)
    cds_rows = []
    for dim, groups in sorted(dims.items()):
        c = soda.cds(groups)
        cds_rows.append([dim, c.value, ", ".join(c.groups), c.reason])
    return cds_rows


def _bds_table(rows: list[list[Any]], n: int, seed: int) -> Table:
    """SODA Table 2: BDS per condition with its permutation p (corrected by the caller)."""
    return Table(
        "soda_bds",
        "Baseline divergence BDS per condition with permutation p (SODA Table 2)",
        [
            Column("model", "label"),
            Column("object", "label"),
            Column("condition", "label"),
            Column("bds", "estimate"),
            Column("p_value", "p"),
            Column("significant", "flag"),
            Column("n_base", "n"),
            Column("n_group", "n"),
            Column("n_attributes", "n"),
            Column("reason", "text"),
        ],
        rows,
        n,
        [
            f"JS distance (natural log) vs the base prompt; {N_PERMUTATIONS} seeded permutations; "
            f"significant: p < {SIGNIFICANCE}."
        ],
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


def _descriptive_tables(
    cds_rows: list[list[Any]],
    vac_rows: list[list[Any]],
    thr_rows: list[list[Any]],
    conc_rows: list[list[Any]],
    shift_rows: list[list[Any]],
    n: int,
) -> list[Table]:
    """CDS, VAC (two aggregates), concentrated cases and shifts: SODA's descriptive tables."""
    return [
        Table(
            "soda_cds",
            "Cross-demographic divergence CDS per dimension (models and objects pooled)",
            [
                Column("dimension", "label"),
                Column("cds", "estimate"),
                Column("groups", "text"),
                Column("reason", "text"),
            ],
            cds_rows,
            n,
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
            [
                Column("model", "label"),
                Column("object", "label"),
                Column("condition", "label"),
                Column("vac", "estimate"),
                Column("n_images", "n"),
                Column("reason", "text"),
            ],
            vac_rows,
            n,
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
            [
                Column("model", "label"),
                Column("object", "label"),
                Column("vac", "estimate"),
                Column("n_scores_used", "n"),
                Column("n_scores", "n"),
            ],
            thr_rows,
            n,
            method=Method(
                "mean of the per (condition, attribute) VAC scores >= 0.05 (the released code's aggregate)",
                reference="SODA released code (analysis/)",
                unit="VAC scores (one per condition and attribute)",
            ),
        ),
        Table(
            "soda_concentrated",
            "Fully concentrated cases (all images share one value)",
            [
                Column("model", "label"),
                Column("object", "label"),
                Column("condition", "label"),
                Column("attribute", "label"),
                Column("value", "label"),
                Column("n", "n"),
            ],
            conc_rows,
            n,
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
                Column("model", "label"),
                Column("object", "label"),
                Column("condition", "label"),
                Column("attribute", "label"),
                Column("base_value", "label"),
                Column("base_share", "estimate"),
                Column("group_value", "label"),
                Column("group_share", "estimate"),
                Column("changed", "flag"),
            ],
            shift_rows,
            n,
            method=Method(
                "the most frequent value of each attribute and its share of the images, under the base "
                "prompt and under the group's; changed: the two values differ",
                reference="SODA section 5",
                unit="images",
            ),
        ),
    ]


def soda_section(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings
) -> None:
    """BDS with permutation p, CDS, VAC, concentrated cases and base -> group shifts (SODA Table 2)."""
    images = _soda_images(study, source, items)
    seed = study.seed or 0
    reports = soda.soda_report(images, n_permutations=N_PERMUTATIONS, seed=seed)
    bds_rows, vac_rows, thr_rows, conc_rows, shift_rows = _soda_rows(reports)
    n = len(images)
    bds_table = _bds_table(bds_rows, n, seed)
    adjust_p_values(
        bds_table,
        report.correction,
        family="one permutation test per model, object and group condition",
        paper=PAPER_CORRECTION,
    )
    report.tables += [
        bds_table,
        *_descriptive_tables(_cds_rows(images), vac_rows, thr_rows, conc_rows, shift_rows, n),
    ]
    report.figures.append(Figure("soda_bds", "BDS per condition (* p < 0.05)", "soda_bds"))
