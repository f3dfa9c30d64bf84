"""The report's People section: who judged, how they were recruited and paid for their time, how they
were trained and checked, who was excluded and why, and what they said about themselves.

Every number reads a selector a page reads: ``quality_report_cached`` (the quality page: pools, gold
accuracy, attention checks, qualification, exclusions), ``payment_rows`` (the payments CSV: items and
seconds on task per person), ``exclusion_history`` and ``attributes_in_study`` (the demographic answers
given to this study). The workbench stores no pay amount, so pay and the effective hourly pay are left
to the authors (the limitations and the datasheet say so); time on task is the data's.

Demographic answers given by fewer than ``SUPPRESS_BELOW`` people are not named: they are counted together
in one "other answers" row (itself printed "< 5" when fewer than 5 people gave one), so no small group can
be picked out of a report; a question lists at most ``MAX_ANSWERS`` answers.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from annotations.models import Annotator, Invitation, Study
from annotations.selectors.controls import quality_settings
from annotations.selectors.payments import payment_rows
from annotations.selectors.pools import attributes_in_study
from annotations.selectors.quality import exclusion_history
from reports.document import Column, DocTable, Facts, Paragraph, Section

SUPPRESS_BELOW = 5
SUPPRESSED = "< 5"


OTHER_ANSWERS = "other answers (each given by fewer than 5 people)"
# At most this many answers of one question are listed (the most frequent); the rest are counted together.
MAX_ANSWERS = 30


def suppressed_counts(values: Iterable[Any], *, minimum: int = SUPPRESS_BELOW) -> list[tuple[str, int | str]]:
    """Value -> how many people gave it, for the values at least ``minimum`` people gave, sorted by value
    (the ``MAX_ANSWERS`` most frequent when there are more); every rarer value is left unnamed (a rare
    answer can single a person out) and counted in one last ``OTHER_ANSWERS`` row, itself ``"< 5"`` when
    fewer than ``minimum`` people gave one. Empty answers are not counted."""
    counts = Counter(str(v) for v in values if v not in (None, ""))
    shown = {value: n for value, n in counts.items() if n >= minimum}
    if len(shown) > MAX_ANSWERS:
        shown = dict(sorted(shown.items(), key=lambda pair: (-pair[1], pair[0]))[:MAX_ANSWERS])
    rest = sum(n for value, n in counts.items() if value not in shown)
    rows: list[tuple[str, int | str]] = sorted(shown.items())
    if rest:
        label = (
            OTHER_ANSWERS
            if len(shown) == len([n for n in counts.values() if n >= minimum])
            else (f"other answers (fewer than 5 people each, or beyond the {MAX_ANSWERS} most frequent)")
        )
        rows.append((label, rest if rest >= minimum else SUPPRESSED))
    return rows


def time_on_task(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """From payment rows: people with timed items, the median of their median seconds per item, and the
    total hours on timed items."""
    rows = list(rows)
    medians = [r["seconds_median"] for r in rows if r["seconds_median"] is not None]
    return {
        "people_timed": len(medians),
        "median_seconds": statistics.median(medians) if medians else None,
        "hours_total": sum(r["seconds_total"] for r in rows) / 3600,
        "items_completed": sum(r["items_completed"] for r in rows),
    }


def pools_table(quality: dict[str, Any]) -> DocTable:
    """Human annotators per pool, with items judged, gold accuracy and attention checks pooled per pool."""
    by_pool: dict[str, dict[str, Any]] = {}
    for person in quality["annotators"]:
        cell = by_pool.setdefault(
            person["pool"],
            {
                "people": 0,
                "excluded": 0,
                "items": 0,
                "gold_n": 0,
                "gold_correct": 0,
                "att_pass": 0,
                "att_fail": 0,
            },
        )
        cell["people"] += 1
        cell["excluded"] += int(person["excluded"])
        cell["items"] += person["items"]
        cell["gold_n"] += person["gold"]["n"]
        cell["gold_correct"] += person["gold"]["correct"]
        cell["att_pass"] += person["attention"]["passed"]
        cell["att_fail"] += person["attention"]["failed"]
    rows = []
    for pool, c in sorted(by_pool.items()):
        checks = c["att_pass"] + c["att_fail"]
        rows.append(
            [
                pool,
                c["people"],
                c["excluded"],
                c["items"],
                c["gold_n"],
                c["gold_correct"] / c["gold_n"] if c["gold_n"] else None,
                checks,
                c["att_pass"] / checks if checks else None,
            ]
        )
    return DocTable(
        key="people_pools",
        title="Annotators per pool",
        columns=[
            Column("pool", "Pool", "label"),
            Column("people", "People", "n"),
            Column("excluded", "Excluded", "n"),
            Column("items", "Items judged", "n"),
            Column("gold_checks", "Gold checks", "n"),
            Column("gold_accuracy", "Gold accuracy", "estimate"),
            Column("attention_checks", "Attention checks", "n"),
            Column("attention_pass_rate", "Attention pass rate", "estimate"),
        ],
        rows=rows,
        n=sum(r[1] for r in rows),
        notes=[
            "Gold accuracy: correct / checked expected answers on gold items, pooled over the pool's people; "
            "attention pass rate: passed / answered attention checks (quality page)."
        ],
        source_key="quality:pools",
        empty_reason=None if rows else "no person has judged in this study",
    )


def recruitment_table(study: Study) -> DocTable:
    """The study's invitation links: platform, pool, quota, uses and the consent text shown."""
    rows = [
        [
            inv.label or f"invitation {inv.pk}",
            inv.get_platform_display(),
            inv.pool,
            inv.uses,
            inv.max_uses,
            inv.items_per_participant,
            inv.estimated_minutes,
            inv.consent_text,
            ", ".join(str(q.get("label") or q.get("key")) for q in inv.demographics or []),
        ]
        for inv in Invitation.objects.filter(study=study).order_by("created_at", "id")
    ]
    return DocTable(
        key="people_recruitment",
        title="Recruitment (invitation links)",
        columns=[
            Column("invitation", "Invitation", "label"),
            Column("platform", "Platform", "text"),
            Column("pool", "Pool", "text"),
            Column("uses", "People joined", "n"),
            Column("max_uses", "Places", "n"),
            Column("quota", "Quota (items per person)", "n"),
            Column("estimated_minutes", "Estimated minutes", "n"),
            Column("consent", "Consent text", "text"),
            Column("demographics", "Demographic questions", "text"),
        ],
        rows=rows,
        n=len(rows),
        source_key="invitations",
        empty_reason=None
        if rows
        else "no invitation link: annotators were enrolled by the researcher or imported from a file",
    )


def exclusions_table(study: Study) -> DocTable:
    """Exclusions by reason: how many are in force and how many were reinstated."""
    cells: Counter[tuple[str, bool]] = Counter()
    for row in exclusion_history(study):
        cells[(row.reason, row.active)] += 1
    reasons = sorted({reason for reason, _ in cells})
    rows: list[list[Any]] = [[reason, cells[(reason, True)], cells[(reason, False)]] for reason in reasons]
    return DocTable(
        key="people_exclusions",
        title="Exclusions by reason",
        columns=[
            Column("reason", "Reason", "label"),
            Column("excluded", "Excluded", "n"),
            Column("reinstated", "Reinstated", "n"),
        ],
        rows=rows,
        n=sum(cells[(reason, True)] for reason in reasons),
        source_key="quality:exclusions",
        empty_reason=None if rows else "nobody was excluded",
    )


def demographics_table(study: Study, humans: Iterable[int]) -> DocTable:
    """Every demographic answer's counts among the study's people, cells below 5 suppressed."""
    answers = attributes_in_study(study.pk, list(humans))
    keys = sorted({key for attributes in answers.values() for key in attributes})
    rows: list[list[Any]] = []
    for key in keys:
        for value, n in suppressed_counts(attributes.get(key) for attributes in answers.values()):
            rows.append([key, value, n])
    return DocTable(
        key="people_demographics",
        title="Demographic answers",
        columns=[
            Column("question", "Question", "label"),
            Column("answer", "Answer", "label"),
            Column("people", "People", "n"),
        ],
        rows=rows,
        n=sum(1 for attributes in answers.values() if attributes),
        notes=[
            f"Answers given by fewer than {SUPPRESS_BELOW} people are not named: they are counted together "
            f'as "other answers", shown as "{SUPPRESSED}" when fewer than {SUPPRESS_BELOW} people gave one; '
            f"at most {MAX_ANSWERS} answers are listed per question."
        ],
        source_key="demographics",
        empty_reason=None if rows else "no demographic answers were collected",
    )


def people_section(study: Study, quality: dict[str, Any]) -> Section:
    """The People section of ``study``'s report, from its quality report (``quality_report_cached``, read
    once by ``reports.gather`` for every section that needs it)."""
    payments = payment_rows(study)
    timing = time_on_task(payments)
    settings = quality_settings(study)
    qualification = Counter((p["qualification"] or {}).get("state", "none") for p in quality["annotators"])
    machines = (
        Annotator.objects.filter(kind=Annotator.Kind.MACHINE, annotations__study=study).distinct().count()
    )
    facts = Facts(
        pairs=[
            ("People who judged", f"{len(quality['annotators']):,}"),
            ("Machine labellers", f"{machines:,}"),
            ("Items completed (people with accounts)", f"{timing['items_completed']:,}"),
            (
                "Median time on task (median over people of their median seconds per item)",
                "-" if timing["median_seconds"] is None else f"{timing['median_seconds']:.1f} s",
            ),
            ("Hours on timed items", f"{timing['hours_total']:.2f}"),
            ("Pay", "not recorded in the workbench (to complete by the authors)"),
            ("Effective hourly pay", "- (undefined: no pay amount is recorded)"),
            (
                "Qualification",
                f"{settings.qualification_items} gold items at accuracy >= "
                f"{settings.qualification_min_accuracy:.2f}"
                if settings.qualification_items
                else "none",
            ),
            (
                "Qualification states",
                ", ".join(f"{state}: {n}" for state, n in sorted(qualification.items())) or "-",
            ),
            ("Control rate (share of claims serving a control item)", f"{settings.control_rate:.2f}"),
        ]
    )
    humans = [p["annotator_id"] for p in quality["annotators"]]
    return Section(
        key="people",
        title="People",
        blocks=[
            facts,
            pools_table(quality),
            recruitment_table(study),
            exclusions_table(study),
            demographics_table(study, humans),
            Paragraph(
                "Training: the task page shows the protocol's instructions and each question's help; a study "
                "with a qualification serves its gold items first and admits a person once they pass."
            ),
        ],
    )
