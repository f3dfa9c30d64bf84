"""The report's generated text: a methods paragraph, a results paragraph and the limitations, each written
from the same data the tables print (every number filled in, none typed by hand)."""

from __future__ import annotations

from typing import Any

from findings.report import FindingsReport
from reports.document import BulletList, DocTable, Paragraph, Section

CORRECTION_NAMES = {"holm": "Holm's step-down method", "bh": "the Benjamini-Hochberg procedure"}


IRREGULAR = {"person": "people"}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {IRREGULAR.get(word, word + 's')}"


def methods_paragraphs(
    *,
    study_name: str,
    metrics: FindingsReport,
    agreement: dict[str, Any],
    quality: dict[str, Any],
    tables: list[DocTable],
    correction: str,
    overlap: int,
) -> list[Paragraph]:
    """How the numbers were made: who judged what, alpha and its interval, machine comparisons, each
    findings table's method record and the multiple-comparison correction asked for."""
    pools: dict[str, int] = {}
    for person in quality["annotators"]:
        pools[person["pool"]] = pools.get(person["pool"], 0) + 1
    who = ", ".join(f"{n:,} {pool}" for pool, n in sorted(pools.items())) or "no"
    default = metrics.source_default
    why = default["why"] if metrics.source == default["source"] else "chosen for this report"
    text = (
        f"In {study_name}, {_plural(len(quality['annotators']), 'person')} ({who}) judged "
        f"{_plural(agreement['n_items'], 'item')} (target {overlap} judgements per item) on "
        f"{_plural(len(agreement['questions']), 'question')}. "
        "Inter-rater agreement is Krippendorff's alpha at each question's level of measurement, with a "
        f"percentile bootstrap 95% interval over items ({agreement['n_resamples']:,} resamples, seed "
        f"{agreement['seed']}); control items and excluded people are left out. Machine labellers are "
        "compared with the human consensus by accuracy (Wilson 95% interval), Cohen's kappa and macro F1 "
        "(95% percentile bootstrap intervals over the compared items, 2,000 seeded resamples). "
        f"The findings read labels from {metrics.source} ({why}) over "
        f"{_plural(metrics.n_items, 'item')}."
    )
    described = []
    for table in tables:
        if table.method is None:
            continue
        m = table.method
        parts = [f"{table.title}: {m.estimator} (n in {m.unit})"]
        if m.interval:
            parts.append(f"interval: {m.interval}")
        if m.test:
            parts.append(f"test: {m.test}")
        if m.correction:
            parts.append(f"correction: {m.correction}")
        if m.reference:
            parts.append(f"as in {m.reference}")
        described.append("; ".join(parts) + ".")
    paragraphs = [Paragraph(text)]
    if described:
        paragraphs.append(Paragraph(" ".join(described)))
    paragraphs.append(Paragraph(multiple_tests_text(tables, correction)))
    return paragraphs


def p_values_in(table: DocTable) -> tuple[int, bool]:
    """How many defined raw p-values ``table`` holds, and whether it carries corrected ones (a
    ``p_adjusted`` column or a correction in its method record)."""
    raw = [i for i, c in enumerate(table.columns) if c.kind == "p"]
    n = sum(1 for row in table.rows for i in raw if isinstance(row[i], int | float))
    corrected = any(c.kind == "p_adjusted" for c in table.columns) or bool(
        table.method and table.method.correction
    )
    return n, corrected


def multiple_tests_text(tables: list[DocTable], correction: str) -> str:
    """What was done about multiple comparisons, table by table: corrected (how), or not."""
    corrected: list[str] = []
    uncorrected: list[str] = []
    for table in tables:
        n, done = p_values_in(table)
        if n > 1:
            (corrected if done else uncorrected).append(f"{table.title} ({n} tests)")
    if not corrected and not uncorrected:
        return "No findings table runs more than one test, so no multiple-comparison correction applies."
    parts = []
    if corrected:
        parts.append(
            f"Raw and corrected p-values are given for {'; '.join(corrected)} (correction asked for: "
            f"{CORRECTION_NAMES.get(correction, correction)}; a table whose method states its own correction "
            "uses that one)."
        )
    if uncorrected:
        parts.append(
            f"The p-values of {'; '.join(uncorrected)} are raw: not corrected for multiple comparisons."
        )
    return " ".join(parts)


def results_paragraph(
    *, metrics: FindingsReport, agreement: dict[str, Any], machine_rows: list[list[Any]]
) -> Paragraph:
    """The headline numbers: the study alpha, each labeller's overall accuracy and kappa, and the findings
    summary's numbers."""
    headline = agreement["study_alpha"]["headline"]
    parts = []
    if headline["median"] is None:
        parts.append(f"No alpha is defined ({headline['reason']}).")
    else:
        parts.append(f"Agreement per question: {headline['text']}.")
    for row in machine_rows:
        question, labeller, group, n, accuracy, low, high, kappa, kappa_low, kappa_high = row[:10]
        if group != "all":
            continue
        acc = "-" if accuracy is None else f"{accuracy:.3f}"
        interval = "" if low is None else f" [{low:.3f}, {high:.3f}]"
        kap = "-" if kappa is None else f"{kappa:.3f}"
        kap_interval = "" if kappa_low is None else f" [{kappa_low:.3f}, {kappa_high:.3f}]"
        parts.append(
            f"{labeller} on {question}: accuracy {acc}{interval}, kappa {kap}{kap_interval} over {n:,} items."
        )
    summary = [
        f"{key.replace('_', ' ')} = {value:.3f}"
        if isinstance(value, float)
        else f"{key.replace('_', ' ')} = {value}"
        for key, value in metrics.summary.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
    if summary:
        parts.append("Findings: " + "; ".join(summary) + ".")
    return Paragraph(" ".join(parts))


def limitations(
    *,
    metrics: FindingsReport,
    agreement: dict[str, Any],
    quality: dict[str, Any],
    machine_rows: list[list[Any]],
    tables: list[DocTable],
) -> BulletList:
    """What the data cannot carry: undefined numbers and why, small samples, tables left empty, notes on
    unpaired sets, machine labels that disagree with people, excluded people, and what is not recorded."""
    items: list[str] = []
    undefined: dict[str, list[str]] = {}
    for question in agreement["questions"]:
        for entry in question.get("humans", []):
            if entry["value"] is None and entry["undefined_reason"]:
                undefined.setdefault(entry["undefined_reason"], []).append(entry["label"])
            elif entry["small_sample"]:
                items.append(f"Alpha of {entry['label']}: {entry['small_sample']}.")
    for reason, labels in undefined.items():
        items.append(
            f"Alpha is undefined for {_plural(len(labels), 'question')} ({', '.join(labels)}): {reason}."
        )
    for entry in metrics.reliability:
        alpha = "undefined" if entry["alpha"] is None else f"{entry['alpha']:.3f}"
        if entry.get("excluded"):
            left: dict[str, Any] = next(
                (e for e in metrics.excluded_questions if e["question"] == entry["question"]), {}
            )
            items.append(
                f"{entry['question']} (alpha {alpha}, {entry['verdict']}) is left out of the findings by "
                f"{left.get('by') or 'a researcher'}: {left.get('reason') or 'no reason given'}."
            )
        elif entry["verdict"] != "reliable":
            items.append(
                f"{entry['question']}: alpha {alpha}, {entry['verdict']} ({entry['reason']}); the findings "
                "that read it are tentative at best."
            )
    if metrics.reliability_note and not metrics.reliability:
        items.append(metrics.reliability_note)
    for found in metrics.tables:
        if not found.rows:
            items.append(f"{found.title}: no rows ({found.empty_reason or 'nothing to compute'}).")
    if metrics.warning:
        items.append(metrics.warning)
    for note in metrics.notes:
        if "paired" in note.lower() or "unpaired" in note.lower():
            items.append(note)
    for row in machine_rows:
        question, labeller, group, n, accuracy, *_rest = row
        if group == "all" and accuracy is not None and accuracy < 1:
            items.append(
                f"{labeller} disagrees with the human consensus on {question} for "
                f"{round((1 - accuracy) * n):,} of "
                f"{n:,} items."
            )
        if group == "all" and accuracy is None:
            items.append(
                f"{labeller} on {question}: accuracy undefined (no item both it and the people labelled)."
            )
    for table in tables:
        n, corrected = p_values_in(table)
        if n > 1 and not corrected:
            items.append(f"{table.title}: {n} p-values, not corrected for multiple comparisons.")
    excluded = [p for p in quality["annotators"] if p["excluded"]]
    if excluded:
        reasons = sorted({p["exclusion"]["reason"] for p in excluded if p.get("exclusion")})
        items.append(
            f"{_plural(len(excluded), 'person')} excluded; their judgements are left out "
            f"(reasons: {'; '.join(reasons)})."
        )
    items.append("Pay is not recorded in the workbench, so effective hourly pay is undefined.")
    return BulletList(items=items)


def prose_section(
    *,
    study_name: str,
    overlap: int,
    metrics: FindingsReport,
    agreement: dict[str, Any],
    quality: dict[str, Any],
    tables: list[DocTable],
    machine_rows: list[list[Any]],
    correction: str,
) -> Section:
    """Methods, results and limitations as one section with three subsections."""
    return Section(
        key="summary",
        title="Methods, results and limitations",
        subsections=[
            Section(
                key="methods",
                title="Methods",
                blocks=list(
                    methods_paragraphs(
                        study_name=study_name,
                        metrics=metrics,
                        agreement=agreement,
                        quality=quality,
                        tables=tables,
                        correction=correction,
                        overlap=overlap,
                    )
                ),
            ),
            Section(
                key="results",
                title="Results",
                blocks=[results_paragraph(metrics=metrics, agreement=agreement, machine_rows=machine_rows)],
            ),
            Section(
                key="limitations",
                title="Limitations",
                blocks=[
                    limitations(
                        metrics=metrics,
                        agreement=agreement,
                        quality=quality,
                        machine_rows=machine_rows,
                        tables=tables,
                    )
                ],
            ),
        ],
    )
