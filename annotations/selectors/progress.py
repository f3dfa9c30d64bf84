"""Reads for the researcher's batch pages: how far a study is, per item and per annotator."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from annotations.models import Annotation, Annotator, Assignment, Item, Pool, Study
from annotations.selectors.overlap import policy_opening
from annotations.selectors.pools import pools_in_study

SUBMITTED = Q(assignments__status=Assignment.Status.SUBMITTED)
SKIPPED = Q(assignments__status=Assignment.Status.SKIPPED)


def _leased(now: Any) -> Q:
    return Q(assignments__status=Assignment.Status.LEASED, assignments__lease_expires_at__gt=now)


def item_progress(study: Study, now: Any = None) -> Iterator[dict[str, Any]]:
    """One row per item: submitted judgements, live leases, skips, the judgements it ``needs`` and its state.

    ``needs``: the study's overlap under ``fixed:K``; under an overlap policy (docs/overlap.md) the
    judgements its policy wants now (``Item.policy_slots``, or the policy's opening for an item nobody
    judged), which is what it has once the policy stopped it. States: ``complete`` (submitted judgements
    >= needs, or stopped by its policy), ``in_progress`` (some judgement submitted or a live lease),
    ``untouched`` (neither). Control items are left out: they need no overlap (every annotator may see
    them; docs/crowd.md).
    """
    now = now or timezone.now()
    opening = policy_opening(study)
    rows = (
        Item.objects.filter(study=study, control_kind="")
        .order_by("id")
        .annotate(
            submitted=Count("assignments", filter=SUBMITTED),
            leased=Count("assignments", filter=_leased(now)),
            skipped=Count("assignments", filter=SKIPPED),
        )
        .values(
            "id",
            "external_id",
            "condition",
            "expert_only",
            "submitted",
            "leased",
            "skipped",
            "policy_slots",
            "policy_stopped",
        )
    )
    for values in rows.iterator(chunk_size=2000):
        row: dict[str, Any] = dict(values)
        slots, stopped = row.pop("policy_slots"), row.pop("policy_stopped")
        row["needs"] = slots if slots is not None else opening
        if stopped or row["submitted"] >= row["needs"]:
            state = "complete"
        elif row["submitted"] or row["leased"]:
            state = "in_progress"
        else:
            state = "untouched"
        yield {**row, "state": state}


def annotator_progress(study: Study, now: Any = None) -> list[dict[str, Any]]:
    """One row per person who was handed items: submitted, skipped, live leases, median seconds per item.

    Time per item is the time the task page measured (``time_spent_ms``), or, when a client did
    not send one, the time from lease to submit.
    """
    now = now or timezone.now()
    rows: dict[int, dict[str, Any]] = {}
    times: dict[int, list[float]] = defaultdict(list)
    pools = pools_in_study(study.pk)
    assignments = Assignment.objects.filter(study=study).values_list(
        "annotator_id",
        "annotator__name",
        "status",
        "lease_expires_at",
        "time_spent_ms",
        "created_at",
        "completed_at",
    )
    for annotator_id, name, status, expires, spent, created, completed in assignments.iterator(
        chunk_size=5000
    ):
        row = rows.setdefault(
            annotator_id,
            {
                "annotator": name,
                "pool": pools.get(annotator_id, Pool.CROWD),
                "submitted": 0,
                "skipped": 0,
                "leased": 0,
                "median_seconds": None,
            },
        )
        if status == Assignment.Status.SUBMITTED:
            row["submitted"] += 1
            if spent is not None:
                times[annotator_id].append(spent / 1000)
            elif completed is not None:
                times[annotator_id].append((completed - created).total_seconds())
        elif status == Assignment.Status.SKIPPED:
            row["skipped"] += 1
        elif status == Assignment.Status.LEASED and expires is not None and expires > now:
            row["leased"] += 1
    for annotator_id, values in times.items():
        rows[annotator_id]["median_seconds"] = round(statistics.median(values), 1)
    return sorted(rows.values(), key=lambda row: row["annotator"])


def study_progress(study: Study, now: Any = None) -> dict[str, Any]:
    """Totals for the progress bar: items by state and judgements submitted of those needed (each item's
    ``needs``: under an overlap policy, the judgements the policies want now, so the total falls as
    items stop early and rises where judgements disagree)."""
    counts = {"complete": 0, "in_progress": 0, "untouched": 0}
    judgements = 0
    items = 0
    needed = 0
    for row in item_progress(study, now):
        counts[row["state"]] += 1
        judgements += min(row["submitted"], row["needs"])
        needed += row["needs"]
        items += 1
    return {
        "items": items,
        **counts,
        "judgements": judgements,
        "judgements_needed": needed,
        "percent": round(100 * judgements / needed, 1) if needed else 0.0,
        "status": study.status,
    }


def imported_answers(study: Study) -> dict[str, Any]:
    """The answers a study holds from files (a Label Studio export, a JSONL or COCO import: source
    ``import``), which no annotator gave here and so no assignment counts: per kind of annotator
    (``human``, ``machine``), its ``answers`` (one per question), ``judgements`` (one per item and
    annotator, as the progress bar counts a person's submitted item) and ``annotators``; ``answers``
    in all. The study page's Overview and the progress page show them in the same words
    (``templates/progress/_imported.html``): they count in agreement, consensus and findings, not
    toward the judgements the study's annotators give here."""
    found: dict[str, Any] = {"answers": 0}
    imported = Annotation.objects.filter(study=study, source=Annotation.Source.IMPORT).order_by()
    for kind in (Annotator.Kind.HUMAN, Annotator.Kind.MACHINE):
        rows = imported.filter(annotator__kind=kind)
        answers = rows.count()
        found[str(kind)] = {
            "answers": answers,
            "judgements": rows.values("item_id", "annotator_id").distinct().count() if answers else 0,
            "annotators": rows.values("annotator_id").distinct().count() if answers else 0,
        }
        found["answers"] += answers
    return found
