"""Payment records: what each person did in a study, for paying them and their bonuses (no payment
integration).

One row per human annotator who was handed an item in the study, and per invited participant
(even one who joined and did nothing, so a platform's complaint can be checked):

- ``items_completed``: submitted assignments; ``items_skipped``: skipped ones;
- ``seconds_total`` and ``seconds_median``: sum and median of ``Assignment.time_spent_ms`` (the time
  the task page measured) over submitted assignments that have one, in seconds rounded to 0.1;
  ``items_timed`` says how many had a measurement (an API client may send none);
- ``first_activity``: when the first item was handed to them; ``last_activity``: the latest
  lease or submit; ``joined_at`` and ``completed_at`` for participants;
- for participants, what the completion code asks: ``items_answered`` (submitted items, less failed
  attention checks; skips never count), ``items_required`` (``models.required_answers``) and
  ``completed`` (they were given the code: ``completion_progress``);
- the platform ids (participant, study or HIT, session, MTurk assignment) for participants.

The CSV (``spreadsheet.csv_lines(rows, PAYMENT_COLUMNS)``) is safe to open in a spreadsheet: a text
cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading apostrophe
(OWASP's advice on CSV injection), so a username such as ``-2+3`` or a label such as
``=HYPERLINK(...)`` stays text.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count

from annotations.models import Assignment, ControlKind, Participant, Pool, Study, required_answers
from annotations.selectors.controls import control_outcomes
from annotations.selectors.pools import pools_by_user_in_study

PAYMENT_COLUMNS = [
    "annotator",
    "pool",
    "platform",
    "participant_id",
    "platform_study_id",
    "session_id",
    "assignment_id",
    "invitation",
    "items_completed",
    "items_skipped",
    "items_answered",
    "items_required",
    "completed",
    "items_timed",
    "seconds_total",
    "seconds_median",
    "first_activity",
    "last_activity",
    "joined_at",
    "completed_at",
]


@dataclass(frozen=True)
class CompletionProgress:
    """Where a participant stands with the completion code: ``answered`` items count towards
    ``required`` (submitted ones, less failed attention checks; skipped ones never count)."""

    answered: int
    required: int
    submitted: int = 0
    skipped: int = 0
    failed_checks: int = 0

    @property
    def left(self) -> int:
        return max(0, self.required - self.answered)

    @property
    def reached(self) -> bool:
        return self.answered >= self.required


def failed_attention_checks(study: Study, annotator_ids: Iterable[int]) -> dict[int, int]:
    """How many attention checks each annotator failed (answered otherwise than expected)."""
    outcomes = control_outcomes(study, annotator_ids=annotator_ids)
    return {
        annotator_id: sum(o.kind == ControlKind.ATTENTION and o.passed is False for o in rows)
        for annotator_id, rows in outcomes.items()
    }


def completion_progress(participant: Participant) -> CompletionProgress:
    """How many items the participant answered towards the completion code, and how many it needs
    (``annotations.models.required_answers``); a few queries."""
    study = participant.study
    annotator_id = participant.user.annotator.pk
    counts = dict(
        Assignment.objects.filter(study=study, annotator_id=annotator_id)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    submitted = counts.get(Assignment.Status.SUBMITTED, 0)
    skipped = counts.get(Assignment.Status.SKIPPED, 0)
    failed = failed_attention_checks(study, [annotator_id]).get(annotator_id, 0)
    invitation = participant.invitation
    required = required_answers(
        invitation.min_answered_items, invitation.items_per_participant, handed=submitted + skipped
    )
    return CompletionProgress(
        answered=submitted - failed,
        required=required,
        submitted=submitted,
        skipped=skipped,
        failed_checks=failed,
    )


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return min(a, b)


def payment_rows(study: Study) -> list[dict[str, Any]]:
    """One row per person (see the module's docstring), sorted by annotator name; a few queries."""
    rows: dict[int, dict[str, Any]] = {}
    times: dict[int, list[int]] = {}

    def row_for(user_id: int, name: str, pool: str) -> dict[str, Any]:
        if user_id not in rows:
            rows[user_id] = {
                "annotator": name,
                "pool": pool,
                "platform": "",
                "participant_id": "",
                "platform_study_id": "",
                "session_id": "",
                "assignment_id": "",
                "invitation": "",
                "items_completed": 0,
                "items_skipped": 0,
                "items_answered": None,
                "items_required": None,
                "completed": None,
                "items_timed": 0,
                "seconds_total": 0.0,
                "seconds_median": None,
                "first_activity": None,
                "last_activity": None,
                "joined_at": None,
                "completed_at": None,
            }
            times[user_id] = []
        return rows[user_id]

    pools = pools_by_user_in_study(study.pk)  # the pool in this study, never another study's
    assignments = Assignment.objects.filter(study=study, annotator__user__isnull=False).values_list(
        "annotator__user_id",
        "annotator__name",
        "status",
        "time_spent_ms",
        "created_at",
        "completed_at",
    )
    for user_id, name, status, spent, created, completed in assignments.iterator(chunk_size=5000):
        row = row_for(user_id, name, pools.get(user_id, Pool.CROWD))
        row["first_activity"] = _earlier(row["first_activity"], created)
        row["last_activity"] = _later(row["last_activity"], _later(created, completed))
        if status == Assignment.Status.SUBMITTED:
            row["items_completed"] += 1
            if spent is not None:
                times[user_id].append(spent)
        elif status == Assignment.Status.SKIPPED:
            row["items_skipped"] += 1
    participants = Participant.objects.filter(study=study).values_list(
        "user_id",
        "user__username",
        "platform",
        "participant_id",
        "platform_study_id",
        "session_id",
        "assignment_id",
        "invitation__label",
        "invitation_id",
        "created_at",
        "completed_at",
        "user__annotator__id",
        "invitation__min_answered_items",
        "invitation__items_per_participant",
    )
    rows_of_participants = list(participants)
    failed = failed_attention_checks(study, [p[11] for p in rows_of_participants if p[11] is not None])
    for (
        user_id,
        username,
        platform,
        pid,
        platform_study,
        session,
        assignment,
        label,
        invitation_id,
        joined,
        completed,
        annotator_id,
        minimum,
        quota,
    ) in rows_of_participants:
        row = row_for(user_id, username, pools.get(user_id, Pool.CROWD))
        row.update(
            items_answered=row["items_completed"] - failed.get(annotator_id, 0),
            items_required=required_answers(
                minimum, quota, handed=row["items_completed"] + row["items_skipped"]
            ),
            completed=completed is not None,
        )
        row.update(
            platform=platform,
            participant_id=pid,
            platform_study_id=platform_study,
            session_id=session,
            assignment_id=assignment,
            invitation=label or f"invitation {invitation_id}",
            joined_at=joined,
            completed_at=completed,
        )
    for user_id, timed in times.items():
        if timed:
            rows[user_id]["items_timed"] = len(timed)
            rows[user_id]["seconds_total"] = round(sum(timed) / 1000, 1)
            rows[user_id]["seconds_median"] = round(statistics.median(timed) / 1000, 1)
    return sorted(rows.values(), key=lambda row: row["annotator"])
