"""The generated text says what was done about multiple comparisons, table by table, from the tables."""

from __future__ import annotations

from findings.tables import Method
from reports.document import Column, DocTable
from reports.sections.prose import multiple_tests_text, p_values_in


def _table(
    title: str, columns: list[Column], rows: list[list[object]], method: Method | None = None
) -> DocTable:
    return DocTable(key=title.lower(), title=title, columns=columns, rows=rows, method=method)


RAW = [Column("g", "g", "label"), Column("p", "p", "p")]


def test_tables_with_several_raw_p_values_are_said_to_be_uncorrected() -> None:
    raw = _table("BDS", RAW, [["a", 0.01], ["b", 0.2], ["c", None]])
    one = _table("One", RAW, [["a", 0.01]])
    assert p_values_in(raw) == (2, False) and p_values_in(one) == (1, False)
    assert multiple_tests_text([raw, one], "holm") == (
        "The p-values of BDS (2 tests) are raw: not corrected for multiple comparisons."
    )
    assert multiple_tests_text([one], "holm").startswith("No findings table runs more than one test")


def test_corrected_tables_name_the_correction() -> None:
    adjusted = _table(
        "SSI", [*RAW, Column("p_holm", "p (Holm)", "p_adjusted")], [["a", 0.01, 0.02], ["b", 0.04, 0.04]]
    )
    declared = _table(
        "Agent", RAW, [["a", 0.01], ["b", 0.3]], Method(estimator="mean", correction="Bonferroni")
    )
    text = multiple_tests_text([adjusted, declared], "bh")
    assert text.startswith("Raw and corrected p-values are given for SSI (2 tests); Agent (2 tests)")
    assert "the Benjamini-Hochberg procedure" in text and "raw: not corrected" not in text
