"""Column kinds: findings tables declare theirs (kept as they are); an aligned comparison table's are inferred
conservatively from their names and values."""

from __future__ import annotations

import pytest

from findings.tables import Column, Method, Table
from reports.sections.compare import column_kind
from reports.sections.findings import doc_table


def test_undeclared_kinds_are_inferred_from_name_and_values() -> None:
    assert column_kind("identity", ["Xland"], 0) == "label"
    assert column_kind("reason", ["x", None], 3) == "text"
    assert column_kind("theta", [None, None], 3) == "text"  # nothing to go by
    assert column_kind("significant", [True, False, None], 2) == "flag"
    assert column_kind("p_value", [0.04, 0.5], 2) == "p"
    assert column_kind("p_holm", [0.08, 0.5], 2) == "p_adjusted"
    assert column_kind("ci_low", [0.1], 2) == "low" and column_kind("ci_high", [0.3], 2) == "high"
    assert column_kind("t", [2.5], 2) == "statistic"
    assert column_kind("n_items", [3, 4], 2) == "n"
    assert column_kind("n_items", [3.5], 2) == "estimate"  # a count is whole
    assert column_kind("bds", [0.2, 1], 2) == "estimate"
    assert column_kind("share", [0.25], 1) == "estimate"


def test_declared_kinds_are_kept_and_rows_are_kept_as_they_are() -> None:
    """A findings table's columns keep the kinds they declare (no guessing from names): ``n`` declared an
    estimate stays an estimate, ``p_value`` declared adjusted stays adjusted."""
    table = Table(
        key="k",
        title="T",
        columns=[Column("group", "label"), Column("n", "estimate"), Column("p_value", "p_adjusted")],
        rows=[["a", 2, 0.5]],
        n_items=2,
        method=Method("share k/n", interval="Wilson", reference="X Table 1", unit="images"),
    )
    doc = doc_table(table)
    assert [c.kind for c in doc.columns] == ["label", "estimate", "p_adjusted"]
    assert doc.rows == [["a", 2, 0.5]] and doc.source_key == "metrics:k" and doc.n == 2
    assert doc.method is not None and doc.method.interval == "Wilson" and doc.method.unit == "images"


def test_a_column_without_a_known_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        Column("n", "count")  # type: ignore[arg-type]
