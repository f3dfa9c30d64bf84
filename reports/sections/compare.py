"""The compare report's section: several studies' findings side by side, read from ``comparison_report``
(the ``/compare/`` page and ``/api/compare/``), each aligned table as a DocTable with the same columns."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from annotations.models import Study
from findings.comparison import ComparisonSide, comparison_report
from reports.document import BulletList, Column, DocTable, Facts, Section

# An aligned comparison table's columns carry no declared kinds: read from the column's name and values.
N_NAMES = re.compile(r"^(n|count|support|correct|k)$|^n_|_n$|^n\d|_count$|^items?$|^images?$|^judgements$")
P_NAMES = re.compile(r"^p$|^p_value$|^pvalue$|_p$|^p_raw$")
P_ADJUSTED_NAMES = re.compile(r"^p_(holm|bh|adj|adjusted|corrected)|_(holm|bh|adjusted)$")
LOW_NAMES = re.compile(r"(^|_)(ci_)?low$|_lo$|^lower$")
HIGH_NAMES = re.compile(r"(^|_)(ci_)?high$|_hi$|^upper$")
STATISTIC_NAMES = re.compile(r"^(t|t_stat|t_statistic|statistic|z|chi2|u)$")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def column_kind(name: str, values: list[Any], position: int) -> str:
    """The kind of one undeclared column, from its name and its values (None values ignored)."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "flag"
    numbers = bool(present) and all(_number(v) for v in present)
    if not numbers:
        return "label" if position == 0 else "text"
    if P_ADJUSTED_NAMES.search(name):
        return "p_adjusted"
    if P_NAMES.search(name):
        return "p"
    if LOW_NAMES.search(name):
        return "low"
    if HIGH_NAMES.search(name):
        return "high"
    if STATISTIC_NAMES.search(name):
        return "statistic"
    if N_NAMES.search(name) and all(float(v).is_integer() for v in present):
        return "n"
    return "estimate"


def comparison_of(studies: Sequence[Study], source: str | None) -> dict[str, Any]:
    """The aligned comparison of ``studies`` (in order, A first), each read from ``source`` (consensus when
    None), as the compare API gives it."""
    sides = [ComparisonSide(study=s, source=source or "consensus") for s in studies]
    return comparison_report(sides=sides)


def aligned_table(table: dict[str, Any]) -> DocTable:
    kinds = [
        # "likelihood_low [B-A]" is read as "likelihood_low": the side in brackets names no kind.
        "label"
        if name in table["key_columns"]
        else column_kind(name.split(" [", 1)[0], [row[i] for row in table["rows"]], i)
        for i, name in enumerate(table["columns"])
    ]
    return DocTable(
        key=f"compare_{table['key']}",
        title=f"{table['title']} (side by side)",
        columns=[
            Column(name, name.replace("_", " "), kind)
            for name, kind in zip(table["columns"], kinds, strict=True)
        ],
        rows=[list(row) for row in table["rows"]],
        n=None,
        notes=list(table["notes"]),
        source_key=f"compare:{table['key']}",
    )


def compare_section(comparison: dict[str, Any]) -> Section:
    """The side-by-side section: who each side is, every aligned table, and what could not be aligned."""
    sides = Facts(
        pairs=[
            (
                f"Side {d['label']}",
                f"{d['name']} (study {d['study']}, {d['protocol'] or 'no protocol'}, "
                f"source {d['source']}, {d['n_items']:,} items)",
            )
            for d in comparison["sides"]
        ]
    )
    notes = [*comparison["warnings"], *comparison["notes"]]
    for label, tables in comparison["only_in"].items():
        notes.append(f"Only in {label}: {', '.join(t['title'] for t in tables)}.")
    blocks: list[Any] = [sides, *(aligned_table(t) for t in comparison["tables"])]
    if notes:
        blocks.append(BulletList(items=notes))
    return Section(key="compare", title="Studies side by side", blocks=blocks)
