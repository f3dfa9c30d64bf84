"""Walk an audit report's tables and compare every number with the API's value for the same cell:
``/api/studies/{id}/metrics/``, ``/agreement/``, ``/quality/``, ``/exclusions/``, ``/consensus/`` and
``/api/compare/`` (tests/reports/test_report_consistency.py, tests/reports/test_report_visage_full.py)."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from annotations.models import User
from metrics.classification import confusion_intervals
from reports.document import DocTable, ReportDocument
from tests.helpers import client_for

# The tables read from the database directly, not through an API (checked by hand in test_report_people).
NO_API = {
    "design:questions",
    "design:items",
    "design:generation",
    "design:labellers",
    "invitations",
    "demographics",
    "heds",  # the datasheet's Section 4 answers, grouped (tests/reports/test_report_paper.py)
}


def _get(user: User, url: str) -> Any:
    response = client_for(user).get(url)
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval at 95%, by its formula (z = 1.959964)."""
    z, p = 1.959963984540054, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _rows_by(table: DocTable) -> list[dict[str, Any]]:
    return [dict(zip([c.key for c in table.columns], row, strict=True)) for row in table.rows]


def check_metrics(table: DocTable, metrics: dict[str, Any]) -> int:
    api = next(t for t in metrics["tables"] if t["key"] == table.source_key.removeprefix("metrics:"))
    assert [c.key for c in table.columns] == api["columns"]
    assert table.n == api["n_items"]
    # every row (what the supplement's CSV holds) equals the API's, row for row
    assert len(table.every_row) == len(api["rows"])
    checked = 0
    for mine, theirs in zip(table.every_row, api["rows"], strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert _same(a, b), (table.key, mine, theirs)
            checked += 1
    # the body's rows are the API's rows (all of them, or the top rows of a long table)
    if table.full_rows is not None:
        assert len(table.rows) < len(table.full_rows)
        for row in table.rows:
            assert any(_same(row, theirs) for theirs in api["rows"]), (table.key, row)
    else:
        assert table.rows is table.every_row
    return checked


def check_alpha(table: DocTable, agreement: dict[str, Any]) -> int:
    expected = [(q["key"], e) for q in agreement["questions"] for e in q.get("humans", [])]
    rows = _rows_by(table)
    assert len(rows) == len(expected)
    for row, (key, entry) in zip(rows, expected, strict=True):
        assert row["question"] == key and row["label"] == entry["label"]
        for mine, theirs in (
            ("alpha", "value"),
            ("ci_low", "ci_low"),
            ("ci_high", "ci_high"),
            ("n_items", "n_items"),
            ("n_judgements", "n_judgements"),
            ("coders", "coders"),
        ):
            assert _same(row[mine], entry[theirs]), (key, mine)
    return len(rows) * 6


def check_machines(table: DocTable, agreement: dict[str, Any]) -> int:
    expected = []
    for q in agreement["questions"]:
        for comparison in q.get("machines_vs_consensus", []):
            if "overall" in comparison and comparison["n_items"]:
                expected.append((q["key"], comparison["labeller"], "all", comparison["overall"]))
                expected += [
                    (q["key"], comparison["labeller"], str(g["group"]), g["report"])
                    for g in comparison.get("by_condition", [])
                ]
    rows = _rows_by(table)
    assert len(rows) == len(expected)
    for row, (key, labeller, group, report) in zip(rows, expected, strict=True):
        assert (row["question"], row["labeller"], row["condition"]) == (key, labeller, group)
        assert row["n_items"] == report["n_pairs"]
        assert _same(row["accuracy"], report["accuracy"]) and _same(row["kappa"], report["kappa"])
        f1 = [c["f1"] for c in report["per_class"] if c["f1"] is not None]
        assert _same(row["macro_f1"], sum(f1) / len(f1) if f1 else None)
        if report["accuracy"] is not None and report["n_pairs"]:
            low, high = _wilson(round(report["accuracy"] * report["n_pairs"]), report["n_pairs"])
            assert math.isclose(row["accuracy_low"], low, abs_tol=1e-9)
            assert math.isclose(row["accuracy_high"], high, abs_tol=1e-9)
        if report["n_pairs"]:  # the bootstrap of the API's own confusion matrix
            boot = confusion_intervals(report["confusion"])
            kappa = boot.kappa if report["kappa"] is not None else (None, None)
            assert (row["kappa_low"], row["kappa_high"]) == kappa
            assert (row["macro_f1_low"], row["macro_f1_high"]) == boot.macro_f1_interval
    return len(rows) * 11


def check_pools(table: DocTable, quality: dict[str, Any]) -> int:
    rows = {r["pool"]: r for r in _rows_by(table)}
    people = Counter(p["pool"] for p in quality["annotators"])
    assert {pool: r["people"] for pool, r in rows.items()} == dict(people)
    for pool, row in rows.items():
        mine = [p for p in quality["annotators"] if p["pool"] == pool]
        assert row["items"] == sum(p["items"] for p in mine)
        gold_n = sum(p["gold"]["n"] for p in mine)
        assert row["gold_checks"] == gold_n
        assert _same(
            row["gold_accuracy"], sum(p["gold"]["correct"] for p in mine) / gold_n if gold_n else None
        )
        checks = sum(p["attention"]["passed"] + p["attention"]["failed"] for p in mine)
        assert row["attention_checks"] == checks
        assert row["excluded"] == sum(1 for p in mine if p["excluded"])
    return len(rows) * 6


def check_exclusions(table: DocTable, exclusions: list[dict[str, Any]]) -> int:
    expected = Counter((e["reason"], e["reinstated_at"] is None) for e in exclusions)
    for row in _rows_by(table):
        assert row["excluded"] == expected[(row["reason"], True)]
        assert row["reinstated"] == expected[(row["reason"], False)]
    assert sum(r["excluded"] + r["reinstated"] for r in _rows_by(table)) == len(exclusions)
    return len(table.rows) * 2


def check_consensus(table: DocTable, labels: list[dict[str, Any]]) -> int:
    for row in _rows_by(table):
        mine = [label for label in labels if label["question_key"] == row["question"]]
        assert row["resolved"] == sum(1 for label in mine if label["resolved"] and not label["pending"])
        assert row["pending"] == sum(1 for label in mine if label["pending"])
        assert row["undecided"] == sum(1 for label in mine if not label["resolved"] and not label["pending"])
    return len(table.rows) * 3


def check_compare(table: DocTable, comparison: dict[str, Any]) -> int:
    api = next(t for t in comparison["tables"] if t["key"] == table.source_key.removeprefix("compare:"))
    assert [c.key for c in table.columns] == api["columns"]
    assert _same(table.rows, api["rows"])
    return sum(len(r) for r in table.rows)


def _study_of(document: ReportDocument, table: DocTable) -> int:
    """The study a table of ``document`` belongs to: in a compare report, the study of its section."""
    if len(document.study_ids) == 1:
        return document.study_ids[0]
    for section in document.sections:
        stack = list(section.subsections)
        while stack:
            sub = stack.pop()
            if any(block is table for block in sub.blocks):
                return int(section.key.removeprefix("study-"))
            stack.extend(sub.subsections)
    return document.study_ids[0]


def walk(document: ReportDocument, user: User) -> dict[str, int]:
    """Compare every table of ``document`` with the API; how many cells were checked, per source."""
    cache: dict[str, Any] = {}

    def api(url: str) -> Any:
        if url not in cache:
            cache[url] = _get(user, url)
        return cache[url]

    checked: Counter[str] = Counter()
    for table in document.tables():
        if table.source_key in NO_API:
            continue
        sid = _study_of(document, table)
        source = table.source_key
        if source.startswith("metrics:"):
            checked["metrics"] += check_metrics(table, api(f"/api/studies/{sid}/metrics/"))
        elif source == "agreement:alpha":
            checked[source] += check_alpha(table, api(f"/api/studies/{sid}/agreement/"))
        elif source == "agreement:machines":
            checked[source] += check_machines(table, api(f"/api/studies/{sid}/agreement/"))
        elif source == "quality:pools":
            checked[source] += check_pools(table, api(f"/api/studies/{sid}/quality/"))
        elif source == "quality:exclusions":
            checked[source] += check_exclusions(table, api(f"/api/studies/{sid}/exclusions/"))
        elif source == "consensus":
            checked[source] += check_consensus(table, api(f"/api/studies/{sid}/consensus/"))
        elif source.startswith("compare:"):
            query = "&".join(f"study={s}" for s in document.study_ids)
            checked["compare"] += check_compare(table, api(f"/api/compare/?{query}"))
        else:
            raise AssertionError(f"table {table.key} names a source the test does not know: {source}")
    return dict(checked)
