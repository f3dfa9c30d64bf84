"""The reliability gate on the findings' tables and figures (docs/metrics.md, "Reliability gate").

``annotations.selectors.reliability`` gives one entry per question (Krippendorff's alpha of the people,
its interval and verdict under the study's thresholds); this module puts on each table the verdicts of
the questions it reads and a warning naming those that are not reliable, and on each figure its table's
warning.
"""

from __future__ import annotations

from typing import Any

from findings.tables import Figure, Table

# Tables read from stored embeddings and captions, not from any question's labels.
NO_LABELS = ("visage_pull", "visage_salience")


def _named(entry: dict[str, Any]) -> str:
    alpha = entry["alpha"]
    value = f"alpha {alpha:.3f}" if alpha is not None else "alpha undefined"
    why = f": {entry['reason']}" if entry["verdict"] == "undefined" and entry["reason"] else ""
    return f"{entry['question']} ({value}, {entry['verdict']}{why})"


def table_warning(entries: list[dict[str, Any]], questions: list[str] | None) -> str | None:
    """The warning of a table (or figure) that reads ``questions`` (None: every question of ``entries``):
    each of them whose verdict is not reliable, named with its alpha; None when all are reliable."""
    weak = [
        e
        for e in entries
        if e["verdict"] != "reliable"
        and not e.get("excluded")
        and e["n_raters"]  # a question nobody answered feeds nothing
        and (questions is None or e["question"] in questions)
    ]
    if not weak:
        return None
    return (
        "Reads labels people do not agree on reliably: "
        + "; ".join(_named(e) for e in weak)
        + ". Read it as tentative at best (docs/metrics.md, Reliability gate)."
    )


def reliability_apply(tables: list[Table], figures: list[Figure], entries: list[dict[str, Any]]) -> None:
    """Set each table's ``reliability`` (the verdicts of the questions it reads) and ``warning``, and each
    figure's ``warning`` (its table's)."""
    warnings: dict[str, str | None] = {}
    for table in tables:
        if table.key in NO_LABELS:
            table.warning, table.reliability = None, []
            continue
        questions: list[str] | None = None
        if "question" in table.names:
            at = table.names.index("question")
            questions = sorted({str(row[at]) for row in table.rows})
        table.reliability = [
            {"question": e["question"], "alpha": e["alpha"], "verdict": e["verdict"]}
            for e in entries
            if (questions is None or e["question"] in questions) and not e.get("excluded") and e["n_raters"]
        ]
        table.warning = warnings[table.key] = table_warning(entries, questions)
    for figure in figures:
        figure.warning, figure.gated = warnings.get(figure.table), True
