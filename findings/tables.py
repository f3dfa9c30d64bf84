"""The shapes every paper's findings share: Column, Table, Figure, PaperFindings, ``jsonable`` and the
label reader.

The paper modules in ``findings/papers/`` (visage, ssi, biasconnect, agent, soda, ppi; they mirror
``metrics/``) each add their tables and figures to one :class:`PaperFindings`; ``report.py`` picks the
module for a study's protocol and makes the typed ``FindingsReport`` of them. Every column declares its
kind (``Column``); JSON is made at the edges (``Table.to_json``), never read back by guessing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from annotations.models import Study
from annotations.selectors.labels import ItemInfo, LabelSource, labels_for
from metrics.multiple_testing import CORRECTION_NAMES, DEFAULT_CORRECTION, adjust, family_size

# Significance level of every test the findings report (SSI paired t-test, SODA permutation test).
SIGNIFICANCE = 0.05

# What a column of a table holds (``Column.kind``), so that a report renders and checks it without guessing
# from its name: a label (text that names the row), a count (``n``: items, judgements, people), an
# estimate, an interval bound (``low``/``high``), a test statistic, a raw or a corrected p-value, a
# yes/no flag, or free text (a reason, a list).
ColumnKind = Literal["label", "n", "estimate", "low", "high", "statistic", "p", "p_adjusted", "flag", "text"]
COLUMN_KINDS: tuple[ColumnKind, ...] = get_args(ColumnKind)


@dataclass(frozen=True)
class Column:
    """One column of a findings table: its name (the JSON's and the CSV's header) and what it holds."""

    name: str
    kind: ColumnKind

    def __post_init__(self) -> None:
        if self.kind not in COLUMN_KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r}")


@dataclass(frozen=True)
class Method:
    """How one table's numbers were computed: the record a report's methods section reads.

    ``estimator`` names the point estimate (e.g. "share of judgements k/n"), ``interval`` the interval
    method or None, ``test`` the hypothesis test or None, ``correction`` how the table's many tests are
    corrected for multiple comparisons (e.g. "Holm over 12 tests") or None, ``reference`` where the
    paper defines it (e.g. "ViSAGe Table 1") and ``unit`` what one n counts."""

    estimator: str
    interval: str | None = None
    test: str | None = None
    correction: str | None = None
    reference: str = ""
    unit: str = "items"


@dataclass
class Table:
    """One findings table: ``rows`` under ``columns``, the ``n_items`` behind it and notes on reading it."""

    key: str
    title: str
    columns: list[Column]
    rows: list[list[Any]]
    n_items: int
    notes: list[str] = field(default_factory=list)
    empty_reason: str | None = None  # set by the report for a table with no rows: why, and where to look
    # Set by the report: how many items are settled, partial and unjudged, and which it counts
    # (annotations.selectors.coverage.Coverage.as_dict); None for tables read from machine features.
    coverage: dict[str, Any] | None = None
    method: Method | None = None
    # Set by the reliability gate (findings/reliability_gate.py): the verdicts of the questions the table
    # reads, and a warning naming those that are not reliable (None: every one is, or none is read).
    reliability: list[dict[str, Any]] | None = None
    warning: str | None = None

    @property
    def names(self) -> list[str]:
        """The columns' names, in order (the CSV's header)."""
        return [column.name for column in self.columns]

    @property
    def kinds(self) -> list[ColumnKind]:
        """The columns' kinds, in order."""
        return [column.kind for column in self.columns]

    def records(self) -> list[dict[str, Any]]:
        """Each row as a dict by column name."""
        names = self.names
        return [dict(zip(names, row, strict=True)) for row in self.rows]

    def to_json(self) -> dict[str, Any]:
        """The table as the metrics API gives it (columns and kinds as two lists of names)."""
        out: dict[str, Any] = {
            "key": self.key,
            "title": self.title,
            "columns": self.names,
            "rows": jsonable(self.rows),
            "n_items": self.n_items,
            "notes": list(self.notes),
            "empty_reason": self.empty_reason,
            "coverage": jsonable(self.coverage),
            "kinds": list(self.kinds),
            "method": jsonable(self.method),
        }
        if self.reliability is not None:
            out["reliability"] = self.reliability
            out["warning"] = self.warning
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Table:
        """The table ``to_json`` gave (from the cache)."""
        method = data.get("method")
        return cls(
            key=data["key"],
            title=data["title"],
            columns=[Column(name, kind) for name, kind in zip(data["columns"], data["kinds"], strict=True)],
            rows=data["rows"],
            n_items=data["n_items"],
            notes=data["notes"],
            empty_reason=data["empty_reason"],
            coverage=data["coverage"],
            method=Method(**method) if method else None,
            reliability=data.get("reliability"),
            warning=data.get("warning"),
        )


@dataclass
class Figure:
    """A figure the findings page draws from the table keyed ``table`` (``params`` narrow its rows)."""

    key: str
    title: str
    table: str
    params: dict[str, str] = field(default_factory=dict)
    # Set by the reliability gate: the warning of the table it draws (None: no warning).
    warning: str | None = None
    gated: bool = False  # whether the gate has run (the JSON carries ``warning`` only then)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "title": self.title,
            "table": self.table,
            "params": self.params,
        }
        if self.gated:
            out["warning"] = self.warning
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        return cls(
            key=data["key"],
            title=data["title"],
            table=data["table"],
            params=data.get("params") or {},
            warning=data.get("warning"),
            gated="warning" in data,
        )


@dataclass
class PaperFindings:
    """What a paper's section builder fills in: tables, figures, headline numbers and notes."""

    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # How a table that runs many tests corrects them (metrics.multiple_testing: "holm" or "bh"); read by
    # ``adjust_p_values``.
    correction: str = DEFAULT_CORRECTION


# A paper's section builder: reads the study's labels from ``source`` and adds its findings to the report.
Section = Callable[[Study, LabelSource, dict[int, ItemInfo], PaperFindings], None]


def adjust_p_values(table: Table, correction: str, *, family: str, paper: str) -> None:
    """Add ``p_adjusted`` and ``significant_adjusted`` right after ``table``'s ``significant`` column: each
    row's ``p_value`` adjusted by ``correction`` (holm or bh, ``metrics.multiple_testing``) over every row
    of the table with a p-value (``family`` says what those tests are), and whether the adjusted p is below
    SIGNIFICANCE. The raw p and the paper's own ``significant`` flag stay. ``Method.correction`` and the
    notes say which correction over how many tests, and what the paper did (``paper``). The table must
    declare its kinds and method first."""
    assert table.method is not None, table.key
    p_at, flag_at = table.names.index("p_value"), table.names.index("significant")
    raw = [row[p_at] for row in table.rows]
    adjusted = adjust(raw, correction)
    m = family_size(raw)
    for row, q in zip(table.rows, adjusted, strict=True):
        row[flag_at + 1 : flag_at + 1] = [q, None if q is None else q < SIGNIFICANCE]
    table.columns[flag_at + 1 : flag_at + 1] = [
        Column("p_adjusted", "p_adjusted"),
        Column("significant_adjusted", "flag"),
    ]
    name = CORRECTION_NAMES[correction]
    tests = f"{m} test{'' if m == 1 else 's'}"
    table.method = dataclasses.replace(
        table.method, correction=f"{name} over {tests} ({family}); the paper: {paper}"
    )
    table.notes.append(
        f"p_adjusted: {name} over the {tests} of this table ({family}); significant_adjusted: p_adjusted < "
        f"{SIGNIFICANCE}. p_value and significant are uncorrected. The paper: {paper} "
        "Choose the correction with ?correction=holm|bh (page and API) or --correction (manage.py metrics)."
    )


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and numpy scalars to plain JSON values; NaN and infinities to None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def label_sets(study: Study, keys: Iterable[str], source: LabelSource) -> dict[str, dict[int, Any]]:
    """Question key -> item id -> the label ``source`` adopts, for each of ``keys``."""
    return {key: labels_for(study, key, source).values for key in keys}
