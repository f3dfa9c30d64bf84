"""The report's "Who judged" section: the study's rater pools, their sizes, how far each pool agrees with
itself (alpha) and with each other pool (kappa_x), and the findings that differ between two pools.

A *rater pool* is the people who gave one value of an attribute to this study (region, rater pool: the
grouping of ``agreement --breakdown annotator:KEY``, ``annotations.selectors.pools.pool_keys``: an attribute
with 2 to 8 values). Every number reads a selector or report the pages and the API read:

- sizes: ``attribute_pools`` and the items each pool judged (``pool_judges``), settled for the pool at
  ``PoolSpec.needed`` of its people (the pool source's rule, docs/metrics.md "Rater pools");
- alpha per pool and question: the reliability gate of the pool's findings
  (``cross_pools.pool_reliability_entries``: ``GET /api/studies/{id}/metrics/?source=consensus@KEY=VALUE``'s
  ``reliability``);
- kappa_x, its normalised form and majority agreement between two pools: ``cross_pools.cross_pool_entries``
  with the agreement report's defaults (1000 resamples, seed 0: ``/api/studies/{id}/agreement/?breakdown=
  annotator:KEY``'s ``cross``);
- the findings that differ: ``comparison_report`` of the two pool sources (``/api/compare/?study=X&study=X&
  source=consensus@KEY=A&source=consensus@KEY=B``), the differences B - A of every estimate, the largest
  ``TOP_DIFFERENCES`` by absolute value, with each pool's corrected p where the table has one (each pool's
  own test, over its own family; no table tests the difference between two pools, and none is invented
  here), and the groups listed for one pool only (e.g. a visual attribute).

A pool of fewer than ``SUPPRESS_BELOW`` people is never named (as the People section's demographic answers):
its people are counted together, and it enters no agreement or comparison here.
"""

from __future__ import annotations

import itertools
from typing import Any

from annotations.models import Study
from annotations.selectors.cross_pools import cross_pool_entries, pool_reliability_entries
from annotations.selectors.labels import (
    CONSENSUS,
    JUDGEMENTS,
    pool_judges,
    pool_source_split,
    source_parse,
)
from annotations.selectors.pools import pool_keys
from annotations.selectors.reliability import reliability_thresholds
from findings.comparison import LISTED, ComparisonSide, comparison_report, is_number
from findings.report import JUDGEMENT_PROTOCOLS, FindingsReport, default_source, findings_report_cached
from metrics.multiple_testing import CORRECTION_NAMES
from reports.document import Column, DocTable, Paragraph, Section
from reports.sections.people import SUPPRESS_BELOW
from reports.wording import reader_text

# The largest differences between two pools the section lists (every one is in the compare of the pools).
TOP_DIFFERENCES = 10
# The agreement report's defaults, so kappa_x and its interval are the agreement page's.
CROSS_RESAMPLES = 1000
CROSS_SEED = 0


def pool_kind(study: Study, metrics: FindingsReport) -> str:
    """Which people's labels the pools' findings read: the report's kind of human labels (consensus, or
    every judgement for a visage study), else the protocol's default human reading, else consensus."""
    split = pool_source_split(metrics.source)
    kind = split[0] if split else metrics.source
    if kind not in (CONSENSUS, JUDGEMENTS):
        kind = default_source(study).source
    if kind not in (CONSENSUS, JUDGEMENTS) or (
        kind == JUDGEMENTS and metrics.protocol not in JUDGEMENT_PROTOCOLS
    ):
        kind = CONSENSUS
    return kind


def _kinds(report: FindingsReport) -> dict[str, dict[str, str]]:
    """Table key -> column -> its declared kind."""
    return {table.key: dict(zip(table.names, table.kinds, strict=True)) for table in report.tables}


def _differences(
    comparison: dict[str, Any], kinds: dict[str, dict[str, str]], pools: tuple[str, str]
) -> tuple[list[dict[str, Any]], int]:
    """Every estimate that differs between the two sides of ``comparison`` (B - A, nonzero) and every group
    listed on one side only; and how many estimates were compared."""
    found: list[dict[str, Any]] = []
    compared = 0
    for table in comparison["tables"]:
        index = {column: i for i, column in enumerate(table["columns"])}
        a, b = table["sides"][:2]
        declared = kinds.get(table["key"], {})
        estimates = [v for v in table["difference_columns"] if declared.get(v) == "estimate"]
        for row in table["rows"]:
            group = "; ".join(f"{key}={value}" for key, value in zip(table["key_columns"], row, strict=False))

            def cell(column: str, row: list[Any] = row, index: dict[str, int] = index) -> Any:
                at = index.get(column)
                return None if at is None else row[at]

            base = {
                "table": table["key"],
                "title": table["title"],
                "group": group,
                "pools": list(pools),
                "n": [cell(f"n [{a}]"), cell(f"n [{b}]")],
                "p_adjusted": [cell(f"p_adjusted [{a}]"), cell(f"p_adjusted [{b}]")]
                if f"p_adjusted [{a}]" in index
                else None,
            }
            for value in estimates:
                difference = cell(f"{value} [{b}-{a}]")
                if not is_number(difference):
                    continue
                compared += 1
                if difference != 0:
                    found.append(
                        base
                        | {
                            "value": value,
                            "values": [cell(f"{value} [{a}]"), cell(f"{value} [{b}]")],
                            "difference": difference,
                            # Newcombe's interval, where the value is a share (count / n)
                            "interval": [cell(f"{value}_low [{b}-{a}]"), cell(f"{value}_high [{b}-{a}]")],
                            "note": "",
                        }
                    )
            if LISTED in table["value_columns"]:
                listed = [cell(f"{LISTED} [{a}]"), cell(f"{LISTED} [{b}]")]
                if listed[0] != listed[1]:
                    only = pools[0] if listed[0] else pools[1]
                    found.append(
                        base
                        | {
                            "value": LISTED,
                            "values": listed,
                            "difference": None,
                            "interval": [None, None],
                            "note": f"listed for {only} only",
                        }
                    )
    return found, compared


def _pool_rows(
    study: Study, kind: str, key: str, shown: dict[str, list[int]]
) -> tuple[list[dict[str, Any]], int]:
    """Per pool named: people, items judged and settled for the pool; the judgements a pool item needs."""
    rows = []
    needed = 0
    for value, ids in shown.items():
        pool = source_parse(study, f"{kind}@{key}={value}").pool
        assert pool is not None
        needed = pool.needed
        judges = pool_judges(study, pool)
        rows.append(
            {
                "pool": value,
                "people": len(ids),
                "items": len(judges),
                "settled": sum(1 for n in judges.values() if n >= pool.needed),
            }
        )
    return rows, needed


def who_judged(study: Study, *, metrics: FindingsReport, correction: str) -> dict[str, Any]:
    """The section's data, JSON-ready (the section and the HEDS datasheet read it): per attribute that forms
    rater pools, the pools named (at least ``SUPPRESS_BELOW`` people) and those left unnamed, alpha per
    pool, kappa_x per two pools and the findings that differ between two pools."""
    kind = pool_kind(study, metrics)
    thresholds = reliability_thresholds(study)
    protocol = study.protocol_obj
    questions = [q.key for q in protocol.questions if q.kind != "boxes"]
    keys = []
    for key, pools in pool_keys(study).items():
        shown = {value: ids for value, ids in pools.items() if len(ids) >= SUPPRESS_BELOW}
        hidden = {value: ids for value, ids in pools.items() if value not in shown}
        entry: dict[str, Any] = {
            "key": key,
            "pools": [],
            "left_out": {"pools": len(hidden), "people": sum(len(ids) for ids in hidden.values())},
            "alphas": [],
            "cross": [],
            "differences": [],
            "n_compared": 0,
            "warnings": [],
            "reason": None,
        }
        keys.append(entry)
        if len(shown) < 2:
            entry["reason"] = (
                f"fewer than 2 pools of {key} have {SUPPRESS_BELOW} or more people, so no pool is named or "
                "compared (a smaller pool could single a person out)"
            )
            continue
        entry["pools"], entry["needed"] = _pool_rows(study, kind, key, shown)
        for value, ids in shown.items():
            entry["alphas"] += [
                {"pool": value, **gate}
                for gate in pool_reliability_entries(study, questions, thresholds, ids)
            ]
        entry["cross"] = cross_pool_entries(
            study, protocol, shown, n_resamples=CROSS_RESAMPLES, seed=CROSS_SEED
        )
        reports = {
            value: findings_report_cached(study=study, source=f"{kind}@{key}={value}", correction=correction)
            for value in shown
        }
        entry["warnings"] = [
            f"Pool {value}: {reader_text(report.warning)}"
            for value, report in reports.items()
            if report.warning
        ]
        differences: list[dict[str, Any]] = []
        for first, second in itertools.combinations(shown, 2):
            sides = [ComparisonSide(study=study, source=reports[value].source) for value in (first, second)]
            comparison = comparison_report(sides=sides, correction=correction)
            found, compared = _differences(comparison, _kinds(reports[first]), (first, second))
            differences += found
            entry["n_compared"] += compared
        numeric = sorted(
            (d for d in differences if d["difference"] is not None), key=lambda d: -abs(d["difference"])
        )
        listed = [d for d in differences if d["difference"] is None]
        entry["n_differ"] = len(numeric)
        entry["n_listed_once"] = len(listed)
        entry["differences"] = numeric[:TOP_DIFFERENCES] + listed[:TOP_DIFFERENCES]
    return {"kind": kind, "keys": keys, "correction": correction}


def _pools_table(entry: dict[str, Any]) -> DocTable:
    return DocTable(
        key=f"who_judged_pools_{entry['key']}",
        title=f"Rater pools by {entry['key']}",
        columns=[
            Column("pool", "Pool", "label"),
            Column("people", "People", "n"),
            Column("items", "Items judged", "n"),
            Column("settled", f"Items with {entry['needed']} of the pool's judgements", "n"),
        ],
        rows=[[p["pool"], p["people"], p["items"], p["settled"]] for p in entry["pools"]],
        n=sum(p["people"] for p in entry["pools"]),
        notes=[
            f"A pool's consensus of an item needs {entry['needed']} of its people's judgements: the study's "
            "overlap shared among its pools, rounded up."
        ],
        source_key="who_judged:pools",
    )


def _alpha_table(entry: dict[str, Any]) -> DocTable:
    return DocTable(
        key=f"who_judged_alpha_{entry['key']}",
        title=f"Agreement within each pool of {entry['key']}: Krippendorff's alpha",
        columns=[
            Column("pool", "Pool", "label"),
            Column("question", "Question", "label"),
            Column("alpha", "Alpha", "estimate"),
            Column("low", "95% low", "low"),
            Column("high", "95% high", "high"),
            Column("n_items", "Items", "n"),
            Column("n_raters", "Raters", "n"),
            Column("verdict", "Verdict", "text"),
            Column("reason", "Why", "text"),
        ],
        rows=[
            [
                a["pool"],
                a["question"],
                a["alpha"],
                a["low"],
                a["high"],
                a["n_items"],
                a["n_raters"],
                a["verdict"],
                a["reason"] or "",
            ]
            for a in entry["alphas"]
        ],
        notes=[
            "The reliability gate of each pool's findings: the pool's people only, a multi question's "
            "options pooled, a percentile bootstrap over units (500 resamples, seed 0); undefined below 10 "
            "items judged by two or more of the pool's people."
        ],
        source_key="who_judged:alpha",
    )


def _cross_table(entry: dict[str, Any]) -> DocTable:
    rows = [
        [
            c["question"],
            c["pools"][0],
            c["pools"][1],
            c["kappa_x"],
            c["low"],
            c["high"],
            c["normalised"],
            c["majority_agreement"],
            c["n_items"],
            c["undefined_reason"] or c["small_sample"] or "",
        ]
        for c in entry["cross"]
    ]
    return DocTable(
        key=f"who_judged_cross_{entry['key']}",
        title=f"Agreement between pools of {entry['key']}: cross-replication reliability",
        columns=[
            Column("question", "Question", "label"),
            Column("pool_a", "Pool A", "label"),
            Column("pool_b", "Pool B", "label"),
            Column("kappa_x", "kappa_x", "estimate"),
            Column("low", "95% low", "low"),
            Column("high", "95% high", "high"),
            Column("normalised", "Normalised", "estimate"),
            Column("majority_agreement", "Majority agreement", "estimate"),
            Column("n_items", "Items both rated", "n"),
            Column("reason", "Warning or why undefined", "text"),
        ],
        rows=rows,
        notes=[
            "kappa_x = 1 - D_o/D_e (Wong, Paritosh and Aroyo 2021) on the items both pools rated; "
            "normalised = kappa_x / sqrt(alpha_A alpha_B); majority agreement: the share of items whose two "
            "pool majorities agree. Intervals: percentile bootstrap over items, "
            f"{CROSS_RESAMPLES} resamples, seed {CROSS_SEED}."
        ],
        source_key="who_judged:cross",
        empty_reason=None if rows else "no question with an alpha",
    )


def _differences_table(entry: dict[str, Any], kind: str, correction: str) -> DocTable:
    rows = [
        [
            d["title"],
            d["group"],
            d["value"],
            d["pools"][0],
            d["pools"][1],
            d["values"][0],
            d["values"][1],
            d["difference"],
            d["interval"][0],
            d["interval"][1],
            d["n"][0],
            d["n"][1],
            (d["p_adjusted"] or [None, None])[0],
            (d["p_adjusted"] or [None, None])[1],
            d["note"],
        ]
        for d in entry["differences"]
    ]
    differ, once = entry.get("n_differ", 0), entry.get("n_listed_once", 0)
    corrected = CORRECTION_NAMES.get(correction, correction)
    return DocTable(
        key=f"who_judged_differences_{entry['key']}",
        title=f"Findings that differ between pools of {entry['key']}",
        columns=[
            Column("table", "Finding", "label"),
            Column("group", "Group", "label"),
            Column("value", "Value", "label"),
            Column("pool_a", "Pool A", "label"),
            Column("pool_b", "Pool B", "label"),
            Column("a", "A", "estimate"),
            Column("b", "B", "estimate"),
            Column("difference", "B - A", "estimate"),
            Column("low", "95% low", "low"),
            Column("high", "95% high", "high"),
            Column("n_a", "n A", "n"),
            Column("n_b", "n B", "n"),
            Column("p_adjusted_a", "Corrected p, A", "p_adjusted"),
            Column("p_adjusted_b", "Corrected p, B", "p_adjusted"),
            Column("note", "Note", "text"),
        ],
        rows=rows,
        notes=[
            f"Each pool's findings read its {'judgements' if kind == JUDGEMENTS else 'consensus'} under the "
            f"pooled findings' settled rules and reliability gate (the pool's own alpha). {differ} of the "
            f"{entry['n_compared']} estimates compared differ; the {min(differ, TOP_DIFFERENCES)} largest by "
            f"absolute difference are listed, then groups listed for one pool only ({once}). Corrected p: "
            f"each pool's own test in the table, corrected by {corrected} over that pool's family. A "
            "difference of shares (count / n) has Newcombe's 95% hybrid score interval, which treats the "
            "pools as independent samples and so is wider than a paired interval when both judged the same "
            "items; no other difference here has a p-value or interval of its own."
        ],
        source_key="who_judged:differences",
        empty_reason=None if rows else "no estimate differs between the pools",
    )


def who_judged_section(data: dict[str, Any]) -> Section:
    """The "Who judged" section from ``who_judged``'s data."""
    if not data["keys"]:
        return Section(
            key="who_judged",
            title="Who judged",
            blocks=[
                Paragraph(
                    "The people who judged gave this study no attribute with 2 to 8 values (a region, a "
                    "rater pool), so no rater pools are compared: every finding is the pooled people's."
                )
            ],
        )
    blocks: list[Any] = [
        Paragraph(
            "Whose stereotype? The people who judged are grouped into rater pools by each attribute they "
            "gave this study; each pool's findings are read from its own "
            + ("judgements" if data["kind"] == JUDGEMENTS else "consensus")
            + f". A pool of fewer than {SUPPRESS_BELOW} people is not named."
        )
    ]
    for entry in data["keys"]:
        left = entry["left_out"]
        unnamed = (
            f" {left['pools']} smaller {'pool' if left['pools'] == 1 else 'pools'} ({left['people']} people) "
            "not named."
            if left["pools"]
            else ""
        )
        if entry["reason"]:
            blocks.append(Paragraph(f"By {entry['key']}: {entry['reason']}.{unnamed}"))
            continue
        names = ", ".join(f"{p['pool']} ({p['people']} people)" for p in entry["pools"])
        blocks.append(Paragraph(f"By {entry['key']}: {names}.{unnamed}"))
        blocks += [_pools_table(entry), _alpha_table(entry), _cross_table(entry)]
        blocks.append(_differences_table(entry, data["kind"], data["correction"]))
        blocks += [Paragraph(warning) for warning in entry["warnings"]]
    return Section(key="who_judged", title="Who judged", blocks=blocks)
