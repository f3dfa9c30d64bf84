"""The submit's two row updates as fixed statements: the lease marked submitted, the item's count raised.

``assignment.save(update_fields=...)`` and ``Item.objects.filter(...).update(...)`` build and compile
an ``UPDATE`` on every submit (a third of the submit's own CPU in ``bench_hot_path``'s profile). Here
each statement's text is written once per database (quoted names from the models) and run with the
new values through ``common.statement_cursor`` (prepared once per PostgreSQL connection). The rows
are the same as the ORM's: both callers hold the assignment's lock, and nothing listens to an
assignment.s save (docs/benchmarks.md, "Claim path at the limit").
"""

from __future__ import annotations

from datetime import datetime
from functools import cache

from django.db import connection

from annotations.models import Assignment, Item
from common.statement_cursor import statement_cursor


@cache
def _mark_sql(vendor: str, timed: bool) -> str:
    quote = connection.ops.quote_name
    columns = ["status", "completed_at", "lease_expires_at"] + (["time_spent_ms"] if timed else [])
    values = ", ".join(f"{quote(column)} = %s" for column in columns)
    return f"UPDATE {quote(Assignment._meta.db_table)} SET {values} WHERE {quote('id')} = %s"


@cache
def _count_sql(vendor: str) -> str:
    quote = connection.ops.quote_name
    judgements = quote("judgements")
    return f"UPDATE {quote(Item._meta.db_table)} SET {judgements} = {judgements} + 1 WHERE {quote('id')} = %s"


def assignment_mark_submitted(assignment: Assignment, *, now: datetime, time_spent_ms: int | None) -> None:
    """Write ``assignment``'s submitted state (status, completion time, no lease, the time spent if
    given) onto its row, as ``save(update_fields=...)`` would, and set the same on the instance."""
    assignment.status, assignment.completed_at, assignment.lease_expires_at = (
        Assignment.Status.SUBMITTED,
        now,
        None,
    )
    params: list[object] = [
        Assignment.Status.SUBMITTED.value,
        connection.ops.adapt_datetimefield_value(now),
        None,
    ]
    if time_spent_ms is not None:
        assignment.time_spent_ms = time_spent_ms
        params.append(time_spent_ms)
    with statement_cursor(connection) as cursor:
        cursor.execute(_mark_sql(connection.vendor, time_spent_ms is not None), [*params, assignment.pk])


def item_count_judgement(item_id: int) -> None:
    """One more judgement on the item (``Item.judgements``, which the claim order reads)."""
    with statement_cursor(connection) as cursor:
        cursor.execute(_count_sql(connection.vendor), [item_id])
