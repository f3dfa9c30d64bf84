"""Comparisons across studies: several metrics reports aligned on the same groups (docs/metrics.md).

A *side* is one study read from one label source (``consensus`` or a machine labeller), optionally
narrowed to one ``condition``, one ``model`` or any other group (``where``: ``column=value``, e.g.
``group=nurse``), so "model A vs model B" and "initial vs refined" work across two studies and inside
one. ``comparison_report(sides=...)`` computes each side's
``findings_report`` (the same report as ``manage.py metrics``; no metric is computed here) and aligns them:

- every report table present on more than one side becomes one aligned table: its rows are keyed by the
  table's *group* columns (``TABLE_SPECS``: identity, attribute, category, condition, ...), and each
  side contributes its values and the number of items/images/judgements behind them (``n``); numeric
  values also get the difference of each side from the first side that has the table (B - A, C - A),
  and a difference of shares (count / n: ViSAGe's likelihoods, visual-ness shares) its 95% interval
  (Newcombe's hybrid score, ``metrics.share_difference``);
- a table present on one side only is listed under ``only_in`` (different protocols share nothing);
- when every side fixes a condition (or a model, or a ``where`` column), the rows are narrowed to it and
  that column leaves the key; tables without such a column are listed under ``not_comparable``;
- when no side fixes a model and every side has exactly one model in a table, and they differ, the
  ``model`` column leaves that table's key (the pooled ``all`` rows repeat the single model and are
  dropped), so study A (model m1) and study B (model m2) line up. The table's notes say so.

Reads only (through the cached reports); no locks.
"""

from __future__ import annotations

import re
import string
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from annotations.models import Study
from annotations.selectors.labels import CONSENSUS
from common.checked_input import MAX_ID, id_from_text
from common.errors import ValidationFailed
from findings.report import findings_report, findings_report_cached
from metrics.multiple_testing import DEFAULT_CORRECTION
from metrics.share_difference import METHOD as SHARE_METHOD
from metrics.share_difference import share_difference
from metrics.ssi import ALL_MODELS

MAX_SIDES = 6
CONDITION, MODEL = "condition", "model"
LISTED = "listed"
SUMMARY_KEY = "summary"
NO_DIFFERENCE = frozenset({"p_value", "p_adjusted"})  # a difference of p-values means nothing
MAX_TEXT = {"source": 200, CONDITION: 128, MODEL: 255, "where": 300}
COLUMN_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True)
class TableSpec:
    """How one report table aligns: ``keys`` name a group, ``values`` are compared, ``n`` is behind a value.

    ``n``: a column, several columns summed, or None for the table's ``n_items``. ``n_per``: ``n`` is the
    sum of the ``n`` column over the rows that share these columns (a distribution's share).
    An empty ``values`` compares membership: the value is whether the group is listed at all.
    """

    keys: tuple[str, ...]
    values: tuple[str, ...]
    n: str | tuple[str, ...] | None = None
    n_per: tuple[str, ...] | None = None
    shares: tuple[tuple[str, str], ...] = ()
    """(value, count column): a value that is the share count / n (``n`` as above); its difference
    between sides gets Newcombe's interval (``metrics.share_difference``)."""


TABLE_SPECS: dict[str, TableSpec] = {
    "visage_tendency": TableSpec(("identity",), ("l_stereo", "l_random", "theta"), "n_showings"),
    "visage_likelihoods": TableSpec(
        ("identity", "attribute"), ("likelihood",), "n", shares=(("likelihood", "k"),)
    ),
    "visage_offensiveness": TableSpec(("identity",), ("offensiveness",), "n_present"),
    "visage_pull": TableSpec(
        ("identity",),
        ("sim_d_s", "sim_d_ns", "sim_s_ns", "mean_sim"),
        ("n_d_images", "n_s_images", "n_ns_images"),
    ),
    "visage_salience": TableSpec(("identity", "attribute"), ("salience", "rank"), "n_captions"),
    "visualness_shares": TableSpec(("label",), ("share", "count"), "n_items", shares=(("share", "count"),)),
    "visual_attributes": TableSpec(("attribute",), ()),
    "ssi_cells": TableSpec(("category", MODEL, CONDITION), ("mean_ssi",), "n_sets"),
    "ssi_comparisons": TableSpec(
        ("category", MODEL),
        (
            "initial_mean",
            "refined_mean",
            "relative_drop",
            "p_value",
            "significant",
            "p_adjusted",
            "significant_adjusted",
        ),
        "n_pairs",
    ),
    "ssi_unpaired": TableSpec(("category", MODEL, "query", CONDITION, "set"), ()),
    "ssi_prevalence": TableSpec(("category", "item", CONDITION), ("share",), "n_sets"),
    "biasconnect_is": TableSpec(("group", "intervened_axis", "axis"), ("is",)),
    "biasconnect_deviation": TableSpec(("group", "axis"), ("w_bar",), "n_images"),
    "biasconnect_distributions": TableSpec(
        ("group", CONDITION, "axis", "option"), ("share", "count"), "count", ("group", CONDITION, "axis")
    ),
    "agent_scores": TableSpec(
        ("dimension", "subgroup", "pair"), ("score", "target_share", "majority", "detected"), "n"
    ),
    "agent_comparison": TableSpec(("labeller", "dimension"), ("mean_abs_difference",), "n_pairs"),
    "agent_pairs": TableSpec(
        ("labeller", "dimension", "pair"), ("human_share", "machine_share", "detection_agrees")
    ),
    "soda_bds": TableSpec(
        (MODEL, "object", CONDITION),
        ("bds", "p_value", "significant", "p_adjusted", "significant_adjusted"),
        ("n_base", "n_group"),
    ),
    "soda_cds": TableSpec(("dimension",), ("cds",)),
    "soda_vac": TableSpec((MODEL, "object", CONDITION), ("vac",), "n_images"),
    "soda_vac_thresholded": TableSpec((MODEL, "object"), ("vac",), "n_scores_used"),
    "soda_concentrated": TableSpec((MODEL, "object", CONDITION, "attribute"), ("value",), "n"),
    "soda_shifts": TableSpec(
        (MODEL, "object", CONDITION, "attribute"),
        ("base_value", "base_share", "group_value", "group_share", "changed"),
    ),
    "ppi_estimates": TableSpec(
        ("question", "option", "group_by", "group"),
        ("estimate", "low", "high", "human_only", "machine_only"),
        "n_people",
    ),
    "ppi_differences": TableSpec(
        ("question", "option", "group_by", "group", "reference"), ("difference", "low", "high", "human_only")
    ),
    "ppi_accuracy": TableSpec(("question", "group_by", "group"), ("accuracy", "low", "high"), "n_people"),
    SUMMARY_KEY: TableSpec(("metric",), ("value",)),
}


@dataclass(frozen=True)
class SideQuery:
    """One side as asked for (ids and strings, before access checks)."""

    study_id: int
    source: str = CONSENSUS
    condition: str | None = None
    model: str | None = None
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ComparisonSide:
    study: Study
    source: str = CONSENSUS
    condition: str | None = None
    model: str | None = None
    where: tuple[tuple[str, str], ...] = ()

    @property
    def narrow(self) -> dict[str, str]:
        """Column -> value the side's rows are narrowed to (condition, model and the ``where`` pairs)."""
        out = dict(self.where)
        if self.condition is not None:
            out[CONDITION] = self.condition
        if self.model is not None:
            out[MODEL] = self.model
        return out


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _spread(name: str, values: Sequence[str], n: int) -> list[str]:
    """One value per study: none given (blank), one for all, or one per study in order."""
    if not values:
        return [""] * n
    if len(values) == 1:
        return [values[0]] * n
    if len(values) != n:
        raise ValidationFailed(
            f"give one {name} for all studies or one per study ({len(values)} given for {n} studies)",
            {name: "count does not match the studies"},
        )
    return list(values)


def where_parse(text: str) -> tuple[tuple[str, str], ...]:
    """``column=value[; column=value]`` (blank: nothing) into pairs; the column is a table's group column."""
    pairs = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        column, sep, value = part.partition("=")
        column, value = column.strip(), value.strip()
        if not sep or not COLUMN_NAME.fullmatch(column) or not value:
            raise ValidationFailed(
                f"narrow with column=value (e.g. group=nurse), not {part[:60]!r}",
                {"where": "not column=value"},
            )
        if column in (CONDITION, MODEL):
            raise ValidationFailed(f"give the {column} in its own field, not in where", {"where": column})
        pairs.append((column, value))
    return tuple(pairs)


def comparison_query_parse(
    *,
    studies: Sequence[str],
    sources: Sequence[str] = (),
    conditions: Sequence[str] = (),
    models: Sequence[str] = (),
    wheres: Sequence[str] = (),
) -> list[SideQuery]:
    """Sides from repeated query parameters, paired by position (a blank study drops its whole position).

    ``sources``, ``conditions``, ``models`` and ``wheres`` each hold nothing, one value for every study, or
    one per study. A blank source is ``consensus``; a blank condition, model or where does not narrow.
    """
    n = len(studies)
    spread = {
        "source": _spread("source", sources, n),
        CONDITION: _spread(CONDITION, conditions, n),
        MODEL: _spread(MODEL, models, n),
        "where": _spread("where", wheres, n),
    }
    out = []
    for i, raw in enumerate(studies):
        raw = raw.strip()
        if not raw:
            continue
        study_id = id_from_text(raw)
        if study_id is None:
            raise ValidationFailed(
                f"study must be a study id (a number up to {MAX_ID}), not {raw[:40]!r}",
                {"study": "not an id"},
            )
        text = {k: v[i].strip()[: MAX_TEXT[k]] for k, v in spread.items()}
        out.append(
            SideQuery(
                study_id,
                text["source"] or CONSENSUS,
                text[CONDITION] or None,
                text[MODEL] or None,
                where_parse(text["where"]),
            )
        )
    return out


def comparison_sides(*, studies: Sequence[Study], queries: Sequence[SideQuery]) -> list[ComparisonSide]:
    """Sides from the studies the caller fetched through ``access`` (in the order of ``queries``)."""
    return [
        ComparisonSide(study=s, source=q.source, condition=q.condition, model=q.model, where=q.where)
        for s, q in zip(studies, queries, strict=True)
    ]


def side_label(index: int) -> str:
    return string.ascii_uppercase[index]


def _describe(side: ComparisonSide) -> str:
    parts = [side.study.name, side.source]
    if side.condition:
        parts.append(f"condition {side.condition}")
    if side.model:
        parts.append(f"model {side.model}")
    parts += [f"{column} {value}" for column, value in side.where]
    return " · ".join(parts)


def _check_sides(sides: Sequence[ComparisonSide]) -> None:
    if len(sides) < 2:
        raise ValidationFailed(
            "pick at least two studies to compare (or one study twice, with different sources, "
            "conditions or models)",
            {"study": "fewer than two"},
        )
    if len(sides) > MAX_SIDES:
        raise ValidationFailed(f"compare at most {MAX_SIDES} studies at once", {"study": "too many"})
    seen: dict[tuple[int, str, tuple[tuple[str, str], ...]], int] = {}
    for i, side in enumerate(sides):
        key = (side.study.pk, side.source, tuple(sorted(side.narrow.items())))
        if key in seen:
            raise ValidationFailed(
                f"side {side_label(i)} repeats side {side_label(seen[key])}: same study, source, "
                "condition, model and where",
                {"study": "repeated"},
            )
        seen[key] = i
    for column in dict.fromkeys(c for side in sides for c in side.narrow):
        if not all(column in side.narrow for side in sides):
            raise ValidationFailed(
                f"give a {column} to every study or to none (rows of a {column} line up only "
                f"with rows of another {column})",
                {column: "some sides only"},
            )


def _flatten(summary: Any, path: str = "") -> list[list[Any]]:
    """Numeric (and undefined) leaves of a report summary as [dotted path, value] rows."""
    if isinstance(summary, dict):
        return [row for k, v in summary.items() for row in _flatten(v, f"{path}.{k}" if path else str(k))]
    return [[path, summary]] if (is_number(summary) or summary is None) and path else []


def _summary_table(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": SUMMARY_KEY,
        "title": "Headline numbers (report summary)",
        "columns": ["metric", "value"],
        "rows": _flatten(report["summary"]),
        "n_items": report["n_items"],
        "notes": [],
    }


def _spec(table: dict[str, Any]) -> TableSpec:
    """The declared spec, else a guess for a table added later: text columns key, numeric columns value."""
    if table["key"] in TABLE_SPECS:
        return TABLE_SPECS[table["key"]]
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
    keys, values = [], []
    for column in table["columns"]:
        seen = [r[column] for r in rows if r[column] is not None]
        if column == "reason":
            continue
        if seen and all(isinstance(v, str) for v in seen):
            keys.append(column)
        elif seen and all(is_number(v) or isinstance(v, bool) for v in seen):
            values.append(column)
    n = "n" if "n" in table["columns"] else None
    return TableSpec(tuple(keys), tuple(v for v in values if v != n), n)


@dataclass
class _Side:
    label: str
    table: dict[str, Any]
    rows: list[dict[str, Any]]


def _n_of(
    spec: TableSpec, table: dict[str, Any], row: dict[str, Any], totals: dict[tuple[Any, ...], int]
) -> Any:
    if spec.n_per is not None:
        return totals.get(tuple(row.get(c) for c in spec.n_per))
    if spec.n is None:
        return table["n_items"]
    if isinstance(spec.n, tuple):
        parts = [row.get(c) for c in spec.n]
        return sum(p for p in parts if is_number(p)) if any(is_number(p) for p in parts) else None
    return row.get(spec.n)


def _align(key: str, spec: TableSpec, present: list[_Side], filters: dict[str, bool]) -> dict[str, Any]:
    """One aligned table from the sides that have it (see the module docstring)."""
    keys = [c for c in spec.keys if not filters.get(c)]
    notes: list[str] = []
    if MODEL in keys and not filters.get(MODEL):
        models = {s.label: {r.get(MODEL) for r in s.rows} - {ALL_MODELS} for s in present}
        if all(len(m) == 1 for m in models.values()) and len({next(iter(m)) for m in models.values()}) > 1:
            keys.remove(MODEL)
            for s in present:
                s.rows = [r for r in s.rows if r.get(MODEL) != ALL_MODELS]
            notes.append(
                "Each side has one model ("
                + ", ".join(f"{label}: {next(iter(m))}" for label, m in models.items())
                + "), so rows line up across models; the pooled 'all' rows repeat them and are left out."
            )
    values = list(spec.values) or [LISTED]
    by_side: dict[str, dict[tuple[Any, ...], tuple[dict[str, Any], Any]]] = {}
    order: dict[tuple[Any, ...], None] = {}
    for s in present:
        totals: dict[tuple[Any, ...], int] = defaultdict(int)
        if spec.n_per is not None and isinstance(spec.n, str):  # n_per sums one column per group
            for r in s.rows:
                if is_number(r.get(spec.n)):
                    totals[tuple(r.get(c) for c in spec.n_per)] += r[spec.n]
        mine: dict[tuple[Any, ...], tuple[dict[str, Any], Any]] = {}
        repeated = 0
        for r in s.rows:
            group = tuple(r.get(c) for c in keys)
            if group in mine:
                repeated += 1
                continue
            mine[group] = (r, _n_of(spec, s.table, r, totals))
            order.setdefault(group)
        if repeated:
            notes.append(f"{s.label}: {repeated} rows repeat a group already shown and are left out.")
        by_side[s.label] = mine

    def value(label: str, group: tuple[Any, ...], column: str) -> Any:
        found = by_side[label].get(group)
        if column == LISTED:
            return found is not None
        return None if found is None else found[0].get(column)

    numeric = [
        v
        for v in values
        if v not in NO_DIFFERENCE
        and v != LISTED
        and any(is_number(r.get(v)) for s in present for r in s.rows)
    ]
    labels = [s.label for s in present]
    reference, others = labels[0], labels[1:]
    columns = list(keys)
    for label in labels:
        columns += [f"{v} [{label}]" for v in values] + [f"n [{label}]"]
    shares = [(v, k) for v, k in spec.shares if v in numeric]
    intervals = [f"{v}_{end}" for v, _ in shares for end in ("low", "high")]
    for label in others:
        columns += [f"{v} [{label}-{reference}]" for v in numeric]
        columns += [f"{c} [{label}-{reference}]" for c in intervals]
    rows = []
    for group in order:
        row = list(group)
        for label in labels:
            found = by_side[label].get(group)
            row += [value(label, group, v) for v in values] + [None if found is None else found[1]]
        for label in others:
            for v in numeric:
                a, b = value(reference, group, v), value(label, group, v)
                row.append(b - a if is_number(a) and is_number(b) else None)
            for _, count in shares:
                row += _share_interval(by_side[reference].get(group), by_side[label].get(group), count)
        rows.append(row)
    if shares:
        notes.append(f"Intervals of the differences of {', '.join(v for v, _ in shares)}: {SHARE_METHOD}.")
    first = present[0].table
    return {
        "key": key,
        "title": first["title"],
        "sides": labels,
        "reference": reference,
        "key_columns": keys,
        "value_columns": values,
        "difference_columns": numeric,
        # "<value>_low" / "<value>_high" of each difference (of a share only), after the differences.
        "interval_columns": intervals,
        "n_items": {s.label: s.table["n_items"] for s in present},
        "n_groups": {label: len(by_side[label]) for label in labels},
        "columns": columns,
        "rows": rows,
        "notes": notes,
        # The reliability gate of each side's table (findings/reliability_gate.py): the questions its
        # people do not agree on reliably, named with their alpha; only the sides that have one.
        "warnings": [
            {"side": s.label, "warning": s.table["warning"]} for s in present if s.table.get("warning")
        ],
    }


def _share_interval(
    reference: tuple[dict[str, Any], Any] | None, other: tuple[dict[str, Any], Any] | None, count: str
) -> list[float | None]:
    """[low, high] of other's share minus the reference's, from each side's count and n; [None, None]
    where a side lacks the group or its count and n are not a share (no items: undefined)."""
    if reference is None or other is None:
        return [None, None]
    (row_a, n_a), (row_b, n_b) = reference, other
    k_a: Any = row_a.get(count)  # checked by share_difference
    k_b: Any = row_b.get(count)
    try:  # share_difference refuses what is not a share (no items, not whole counts)
        found = share_difference(k_a, n_a, k_b, n_b)
    except ValueError:
        return [None, None]
    return [found.low, found.high]


def comparison_report(
    *,
    sides: Sequence[ComparisonSide],
    cached: bool = True,
    include_partial: bool = False,
    correction: str = DEFAULT_CORRECTION,
) -> dict[str, Any]:
    """The aligned comparison of ``sides`` (2 to MAX_SIDES, already checked for access by the caller).

    Each side counts its settled items (``include_partial``: partial ones too, provisional); each side
    says how many items are settled, partial and unjudged (``coverage``), and ``warnings`` name the sides
    whose findings rest on fewer items than the minimum. ``correction`` (holm or bh) adjusts the p-values
    of each side's many-test tables over that side's own tests (``findings_report``).

    Raises ValidationFailed for fewer than two or too many sides, a repeated side, a condition, model or
    where column given to some sides only, or a source a study does not have (the message names the side).
    """
    _check_sides(sides)
    compute = findings_report_cached if cached else findings_report
    reports = []
    for i, side in enumerate(sides):
        try:
            reports.append(
                # Aligned in the API's JSON form: the comparison's own tables are JSON-shaped.
                compute(
                    study=side.study,
                    source=side.source,
                    include_partial=include_partial,
                    correction=correction,
                ).to_json()
            )
        except ValidationFailed as exc:
            raise ValidationFailed(
                f"side {side_label(i)} ({side.study.name}): {exc.message}", exc.details
            ) from exc
    filters = dict.fromkeys(sides[0].narrow, True)  # the same columns on every side (checked above)
    narrowed = bool(filters)
    described = []
    tables_by_key: dict[str, list[_Side]] = defaultdict(list)
    titles: dict[str, str] = {}
    not_comparable: dict[str, dict[str, Any]] = {}
    empty: list[str] = []
    for i, (side, report) in enumerate(zip(sides, reports, strict=True)):
        label = side_label(i)
        described.append(
            {
                "label": label,
                "study": side.study.pk,
                "name": side.study.name,
                "protocol": report["protocol"],
                "source": report["source"],
                "condition": side.condition,
                "model": side.model,
                "where": dict(side.where),
                "n_items": report["n_items"],
                "coverage": report["coverage"],
                "description": _describe(side),
                "sources": report["sources"],
            }
        )
        summary = _summary_table(report)
        tables = list(report["tables"]) + ([] if narrowed or not summary["rows"] else [summary])
        had = kept = 0
        for table in tables:
            spec = _spec(table)
            titles.setdefault(table["key"], table["title"])
            missing = [c for c in filters if c not in spec.keys]
            if missing:
                not_comparable[table["key"]] = {
                    "key": table["key"],
                    "title": table["title"],
                    "reason": f"has no {' or '.join(missing)} column",
                }
                continue
            rows = [dict(zip(table["columns"], r, strict=True)) for r in table["rows"]]
            had += len(rows)
            for column, wanted in side.narrow.items():
                rows = [r for r in rows if r.get(column) is not None and str(r.get(column)) == wanted]
            kept += len(rows)
            tables_by_key[table["key"]].append(_Side(label, table, rows))
        if narrowed and had and not kept:
            empty.append(
                f"{label}: no row of {side.study.name} has "
                + ", ".join(f"{column} = {value}" for column, value in side.narrow.items())
                + " (check the spelling)."
            )
    aligned, only_in = [], defaultdict(list)
    for key, present in tables_by_key.items():
        if len(present) < 2:
            only_in[present[0].label].append({"key": key, "title": titles[key]})
            continue
        aligned.append(_align(key, TABLE_SPECS.get(key) or _spec(present[0].table), present, filters))
    notes = empty + [
        f"{side_label(i)}: {note}" for i, report in enumerate(reports) for note in report["notes"]
    ]
    protocols = {d["protocol"] for d in described}
    if len(protocols) > 1:
        notes.insert(
            0,
            "The studies follow different protocols ("
            + ", ".join(f"{d['label']}: {d['protocol'] or 'none'}" for d in described)
            + "): only the tables they share are "
            "aligned; the rest are listed as only in one study.",
        )
    if narrowed:
        notes.insert(
            0,
            f"Each side is narrowed to its {', '.join(filters)}; the headline summary covers whole "
            "studies and is left out.",
        )
    warnings = [
        f"{d['label']} ({d['name']}): {d['coverage']['warning']}"
        for d in described
        if d["coverage"]["warning"]
    ]
    return {
        "sides": described,
        "include_partial": include_partial,
        "correction": correction,
        "warnings": warnings,
        "reference": side_label(0),
        "tables": aligned,
        "only_in": {label: only_in[label] for label in (d["label"] for d in described) if only_in.get(label)},
        "not_comparable": list(not_comparable.values()),
        "notes": notes,
    }


def comparison_long_rows(comparison: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """The whole comparison as one long table: one row per table, group, value column and side."""
    sides = {d["label"]: d for d in comparison["sides"]}
    columns = [
        "table",
        "group",
        "metric",
        "side",
        "study",
        "study_name",
        "source",
        "condition",
        "model",
        "where",
        "value",
        "n",
        "reference",
        "difference",
        "difference_low",
        "difference_high",
    ]
    out = []
    for table in comparison["tables"]:
        index = {c: i for i, c in enumerate(table["columns"])}
        ref = table["reference"]
        for row in table["rows"]:
            group = "; ".join(f"{k}={v}" for k, v in zip(table["key_columns"], row, strict=False))
            for label in table["sides"]:
                side = sides[label]
                for v in table["value_columns"]:
                    diff = index.get(f"{v} [{label}-{ref}]")
                    low, high = index.get(f"{v}_low [{label}-{ref}]"), index.get(f"{v}_high [{label}-{ref}]")
                    out.append(
                        [
                            table["key"],
                            group,
                            v,
                            label,
                            side["study"],
                            side["name"],
                            side["source"],
                            side["condition"],
                            side["model"],
                            "; ".join(f"{k}={w}" for k, w in side["where"].items()),
                            row[index[f"{v} [{label}]"]],
                            row[index[f"n [{label}]"]],
                            ref,
                            None if diff is None else row[diff],
                            None if low is None else row[low],
                            None if high is None else row[high],
                        ]
                    )
    return columns, out
