"""Figures of report tables, drawn with matplotlib's object API (no pyplot state): shared by the findings
and compare pages, their downloads and the audit report (``reports/``), so no page module draws.

``table_figure(table, params, fmt)`` is the one drawing entry point: a typed findings ``Table``, the
params of the report's figure that draws it (they narrow the rows, e.g. one BiasConnect group) and a
format (png, svg, pdf: ``FORMATS``) -> the bytes, or None when that table has no figure.
``figure_render(report, table_key, params, fmt)`` finds the table in a report first (the findings page's
figure URLs).

Each figure says in its title how many items are behind it. A table with no rows (or nothing to draw)
gives a picture that says so and why, never an error. SVG carries no script and no date, PDF no creation
date, so the same table gives the same bytes; untrusted text (identities, labels) is drawn literally
(``plain_text``) and escaped by matplotlib's SVG writer.
"""

from __future__ import annotations

import io
import textwrap
from typing import TYPE_CHECKING, Any

from matplotlib import rc_context
from matplotlib.figure import Figure

from findings.tables import Table

if TYPE_CHECKING:
    from findings.report import FindingsReport

FORMATS = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}
MAX_BARS = 29  # the length of visage Table 1


def _rows(table: Table) -> list[dict[str, Any]]:
    return table.records()


def _title(fig: Figure, table: Table, text: str) -> None:
    """The figure's title, its n, and the table's reliability warning when it has one (a question whose
    people do not agree reliably: the figure says so beside itself, as the table does)."""
    warning = table.warning
    extra = "\n" + plain_text(textwrap.shorten(warning, 150, placeholder=" ...")) if warning else ""
    fig.suptitle(f"{text}\n(n = {table.n_items} items){extra}", fontsize=10)


def _decided(row: dict[str, Any]) -> bool:
    """The table's own decision on a row: the corrected one (``significant_adjusted``) where the table
    corrects its tests, else the raw ``significant``; a figure's marks follow it."""
    return bool(row["significant_adjusted"] if "significant_adjusted" in row else row.get("significant"))


def _mark_text(table: Table, test: str) -> str:
    """The legend of a figure's significance mark, naming the decision it follows."""
    if "p_adjusted" in table.names:
        correction = table.method.correction if table.method else None
        how = (correction or "corrected").split(" over ")[0]
        return f"* {test} p_adjusted < 0.05, {how}"
    return f"* {test} p < 0.05, uncorrected"


def _visage(fig: Figure, table: Table, _params: dict[str, str]) -> None:
    rows = [r for r in _rows(table) if r["eligible"]][:MAX_BARS]
    ax = fig.add_subplot()
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [r["l_stereo"] or 0 for r in rows], height=0.4, label="L(stereo)")
    ax.barh([y - 0.2 for y in ys], [r["l_random"] or 0 for r in rows], height=0.4, label="L(random)")
    ax.set_yticks(list(ys), [r["identity"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("likelihood")
    ax.legend(fontsize=8)
    _title(fig, table, "Stereotypical vs random attribute likelihood")


def _visualness(fig: Figure, table: Table, _params: dict[str, str]) -> None:
    rows = _rows(table)
    ax = fig.add_subplot()
    ax.bar([r["label"].replace("_", " ") for r in rows], [100 * (r["share"] or 0) for r in rows])
    for i, r in enumerate(rows):
        ax.annotate(
            f"{100 * (r['share'] or 0):.2f}%",
            (i, 100 * (r["share"] or 0)),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel("% of attributes (>= 2 of 3 raters)")
    _title(fig, table, "Visual-ness consensus")


def _ssi(fig: Figure, table: Table, _params: dict[str, str]) -> None:
    rows = _rows(table)
    ax = fig.add_subplot()
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["initial_mean"] or 0 for r in rows], width=0.4, label="initial")
    ax.bar([x + 0.2 for x in xs], [r["refined_mean"] or 0 for r in rows], width=0.4, label="refined")
    for x, r in zip(xs, rows, strict=True):
        if _decided(r):
            top = max(r["initial_mean"] or 0, r["refined_mean"] or 0)
            p = r["p_adjusted"] if "p_adjusted" in r else r["p_value"]
            ax.annotate(f"* p={p:.3f}", (x, top), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [f"{r['category']}\n{r['model']}" for r in rows], fontsize=7)
    ax.set_ylabel("mean SSI")
    ax.legend(fontsize=8)
    _title(fig, table, f"SSI before and after refinement ({_mark_text(table, 'paired t-test')})")


def _empty(fig: Figure, table: Table, why: str) -> None:
    """The empty state: the table's title and why there is nothing to draw."""
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, plain_text(f"Nothing to draw: {why}"), ha="center", va="center", wrap=True, fontsize=9)
    fig.suptitle(plain_text(f"{table.title}\n(n = {table.n_items} items)"), fontsize=10)


def _heatmap(
    fig: Figure,
    table: Table,
    rows: list[str],
    cols: list[str],
    cells: dict[tuple[str, str], float | None],
    marks: dict[tuple[str, str], bool],
    text: str,
) -> None:
    if not rows or not cols:
        _empty(fig, table, "no cell to colour")
        return
    ax = fig.add_subplot()
    values = [[cells.get((r, c)) for c in cols] for r in rows]
    data = [[float("nan") if v is None else v for v in row] for row in values]
    image = ax.imshow(data, cmap="coolwarm", aspect="auto")
    fig.colorbar(image, ax=ax)
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if v is not None:
                star = "*" if marks.get((rows[i], cols[j])) else ""
                ax.text(j, i, f"{v:.2f}{star}", ha="center", va="center", fontsize=6)
    _title(fig, table, text)


def _biasconnect(fig: Figure, table: Table, params: dict[str, str]) -> None:
    rows = _rows(table)
    groups = sorted({r["group"] for r in rows})
    group = params.get("group") if params.get("group") in groups else (groups[0] if groups else "")
    chosen = [r for r in rows if r["group"] == group]
    xs = list(dict.fromkeys(r["intervened_axis"] for r in chosen))
    ys = list(dict.fromkeys(r["axis"] for r in chosen))
    _heatmap(
        fig,
        table,
        xs,
        ys,
        {(r["intervened_axis"], r["axis"]): r["is"] for r in chosen},
        {},
        f"Intersectional sensitivity: {group} (rows: axis intervened on)",
    )


def _soda(fig: Figure, table: Table, _params: dict[str, str]) -> None:
    rows = _rows(table)
    names = list(dict.fromkeys(f"{r['model']} / {r['object']}" for r in rows))
    conditions = sorted({r["condition"] for r in rows})
    cells = {(f"{r['model']} / {r['object']}", r["condition"]): r["bds"] for r in rows}
    marks = {(f"{r['model']} / {r['object']}", r["condition"]): _decided(r) for r in rows}
    _heatmap(
        fig,
        table,
        names,
        conditions,
        cells,
        marks,
        f"BDS vs base prompt ({_mark_text(table, 'permutation')})",
    )


def _agent(fig: Figure, table: Table, params: dict[str, str]) -> None:
    rows = _rows(table)
    ax = fig.add_subplot()
    for labeller in dict.fromkeys(r["labeller"] for r in rows):
        mine = [
            r
            for r in rows
            if r["labeller"] == labeller and None not in (r["human_share"], r["machine_share"])
        ]
        ax.scatter([r["human_share"] for r in mine], [r["machine_share"] for r in mine], label=labeller, s=14)
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("human consensus: target-subgroup share")
    ax.set_ylabel("machine: target-subgroup share")
    ax.legend(fontsize=8)
    _title(fig, table, "Stereotype score, human vs machine")


def _pull(fig: Figure, table: Table, _params: dict[str, str]) -> None:
    rows = [r for r in _rows(table) if r["mean_sim"] is not None][:MAX_BARS]
    ax = fig.add_subplot()
    ys = range(len(rows))
    for offset, key, label in (
        (-0.27, "sim_d_s", "Sim(d, s)"),
        (0.0, "sim_d_ns", "Sim(d, ns)"),
        (0.27, "sim_s_ns", "Sim(s, ns)"),
    ):
        ax.barh([y + offset for y in ys], [r[key] or 0 for r in rows], height=0.27, label=label)
    ax.set_yticks(
        list(ys),
        [
            plain_text(f"{r['identity']} (d {r['n_d_images']}, s {r['n_s_images']}, ns {r['n_ns_images']})")
            for r in rows
        ],
        fontsize=7,
    )
    ax.invert_yaxis()
    ax.set_xlabel("mean cosine similarity of image embeddings")
    ax.legend(fontsize=8)
    _title(fig, table, "Stereotypical pull: default vs stereotypical vs non-stereotypical images")


DRAW = {
    "visage_tendency": _visage,
    "visage_pull": _pull,
    "visualness_shares": _visualness,
    "ssi_comparisons": _ssi,
    "biasconnect_is": _biasconnect,
    "soda_bds": _soda,
    "agent_pairs": _agent,
}


def table_figure(table: Table, params: dict[str, str] | None, fmt: str) -> bytes | None:
    """The bytes (``fmt``: png, svg or pdf) of the figure that draws ``table``, narrowed by ``params``
    (the report figure's, e.g. one BiasConnect group; None: none); None when that table has no figure or
    ``fmt`` is not one of FORMATS. A table without rows gives the "nothing to draw" picture."""
    key = table.key
    if key not in DRAW or fmt not in FORMATS:
        return None
    tall = key in ("visage_tendency", "visage_pull") and bool(table.rows)
    fig = Figure(figsize=(7, 7 if tall else 4.5), layout="constrained")
    if table.rows:
        DRAW[key](fig, table, {str(k): str(v) for k, v in (params or {}).items()})
    else:
        _empty(fig, table, table.empty_reason or "the table has no rows")
    return figure_bytes(fig, fmt)


def figure_render(report: FindingsReport, table_key: str, params: dict[str, str], fmt: str) -> bytes | None:
    """The bytes of the figure of ``table_key`` in ``report`` (``table_figure``); None when there is none."""
    table = report.table(table_key)
    if table is None:
        return None
    return table_figure(table, params, fmt)


# No date in an SVG or PDF: the same figure gives the same bytes.
_METADATA: dict[str, dict[str, Any] | None] = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """A drawn matplotlib ``Figure`` as ``fmt`` (png, svg, pdf) bytes."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    buffer = io.BytesIO()
    # A fixed salt for the SVG's element ids (random by default), so the same figure gives the same bytes.
    with rc_context({"svg.hashsalt": "workbench"}):
        fig.savefig(buffer, format=fmt, dpi=110, metadata=_METADATA.get(fmt))
    return buffer.getvalue()


def plain_text(text: str) -> str:
    """Untrusted text as matplotlib shows it literally: '$' would start mathtext (and can fail to parse)."""
    return text.replace("$", r"\$")


def comparison_numeric_values(table: dict[str, Any]) -> list[str]:
    """The value columns of an aligned comparison table that hold a number somewhere (they can be drawn)."""
    index = {c: i for i, c in enumerate(table["columns"])}
    return [
        v
        for v in table["value_columns"]
        if any(
            isinstance(row[index[f"{v} [{label}]"]], int | float)
            and not isinstance(row[index[f"{v} [{label}]"]], bool)
            for row in table["rows"]
            for label in table["sides"]
        )
    ]


def comparison_legend_names(
    comparison: dict[str, Any], table: dict[str, Any], ns: dict[str, list[Any]]
) -> dict[str, str]:
    """Each side's legend entry: its letter, what it is (study, condition, model, the where filters and the
    label source: ``description``) and the n behind its bars (the n per group drawn, and the items of the
    table), wrapped so that no entry is wider than the figure."""
    sides = {d["label"]: d for d in comparison["sides"]}
    names = {}
    for label in table["sides"]:
        counts = sorted(n for n in ns.get(label, []) if isinstance(n, int))
        per_group = (
            ""
            if not counts
            else f"n = {counts[0]} per group"
            if counts[0] == counts[-1]
            else f"n = {counts[0]}-{counts[-1]} per group"
        )
        items = table["n_items"][label]
        n = f"{per_group}; {items} items in all" if per_group else f"{items} items in all"
        text = f"{label}: {sides[label]['description']} ({n})"
        names[label] = plain_text(textwrap.fill(text, width=LEGEND_WIDTH, subsequent_indent="    "))
    return names


LEGEND_WIDTH = 95  # characters per legend line at fontsize 7 in the 7.5-inch figure


def comparison_figure(comparison: dict[str, Any], table_key: str, value: str | None) -> Figure | None:
    """The comparison figure of ``comparison_figure_render``, undrawn (None when there is none)."""
    table = next((t for t in comparison["tables"] if t["key"] == table_key), None)
    if table is None:
        return None
    numeric = comparison_numeric_values(table)
    value = value if value in numeric else (numeric[0] if numeric else None)
    if value is None:
        return None
    index = {c: i for i, c in enumerate(table["columns"])}
    rows = table["rows"][:MAX_BARS]
    n_keys = len(table["key_columns"])
    groups = [plain_text(" / ".join(str(v) for v in row[:n_keys]) or "(all)") for row in rows]
    ns = {label: [row[index[f"n [{label}]"]] for row in rows] for label in table["sides"]}
    names = comparison_legend_names(comparison, table, ns)
    legend_lines = sum(name.count("\n") + 1 for name in names.values())
    fig = Figure(
        figsize=(
            7.5,
            max(3.5, 1.2 + 0.28 * len(rows) * max(1, len(table["sides"])) / 2 + 0.15 * legend_lines),
        ),
        layout="constrained",
    )
    ax = fig.add_subplot()
    height = 0.8 / len(table["sides"])
    for k, label in enumerate(table["sides"]):
        ys = [y - 0.4 + height * (k + 0.5) for y in range(len(rows))]
        xs = [row[index[f"{value} [{label}]"]] for row in rows]
        xs = [
            float(x) if isinstance(x, int | float) and not isinstance(x, bool) else float("nan") for x in xs
        ]
        bars = ax.barh(ys, xs, height=height, label=names[label])
        ax.bar_label(
            bars,
            labels=["" if n is None or x != x else f"n={n}" for n, x in zip(ns[label], xs, strict=True)],
            fontsize=6,
            padding=2,
        )
    ax.set_yticks(list(range(len(rows))), groups, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(plain_text(value))
    ax.axvline(0, color="grey", linewidth=0.6)
    fig.legend(fontsize=7, loc="outside lower center", ncols=1)
    left_out = len(table["rows"]) - len(rows)
    more = f", first {len(rows)} of {len(table['rows'])} groups" if left_out else ""
    fig.suptitle(plain_text(f"{table['title']}: {value} per group{more}"), fontsize=10)
    return fig


def comparison_figure_render(
    comparison: dict[str, Any], table_key: str, value: str | None, fmt: str
) -> bytes | None:
    """PNG, SVG or PDF bytes: per group, one horizontal bar per side for ``value`` (default: the first numeric
    value column) of one aligned table of a comparison (``services.comparison``); None when there is none.

    At most MAX_BARS groups (the first ones, in the table's order); the title says how many are left out, each
    bar is labelled with the n behind it, and the legend names each side (study, condition, model, filters,
    source) with the n per group and the table's items, one side a line, wrapped (never clipped).
    """
    if fmt not in FORMATS:
        return None
    fig = comparison_figure(comparison, table_key, value)
    if fig is None:
        return None
    return figure_bytes(fig, fmt)
