"""The hot path's statements prepared once per PostgreSQL connection (common/statement_cursor.py).

On PostgreSQL: a ``PreparedQuery`` and the claim's conditional insert leave named prepared statements
on the session and later runs reuse them; the rows are the same with the setting off; the captured
statement carries its values; a rolled-back transaction or a changed table does not break the next
run. On SQLite the cursor is Django's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from annotations.models import Annotator, Assignment, Item, Study
from annotations.selectors.tasks import _ITEM_IMAGES
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.studies import enrollment_add
from common.statement_cursor import prepares, statement_cursor
from tests.factories import ItemFactory, UserFactory

ANSWERS: dict[str, dict[str, Any]] = {
    "gender": {"value": "female"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard"]},
}


def make_annotator(study: Study, name: str) -> Annotator:
    user = UserFactory.create(username=name, role="annotator")
    enrollment_add(study=study, user=user, pool="crowd")
    return user.annotator


def _prepared_statements() -> list[tuple[str, int, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        return list(cursor.fetchall())


def _needs_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL)")


@pytest.mark.django_db
def test_sqlite_gets_djangos_cursor(settings: Any) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL tests below cover it")
    assert not prepares(connection)
    with statement_cursor(connection) as cursor:
        cursor.execute("SELECT %s + %s", [2, 3])
        assert cursor.fetchone() == (5,)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_prepared_query_is_planned_once_and_reused(settings: Any) -> None:
    _needs_postgresql()
    settings.WORKBENCH_PG_PREPARED_STATEMENTS = True
    item = ItemFactory.create()
    with transaction.atomic():  # a rollback before would have cleared the session's statements
        before = {row[0] for row in _prepared_statements()}
        for _ in range(3):
            assert _ITEM_IMAGES.all(item=item.pk) == []
        new = [row for row in _prepared_statements() if row[0] not in before]
    assert len(new) == 1, new
    statement, generic, custom = new[0]
    assert "annotations_itemimage" in statement and "$1" in statement
    assert generic + custom == 3  # three executions of one prepared statement


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_setting_off_prepares_nothing_and_reads_the_same_rows(settings: Any) -> None:
    _needs_postgresql()
    item = ItemFactory.create()
    settings.WORKBENCH_PG_PREPARED_STATEMENTS = True
    prepared = [(row.pk, row.position) for row in _ITEM_IMAGES.all(item=item.pk)]
    settings.WORKBENCH_PG_PREPARED_STATEMENTS = False
    assert not prepares(connection)
    with transaction.atomic():
        before = len(_prepared_statements())
        plain = [(row.pk, row.position) for row in _ITEM_IMAGES.all(item=item.pk)]
        assert len(_prepared_statements()) == before
    assert plain == prepared


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_captured_statement_carries_its_values(settings: Any) -> None:
    _needs_postgresql()
    settings.WORKBENCH_PG_PREPARED_STATEMENTS = True
    with CaptureQueriesContext(connection) as captured:
        _ITEM_IMAGES.all(item=987654)
    assert len(captured.captured_queries) == 1
    assert "987654" in captured.captured_queries[0]["sql"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_claims_and_submits_survive_rollbacks_and_a_changed_table(settings: Any, study: Study) -> None:
    """A rollback makes psycopg drop every prepared statement of the session, and a changed table
    invalidates PostgreSQL's plans; the next claim prepares again and gets its item."""
    _needs_postgresql()
    settings.WORKBENCH_PG_PREPARED_STATEMENTS = True
    study.overlap = 2
    study.save()
    items = [ItemFactory.create(study=study) for _ in range(2)]
    people = [make_annotator(study, f"rater{n}") for n in range(3)]
    first = assignment_claim_next(study=study, annotator=people[0])
    assert first is not None
    assignment_submit(assignment=first, answers=ANSWERS)
    with pytest.raises(RuntimeError), transaction.atomic():
        assert assignment_claim_next(study=study, annotator=people[1]) is not None
        raise RuntimeError("rolled back")
    assert not Assignment.objects.filter(annotator=people[1]).exists()
    with connection.cursor() as cursor:  # a changed table: PostgreSQL must re-plan what it prepared
        cursor.execute("ALTER TABLE annotations_item ALTER COLUMN text SET DEFAULT ''")
        cursor.execute("ALTER TABLE annotations_item ALTER COLUMN text DROP DEFAULT")
    taken = []
    for person in people[1:]:
        while (assignment := assignment_claim_next(study=study, annotator=person)) is not None:
            assignment_submit(assignment=assignment, answers=ANSWERS)
            taken.append(assignment.item_id)
    other = next(item.pk for item in items if item.pk != first.item_id)
    assert sorted(taken) == sorted([first.item_id, other, other])  # overlap 2: the three slots left
    assert sorted(Item.objects.filter(study=study).values_list("judgements", flat=True)) == [2, 2]
