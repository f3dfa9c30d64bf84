"""The report's Agreement section: Krippendorff's alpha per question with its bootstrap interval, the
items and raters behind it and the small-sample warning, read from ``agreement_report`` (the agreement
page and ``/api/studies/{id}/agreement/``); and the consensus: the rule per question, what it left
undecided, what waits for more judgements and what an expert adjudicated (the consensus rows the
consensus page lists).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from annotations.models import ConsensusLabel, Study
from reports.document import Column, DocTable, Paragraph, Section


def alpha_rows(agreement: dict[str, Any]) -> list[list[Any]]:
    """One row per human alpha of the report (one per question; one per option for multi questions)."""
    rows = []
    for question in agreement["questions"]:
        for entry in question.get("humans", []):
            rows.append(
                [
                    question["key"],
                    entry["label"],
                    entry["level"],
                    entry["value"],
                    entry["ci_low"],
                    entry["ci_high"],
                    entry["n_items"],
                    entry["n_judgements"],
                    entry["coders"],
                    entry["small_sample"] or entry["undefined_reason"] or "",
                ]
            )
    return rows


def alpha_table(agreement: dict[str, Any]) -> DocTable:
    rows = alpha_rows(agreement)
    return DocTable(
        key="agreement_alpha",
        title="Krippendorff's alpha of the people, per question",
        columns=[
            Column("question", "Question", "label"),
            Column("label", "Option or question", "label"),
            Column("level", "Level", "text"),
            Column("alpha", "Alpha", "estimate"),
            Column("ci_low", "95% low", "low"),
            Column("ci_high", "95% high", "high"),
            Column("n_items", "Items", "n"),
            Column("n_judgements", "Judgements", "n"),
            Column("coders", "Raters", "n"),
            Column("warning", "Warning or why undefined", "text"),
        ],
        rows=rows,
        n=agreement["n_items"],
        notes=[
            f"Interval: percentile bootstrap over items, {agreement['n_resamples']} resamples, seed "
            f"{agreement['seed']}; control items and excluded annotators left out."
        ],
        source_key="agreement:alpha",
        empty_reason=None if rows else "the protocol has no question whose alpha the workbench computes",
    )


def consensus_rows(study: Study) -> list[list[Any]]:
    """Per question: the rule(s) applied, items resolved, undecided, pending and adjudicated."""
    cells: dict[str, Counter[str]] = defaultdict(Counter)
    rules: dict[str, Counter[str]] = defaultdict(Counter)
    for key, rule, resolved, pending, adjudicated in ConsensusLabel.objects.filter(study=study).values_list(
        "question_key", "rule", "resolved", "pending", "adjudicated_by"
    ):
        rules[key][rule] += 1
        state = "pending" if pending else ("resolved" if resolved else "undecided")
        cells[key][state] += 1
        cells[key]["adjudicated"] += int(adjudicated is not None or rule == "adjudicated")
    order = [q.key for q in study.protocol_obj.questions]
    return [
        [
            key,
            ", ".join(r for r, _ in rules[key].most_common()),
            cells[key]["resolved"],
            cells[key]["undecided"],
            cells[key]["pending"],
            cells[key]["adjudicated"],
        ]
        for key in sorted(cells, key=lambda k: (order.index(k) if k in order else len(order), k))
    ]


def consensus_table(rows: list[list[Any]]) -> DocTable:
    """The consensus rows (``consensus_rows``) as the Agreement section's table."""
    return DocTable(
        key="agreement_consensus",
        title="Consensus per question",
        columns=[
            Column("question", "Question", "label"),
            Column("rule", "Rule", "text"),
            Column("resolved", "Resolved", "n"),
            Column("undecided", "Undecided (ties, no rule met)", "n"),
            Column("pending", "Waiting for judgements", "n"),
            Column("adjudicated", "Adjudicated", "n"),
        ],
        rows=rows,
        n=None,
        source_key="consensus",
        empty_reason=None if rows else "no consensus has been computed for this study",
    )


def agreement_section(study: Study, agreement: dict[str, Any], consensus: list[list[Any]]) -> Section:
    """The Agreement section from the study's agreement report and its ``consensus_rows``."""
    study_alpha = agreement["study_alpha"]
    headline = study_alpha["headline"]
    if headline["median"] is None:
        text = f"No question has a defined alpha ({headline['reason']})."
    else:
        text = (
            f"Per question, {headline['text']} ({agreement['reliability_thresholds']['statement']}); "
            f"{study_alpha['n_small_sample']} alphas rest "
            f"on fewer than 10 items judged by two or more people. {agreement['human_annotators']} people "
            f"judged {agreement['n_items']} items."
        )
    return Section(
        key="agreement",
        title="Agreement",
        blocks=[Paragraph(text), alpha_table(agreement), consensus_table(consensus)],
    )
