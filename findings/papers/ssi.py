"""SSI findings (Stereotype Score Index, rubric protocol): the tables of ``metrics/ssi.py``.

``ssi_section`` turns each image set's rubric labels into SSI cells by category, model and condition,
the initial vs refined comparison (relative drop, paired t-test; paper Table 4) and rubric prevalence
(paper Fig. 2).

Pairing (``pair_queries``): an initial set's query is its metadata ``query``, else its prompt. A refined
set's prompt is the refined text, so it is paired through the link generation stores
(``refine_prompts --generate`` puts the initial query's text in metadata ``initial_prompt``; an imported
refined set gives the same field, or the initial set's ``query``). Every labelled set the test cannot pair
is listed in the ``ssi_unpaired`` table with the reason, never dropped silently.
"""

from __future__ import annotations

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
from metrics import ssi

# What the SSI paper did about its many t-tests (read in its section 5 and Table 4).
PAPER_CORRECTION = (
    "none stated: each category's paired t-test is reported on its own (Table 4 stars at p < 0.05, 0.01 "
    "and 0.001; the text gives p < 0.001 per category), with no correction for multiple comparisons."
)
SSI_ESTIMATOR = (
    "mean SSI over the image sets of a cell; SSI(set) = share of the category's N rubric items marked "
    "(N = 12 geocultural, 9 occupational, 10 adjectival)"
)

# The metadata field of a refined image set that names its initial set's prompt (written by generation's
# ``ssi_refined_prompt_set``; an imported manifest gives it as a column).
INITIAL_LINK = "initial_prompt"


def _own_query(info: ItemInfo) -> str:
    return str(info.metadata.get("query") or info.prompt or info.text or info.external_id)


def pair_queries(items: dict[int, ItemInfo]) -> dict[int, str]:
    """Item id -> the query an initial or refined set is paired on (see the module docstring).

    A refined set with metadata ``query`` uses it; else one with ``initial_prompt`` takes the query of the
    initial set of the same model whose prompt is that text (the text itself when there is none, so the
    set is listed as unpaired); else its own prompt (no link: unpaired unless it equals an initial query).
    """
    initial_by_prompt: dict[tuple[str, str], str] = {}
    for info in items.values():
        if info.condition == ssi.INITIAL and info.prompt:
            initial_by_prompt.setdefault((info.model_name, info.prompt), _own_query(info))
    out: dict[int, str] = {}
    for item_id, info in items.items():
        link = info.metadata.get(INITIAL_LINK)
        if info.condition == ssi.REFINED and not info.metadata.get("query") and link:
            out[item_id] = initial_by_prompt.get((info.model_name, str(link)), str(link))
        else:
            out[item_id] = _own_query(info)
    return out


def _ssi_records(
    study: Study, source: LabelSource, items: dict[int, ItemInfo]
) -> tuple[list[ssi.SsiRecord], dict[tuple[str, str, str, str], str]]:
    """Each image set with every applicable rubric label as an SSI record, and the sets left out for a
    missing or unresolved label ((category, model, query, condition) -> the set's id)."""
    protocol = study.protocol_obj
    keys = [q.key for q in protocol.questions if q.kind == "binary"]
    labels = label_sets(study, keys, source)
    records: list[ssi.SsiRecord] = []
    incomplete: dict[tuple[str, str, str, str], str] = {}
    queries = pair_queries(items)
    for item_id, info in items.items():
        if info.condition not in (ssi.INITIAL, ssi.REFINED):
            continue
        category, model = str(info.metadata.get("category", "")), info.model_name or "model"
        applicable = [q.key for q in protocol.questions_for(info.metadata) if q.kind == "binary"]
        scores = {k: labels[k].get(item_id) for k in applicable}
        if not applicable or any(v is None for v in scores.values()):
            incomplete[(category, model, queries[item_id], info.condition)] = info.external_id
            continue
        records.append(
            ssi.SsiRecord(
                queries[item_id],
                category,
                model,
                info.condition,
                {k: int(v) for k, v in scores.items() if v is not None},
                info.external_id,
            )
        )
    return records, incomplete


def _unpaired_rows(
    items: dict[int, ItemInfo],
    records: list[ssi.SsiRecord],
    incomplete: dict[tuple[str, str, str, str], str],
) -> list[list[Any]]:
    """The image sets the paired t-test cannot pair, each with the reason."""
    links = {info.external_id: str(info.metadata.get(INITIAL_LINK) or "") for info in items.values()}
    unpaired_rows = []
    for u in ssi.unpaired_sets(records):
        partner = incomplete.get((u.category, u.model, u.query, u.missing))
        if partner is not None:
            reason = f"its {u.missing} set {partner!r} has a missing or unresolved rubric label"
        elif u.condition == ssi.REFINED and not links.get(u.set_id):
            reason = (
                f"no initial set with query {u.query!r}; a refined set names its initial set's prompt in "
                f"metadata '{INITIAL_LINK}' (or its 'query')"
            )
        else:
            reason = f"no {u.missing} set of query {u.query!r} for this model"
        unpaired_rows.append(
            [u.category, u.model, u.query, u.condition, u.set_id, links.get(u.set_id, ""), reason]
        )
    return unpaired_rows


def _comparison_table(comparisons: list[ssi.SsiComparison], n_records: int, n_unpaired: int) -> Table:
    """SSI Table 4: initial vs refined means, relative drop and the paired t-test (uncorrected yet)."""
    return Table(
        "ssi_comparisons",
        "Initial vs refined: relative drop and paired t-test (SSI Table 4)",
        [
            Column("category", "label"),
            Column("model", "label"),
            Column("initial_mean", "estimate"),
            Column("refined_mean", "estimate"),
            Column("relative_drop", "estimate"),
            Column("t", "statistic"),
            Column("p_value", "p"),
            Column("significant", "flag"),
            Column("n_pairs", "n"),
            Column("n_initial", "n"),
            Column("n_refined", "n"),
            Column("reason", "text"),
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
        n_records,
        [
            f"significant: paired t-test p < {SIGNIFICANCE}.",
            "n_pairs: queries with both an initial and a refined set (a refined set is linked to its "
            f"initial set by metadata '{INITIAL_LINK}'); the sets without a partner are listed in "
            f"'Image sets the paired t-test cannot use' ({n_unpaired}).",
        ],
        method=Method(
            SSI_ESTIMATOR + "; relative_drop = (initial_mean - refined_mean) / initial_mean",
            test=(
                "two-sided paired t-test (scipy.stats.ttest_rel) of initial vs refined SSI over the "
                f"(model, query) pairs with both sets; significant: p < {SIGNIFICANCE}"
            ),
            reference="SSI section 5, Table 4",
            unit="image sets (the t-test: pairs of an initial and a refined set)",
        ),
    )


def ssi_section(study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings) -> None:
    """SSI cells, initial vs refined comparisons and rubric prevalence (SSI Table 4, Fig. 2)."""
    records, incomplete = _ssi_records(study, source, items)
    notes = (
        [f"{len(incomplete)} image sets left out: a rubric label is missing or unresolved."]
        if incomplete
        else []
    )
    unpaired_rows = _unpaired_rows(items, records, incomplete)
    cells = ssi.ssi_cells(records)
    comparisons = ssi.ssi_comparisons(records)
    prevalence = ssi.rubric_prevalence(records)
    report.tables.append(
        Table(
            "ssi_cells",
            "Mean SSI by category, model and condition",
            [
                Column("category", "label"),
                Column("model", "label"),
                Column("condition", "label"),
                Column("mean_ssi", "estimate"),
                Column("n_sets", "n"),
                Column("reason", "text"),
            ],
            [[c.category, c.model, c.condition, c.mean, c.n_sets, c.reason] for c in cells],
            len(records),
            notes,
            method=Method(SSI_ESTIMATOR, reference="SSI section 4, Table 4", unit="image sets"),
        )
    )
    comparison_table = _comparison_table(comparisons, len(records), len(unpaired_rows))
    adjust_p_values(
        comparison_table,
        report.correction,
        family="one paired t-test per category and model, and per category with the models pooled "
        "(model 'all', overlapping the per-model tests)",
        paper=PAPER_CORRECTION,
    )
    report.tables.append(comparison_table)
    report.tables.append(
        Table(
            "ssi_unpaired",
            "Image sets the paired t-test cannot use (no partner of the other condition)",
            [
                Column("category", "label"),
                Column("model", "label"),
                Column("query", "label"),
                Column("condition", "label"),
                Column("set", "label"),
                Column("initial_prompt", "text"),
                Column("reason", "text"),
            ],
            unpaired_rows,
            len(unpaired_rows),
            method=Method(
                "the image sets the paired t-test cannot pair, listed with the reason (no statistic)",
                reference="SSI section 5 (the paired t-test)",
                unit="image sets",
            ),
        )
    )
    report.tables.append(
        Table(
            "ssi_prevalence",
            "Rubric item prevalence before and after (SSI Fig. 2)",
            [
                Column("category", "label"),
                Column("item", "label"),
                Column("condition", "label"),
                Column("share", "estimate"),
                Column("n_marked", "n"),
                Column("n_sets", "n"),
            ],
            [[p.category, p.item, p.condition, p.share, p.n_marked, p.n_sets] for p in prevalence],
            len(records),
            method=Method(
                "share of image sets with the rubric item marked, n_marked / n_sets",
                reference="SSI Fig. 2",
                unit="image sets",
            ),
        )
    )
    report.figures.append(Figure("ssi_comparisons", "SSI before and after refinement", "ssi_comparisons"))
