"""How a report's cell reads on a page or in a terminal (no domain: numbers, yes/no, lists, mappings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def cell_display(value: Any) -> str:
    """A cell as the page shows it: 4 decimals at most, yes/no, a dash for undefined; a list as
    ``a; b``, a mapping as ``key: value; ...`` (never Python's repr)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value == value else "–"
    if isinstance(value, list | tuple):
        return "; ".join(cell_display(v) for v in value)
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {cell_display(v)}" for k, v in value.items())
    return str(value)


@dataclass(frozen=True)
class DisplayTable:
    """A table ready for a page: a title, column names and rows of display strings (``row_headers``:
    the first cell of each row names the row)."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    row_headers: bool = True


def summary_tables(summary: Mapping[str, Any]) -> list[DisplayTable]:
    """A report's summary of headline numbers as tables, never a raw dict.

    - plain values (numbers, text, lists) together: one table ``name | value``;
    - a mapping of plain values (``thrice_ratio: {value, numerator, denominator, n, reason}``): one
      table titled by its name, one row, a column per field;
    - a mapping of mappings (``detection_accuracy: {labeller: {detection_accuracy, n_pairs}}``): one
      table titled by its name, a row per entry, a column per field (the union, in first-seen order).

    Deeper values are written out by ``cell_display``.
    """
    tables: list[DisplayTable] = []
    plain = [
        [str(name), cell_display(value)] for name, value in summary.items() if not isinstance(value, Mapping)
    ]
    if plain:
        tables.append(DisplayTable("Headline numbers", ["name", "value"], plain))
    for name, value in summary.items():
        if not isinstance(value, Mapping):
            continue
        if value and all(isinstance(entry, Mapping) for entry in value.values()):
            fields = list(dict.fromkeys(field for entry in value.values() for field in entry))
            rows = [
                [str(key), *(cell_display(entry.get(field)) for field in fields)]
                for key, entry in value.items()
            ]
            tables.append(DisplayTable(str(name), ["", *fields], rows))
        else:
            tables.append(
                DisplayTable(
                    str(name),
                    [str(field) for field in value],
                    [[cell_display(v) for v in value.values()]],
                    row_headers=False,
                )
            )
    return tables
