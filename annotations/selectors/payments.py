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
- the platform ids (participant, study or HIT, session, MTurk assignment) for participants.

The CSV (``spreadsheet.csv_lines(rows, PAYMENT_COLUMNS)``) is safe to open in a spreadsheet: a text
cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a leading apostrophe
(OWASP's advice on CSV injection), so a username such as ``-2+3`` or a label such as
``=HYPERLINK(...)`` stays text.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from annotations.models import Assignment, Participant, Pool, Study
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
    "items_timed",
    "seconds_total",
    "seconds_median",
    "first_activity",
    "last_activity",
    "joined_at",
    "completed_at",
]


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return min(a, b)


def payment_rows(study: Study) -> list[dict[str, Any]]:
    """One row per person (see the module's docstring), sorted by annotator name; two queries."""
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
    )
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
    ) in participants:
        row = row_for(user_id, username, pools.get(user_id, Pool.CROWD))
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
