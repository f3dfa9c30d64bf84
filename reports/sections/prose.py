"""The report's generated text: a methods paragraph, the results (opening with the headline findings: each
tested table's largest effects with their corrected p) and the limitations (unreliable questions, small
groups, partial items, ...), each written from the same data the tables print (every number filled in,
none typed by hand), in sentences for a reader of a paper (``reports.wording``)."""

from __future__ import annotations

from typing import Any

from findings.report import FindingsReport
from findings.tables import SIGNIFICANCE
from reports.document import BulletList, DocTable, Paragraph, Section, cell_text
from reports.sections.findings import TEST_KINDS, effect_column, ranked_rows
from reports.wording import joined, labeller_words, reader_text

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
    label = reader_text(metrics.source_label or metrics.source)
    why = (
        f", the protocol's default: {reader_text(default['why'])}"
        if metrics.source == default["source"]
        else ", chosen for this report."
    )
    text = (
        f"In {study_name}, {_plural(len(quality['annotators']), 'person')} ({who}) judged "
        f"{_plural(agreement['n_items'], 'item')} (target {overlap} judgements per item) on "
        f"{_plural(len(agreement['questions']), 'question')}. "
        "Inter-rater agreement is Krippendorff's alpha at each question's level of measurement, with a "
        f"percentile bootstrap 95% interval over items ({agreement['n_resamples']:,} resamples, seed "
        f"{agreement['seed']}); control items and excluded people are left out. Machine labellers are "
        "compared with the human consensus by accuracy (Wilson 95% interval), Cohen's kappa and macro F1 "
        "(95% percentile bootstrap intervals over the compared items, 2,000 seeded resamples). "
        f"The findings read labels from the {label} over {_plural(metrics.n_items, 'item')}{why}"
    )
    described = []
    for table in tables:
        if table.method is None:
            continue
        m = table.method
        parts = [f"{table.title}: {joined([m.estimator])} (n counts {m.unit})"]
        if m.interval:
            parts.append(f"interval: {m.interval}")
        if m.test:
            parts.append(f"test: {m.test}")
        if m.correction:
            parts.append(f"correction: {m.correction}")
        if m.reference:
            parts.append(f"as in {m.reference}")
        described.append(joined(parts) + ".")
    paragraphs = [Paragraph(text)]
    if described:
        paragraphs.append(Paragraph(" ".join(described)))
    paragraphs.append(Paragraph(multiple_tests_text(tables, correction)))
    return paragraphs


def p_values_in(table: DocTable) -> tuple[int, bool]:
    """How many defined raw p-values ``table`` holds, and whether it carries corrected ones (a
    ``p_adjusted`` column or a correction in its method record)."""
    raw = [i for i, c in enumerate(table.columns) if c.kind == "p"]
    n = sum(1 for row in table.every_row for i in raw if isinstance(row[i], int | float))
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


def _label_columns(table: DocTable, rows: list[list[Any]]) -> list[int]:
    """The label columns that tell ``rows`` apart (a column with one value in every row says nothing)."""
    return [
        i for i, c in enumerate(table.columns) if c.kind == "label" and len({str(row[i]) for row in rows}) > 1
    ] or [i for i, c in enumerate(table.columns) if c.kind == "label"][:1]


def _column(table: DocTable, kind: str, after: int = -1) -> int | None:
    return next((i for i, c in enumerate(table.columns) if c.kind == kind and i > after), None)


def headline_sentence(table: DocTable, top: int = 3) -> str | None:
    """``table``'s largest effects (``top`` of them, by absolute value) in one sentence, each with its
    corrected p (the raw p where the table corrects none) and its interval where the table has one, and
    how many rows are significant after correction; None for a table with no effect or no defined one."""
    effect = effect_column(table)
    if effect is None:
        return None
    rows = [row for row in ranked_rows(table) if isinstance(row[effect], int | float)]
    if not rows:
        return None
    adjusted, raw = _column(table, "p_adjusted"), _column(table, "p")
    low, high = _column(table, "low", effect), _column(table, "high", effect)
    labels = _label_columns(table, rows)
    name = table.columns[effect].label
    parts = []
    for row in rows[:top]:
        where = ", ".join(str(row[i]) for i in labels)
        tests = []
        if adjusted is not None:
            tests.append(f"corrected p {cell_text(row[adjusted], 'p_adjusted')}")
            if raw is not None:
                tests.append(f"raw p {cell_text(row[raw], 'p')}")
        elif raw is not None:
            tests.append(f"p {cell_text(row[raw], 'p')}, not corrected")
        if low is not None and high is not None and row[low] is not None:
            tests.append(f"95% interval {cell_text((row[low], row[high]), 'interval')}")
        detail = f" ({'; '.join(tests)})" if tests else ""
        parts.append(f"{cell_text(row[effect], table.columns[effect].kind)} for {where}{detail}")
    text = f"{table.title}: the largest {name} {'is' if len(parts) == 1 else 'are'} " + ", then ".join(parts)
    p_at = adjusted if adjusted is not None else raw
    if p_at is not None:
        tested = [row[p_at] for row in table.every_row if isinstance(row[p_at], int | float)]
        below = sum(1 for p in tested if p < SIGNIFICANCE)
        text += f"; {below:,} of {len(tested):,} tests are below {SIGNIFICANCE}" + (
            " after correction" if adjusted is not None else ""
        )
    return text + "."


def headline_paragraphs(tables: list[DocTable]) -> list[Paragraph]:
    """The results' opening: for each findings table with an effect and a test (or a paper's headline
    estimate: ViSAGe's theta, PPI's differences), its largest effects (``headline_sentence``)."""
    sentences = [
        sentence
        for table in tables
        if (
            any(c.kind in TEST_KINDS for c in table.columns)
            or table.key in ("visage_tendency", "ppi_differences")
        )
        and (sentence := headline_sentence(table)) is not None
    ]
    if not sentences:
        return []
    return [Paragraph("Headline findings. " + " ".join(sentences))]


def results_paragraph(
    *, metrics: FindingsReport, agreement: dict[str, Any], machine_rows: list[list[Any]]
) -> Paragraph:
    """The agreement, each labeller's overall accuracy and kappa, and the findings summary's numbers."""
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
            f"{labeller_words(labeller)} on {question}: accuracy {acc}{interval}, kappa {kap}{kap_interval} "
            f"over {n:,} items."
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


# Count columns that are not how many units a row rests on (a number of attributes, terms or scores).
NOT_SAMPLE_SIZES = frozenset(
    {
        "n_attributes",
        "n_stereo_attributes",
        "n_random_terms",
        "n_missing_score",
        "n_none",
        "n_scores",
        "n_scores_used",
        "n_present",
        "n_marked",
        "more_for_width",
        "mentions",
        "count",
        "k",
    }
)


def small_groups(tables: list[DocTable], minimum: int) -> list[str]:
    """Per findings table, how many rows rest on fewer than ``minimum`` units (the study's findings
    minimum), by their sample-size columns."""
    items = []
    for table in tables:
        sizes = [i for i, c in enumerate(table.columns) if c.kind == "n" and c.key not in NOT_SAMPLE_SIZES]
        rows = table.every_row
        if not sizes or not rows:
            continue
        small = sum(
            1 for row in rows if any(isinstance(row[i], int | float) and row[i] < minimum for i in sizes)
        )
        if small:
            unit = table.method.unit if table.method else "items"
            names = ", ".join(table.columns[i].label for i in sizes)
            items.append(
                f"Small groups: {small:,} of {len(rows):,} rows of {table.title} rest on fewer than "
                f"{minimum:,} {unit} ({names}); read their estimates and tests with that in mind."
            )
    return items


def unestimated(tables: list[DocTable], min_people: int | None) -> list[str]:
    """PPI rows left without an estimate (too few people-labelled items)."""
    items = []
    for table in tables:
        effect = effect_column(table)
        if not table.key.startswith("ppi_") or effect is None:
            continue
        missing = sum(1 for row in table.every_row if row[effect] is None)
        if missing:
            least = f" (fewer than {min_people} people-labelled items)" if min_people else ""
            items.append(
                f"{table.title}: {missing:,} of {len(table.every_row):,} rows have no estimate{least}."
            )
    return items


def coverage_text(coverage: dict[str, Any]) -> str | None:
    """How many items the findings count, and how many are partial or unjudged."""
    if not coverage or "n_items" not in coverage:
        return None
    n, settled, partial = coverage.get("n_items", 0), coverage.get("settled", 0), coverage.get("partial", 0)
    none = coverage.get("none", 0)
    if not n or (settled == n and not partial):
        return None
    counted = coverage.get("counted", settled)
    how = (
        "settled and partial items, the partial ones provisionally"
        if coverage.get("include_partial")
        else "settled items only: those with every judgement the study asks for"
    )
    return (
        f"Partial items: the findings count {counted:,} of {n:,} items ({how}); {partial:,} "
        f"{'is' if partial == 1 else 'are'} partial and {none:,} {'has' if none == 1 else 'have'} no "
        "judgement yet."
    )


def _alpha(entry: dict[str, Any]) -> str:
    return "undefined" if entry["alpha"] is None else f"{entry['alpha']:.3f}"


def reliability_items(metrics: FindingsReport, undefined_already: set[str]) -> list[str]:
    """The questions the findings read that people do not agree on, grouped by verdict with their alphas
    (a question whose alpha is undefined because nobody answered it is said with the agreement's)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    items = []
    for entry in metrics.reliability:
        alpha = _alpha(entry)
        if entry.get("excluded"):
            left: dict[str, Any] = next(
                (e for e in metrics.excluded_questions if e["question"] == entry["question"]), {}
            )
            items.append(
                f"{entry['question']} (alpha {alpha}, {entry['verdict']}) is left out of the findings by "
                f"{left.get('by') or 'a researcher'}: {left.get('reason') or 'no reason given'}."
            )
        elif entry["verdict"] != "reliable":
            if entry["alpha"] is None and entry["question"] in undefined_already:
                continue
            groups.setdefault(str(entry["verdict"]), []).append(entry)
    meaning = {
        "unreliable": "people do not agree on them, so the findings that read them are not to be relied on",
        "tentative": "the findings that read them are tentative at best",
        "undefined": "too few items were judged by two or more people to measure agreement",
    }
    for verdict in ("unreliable", "tentative", "undefined"):
        entries = groups.pop(verdict, [])
        if len(entries) == 1:
            entry = entries[0]
            items.append(
                f"{entry['question']}: alpha {_alpha(entry)}, {verdict} ({reader_text(entry['reason'])})."
            )
        elif entries:
            named = ", ".join(
                e["question"] if e["alpha"] is None else f"{e['question']} ({_alpha(e)})" for e in entries
            )
            items.append(
                f"{verdict.capitalize()} questions ({len(entries)}, alpha in brackets): {named}; "
                f"{meaning[verdict]}."
            )
    for verdict, entries in groups.items():
        items.append(f"{verdict.capitalize()} questions: {', '.join(e['question'] for e in entries)}.")
    statement = metrics.reliability_thresholds.get("statement")
    if items and statement:
        items.append(f"Reliability thresholds: {statement}.")
    return items


def limitations(
    *,
    metrics: FindingsReport,
    agreement: dict[str, Any],
    quality: dict[str, Any],
    machine_rows: list[list[Any]],
    tables: list[DocTable],
) -> BulletList:
    """What the data cannot carry: unreliable questions, small groups, partial items, undefined numbers
    and why, tables left empty, notes on unpaired sets, machine labels that disagree with people,
    uncorrected tests, excluded people, and what is not recorded."""
    items: list[str] = []
    undefined: dict[str, list[str]] = {}
    for question in agreement["questions"]:
        for entry in question.get("humans", []):
            if entry["value"] is None and entry["undefined_reason"]:
                undefined.setdefault(entry["undefined_reason"], []).append(entry["label"])
            elif entry["small_sample"]:
                items.append(f"Alpha of {entry['label']}: {entry['small_sample']}.")
    items += reliability_items(metrics, {label for labels in undefined.values() for label in labels})
    for reason, labels in undefined.items():
        items.append(
            f"Alpha is undefined for {_plural(len(labels), 'question')} ({', '.join(labels)}): {reason}."
        )
    if metrics.reliability_note and not metrics.reliability:
        items.append(reader_text(metrics.reliability_note))
    minimum = metrics.coverage.get("minimum") if isinstance(metrics.coverage, dict) else None
    if isinstance(minimum, int):
        items += small_groups(tables, minimum)
    items += unestimated(tables, metrics.min_people)
    coverage = coverage_text(metrics.coverage)
    if coverage:
        items.append(coverage)
    for found in metrics.tables:
        if not found.rows:
            reason = reader_text(found.empty_reason or "nothing to compute")
            items.append(f"{found.title}: no rows ({reason}).")
    if metrics.warning:
        items.append(reader_text(metrics.warning))
    for note in metrics.notes:
        if "paired" in note.lower() or "unpaired" in note.lower():
            items.append(reader_text(note))
    for row in machine_rows:
        question, labeller, group, n, accuracy, *_rest = row
        if group == "all" and accuracy is not None and accuracy < 1:
            items.append(
                f"{labeller_words(labeller)} disagrees with the human consensus on {question} for "
                f"{round((1 - accuracy) * n):,} of {n:,} items."
            )
        if group == "all" and accuracy is None:
            items.append(
                f"{labeller_words(labeller)} on {question}: accuracy undefined (no item both it and the "
                "people labelled)."
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
                blocks=[
                    *headline_paragraphs(tables),
                    results_paragraph(metrics=metrics, agreement=agreement, machine_rows=machine_rows),
                ],
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
