"""BiasConnect findings (bias-axes protocol): the tables of ``metrics/biasconnect.py``.

``biasconnect_section`` groups a study's images by prompt group (occupation), reads each bias axis's
label and computes the intersectional sensitivity matrix IS, each axis's normalised Wasserstein
distance to uniform and the base prompt's axis distributions. ``bias_axes``, ``axis_images`` and
``group_of`` are the reads the InterMit loop (``mitigation``) composes with the same metrics.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from annotations.models import Study
from annotations.selectors.labels import ItemInfo, LabelSource
from findings.tables import Column, Figure, Method, PaperFindings, Table, label_sets
from metrics import biasconnect

# The disability axis is asked as three yes/no questions: (question key, the axis group it stands for).
DISABILITY_PARTS = (
    ("disability_blind", "blind"),
    ("disability_hearing_aid", "hearing_aid"),
    ("disability_wheelchair", "wheelchair"),
)


def _disability(parts: Sequence[Any]) -> str | None:
    """The disability axis group from its three yes/no parts: the first "yes", else "fit"; None if one is
    unlabelled."""
    if any(v is None for v in parts):
        return None
    for value, (_key, name) in zip(parts, DISABILITY_PARTS, strict=True):
        if value == "yes":
            return name
    return "fit"


def group_of(info: ItemInfo) -> str:
    """The prompt group an IS matrix is computed within: the occupation, else ``prompt_group``; the items
    of a mitigation set (metadata ``mitigation``, e.g. an InterMit step) form their own group, named by
    their prompt set, so they never mix with the initial images; else one group for all."""
    if "mitigation" in info.metadata:
        return str(info.metadata.get("prompt_set") or f"{info.metadata.get('subject', '')} (mitigated)")
    return str(info.metadata.get("occupation") or info.metadata.get("prompt_group") or "all")


def bias_axes(study: Study) -> dict[str, list[str]]:
    """Axis -> its options, in the protocol's order: every single question but ``person`` and the three
    disability parts, which make the derived ``disability`` axis (fit, blind, hearing_aid, wheelchair)."""
    protocol = study.protocol_obj
    part_keys = {k for k, _ in DISABILITY_PARTS}
    axes = {
        q.key: [o.key for o in q.options]
        for q in protocol.questions
        if q.kind == "single" and q.key != "person" and q.key not in part_keys
    }
    if all(protocol.has_question(k) for k in part_keys):
        axes["disability"] = ["fit", *(name for _k, name in DISABILITY_PARTS)]
    return axes


def axis_images(
    study: Study, source: LabelSource, items: dict[int, ItemInfo]
) -> dict[int, biasconnect.AxisImage]:
    """Item id -> its ``AxisImage`` (condition, the label of each axis from ``source``, person) for
    ``items``; the disability axis is derived from its three parts, ``person`` is True without that
    question."""
    protocol = study.protocol_obj
    axes = bias_axes(study)
    has_disability = "disability" in axes
    part_keys = sorted(k for k, _ in DISABILITY_PARTS) if has_disability else []
    keys = [k for k in axes if k != "disability"] + part_keys
    labels = label_sets(study, [*keys, "person"] if protocol.has_question("person") else keys, source)
    images = {}
    for item_id, info in items.items():
        values = {k: labels[k].get(item_id) for k in axes if k != "disability"}
        if has_disability:
            values["disability"] = _disability([labels[k].get(item_id) for k, _ in DISABILITY_PARTS])
        person = labels["person"].get(item_id) == "yes" if "person" in labels else True
        images[item_id] = biasconnect.AxisImage(info.condition or "base", values, person)
    return images


def biasconnect_section(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings
) -> None:
    """IS matrix, deviation from uniform and base distributions per prompt group."""
    axes = bias_axes(study)
    groups: dict[str, list[biasconnect.AxisImage]] = defaultdict(list)
    for item_id, image in axis_images(study, source, items).items():
        groups[group_of(items[item_id])].append(image)
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
            shares: list[float | None] = list(d.probs) if d.probs else [None] * len(options)
            for option, count, share in zip(options, d.counts, shares, strict=True):
                dist_rows.append([group, "base", axis, option, count, share])
        report.notes.extend(f"{group}: {w}" for w in matrix.warnings)
    report.tables.append(
        Table(
            "biasconnect_is",
            "Intersectional sensitivity IS[x][y] per prompt group",
            [
                Column("group", "label"),
                Column("intervened_axis", "label"),
                Column("axis", "label"),
                Column("is", "estimate"),
            ],
            is_rows,
            n_person,
            ["IS_xy = w_bar_y(base) - w_bar_y(pooled counterfactuals of x); negative = skew."],
            method=Method(
                "IS_xy = w_bar_y(base prompt) - w_bar_y(x's counterfactual prompts, their y-distributions "
                "averaged with equal weight); w_bar = Wasserstein-1 distance to the uniform target (0/1 "
                "ground distance) over its maximum",
                reference="BiasConnect section 3.3",
                unit="images with a person",
            ),
        )
    )
    report.tables.append(
        Table(
            "biasconnect_deviation",
            "Normalised Wasserstein distance to uniform (base prompt)",
            [
                Column("group", "label"),
                Column("axis", "label"),
                Column("w_bar", "estimate"),
                Column("n_images", "n"),
            ],
            dev_rows,
            n_person,
            method=Method(
                "w_bar = Wasserstein-1 distance (0/1 ground distance) of the axis's distribution under the "
                "base prompt to the uniform target, over its maximum (0 uniform .. 1 one option)",
                reference="BiasConnect section 3.3",
                unit="images with a person",
            ),
        )
    )
    report.tables.append(
        Table(
            "biasconnect_distributions",
            "Axis distributions of the base prompt",
            [
                Column("group", "label"),
                Column("condition", "label"),
                Column("axis", "label"),
                Column("option", "label"),
                Column("count", "n"),
                Column("share", "estimate"),
            ],
            dist_rows,
            n_person,
            method=Method(
                "share of the base prompt's images with a person labelled with the option, count / n",
                reference="BiasConnect section 3.2",
                unit="images with a person",
            ),
        )
    )
    for group in sorted(groups):
        report.figures.append(
            Figure(f"biasconnect_is:{group}", f"IS matrix: {group}", "biasconnect_is", {"group": group})
        )
