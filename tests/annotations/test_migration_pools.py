"""Migration 0009 moves an account's pool and demographic answers onto each of its enrolments."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("annotations", "0011_exportjob_lifecycle")]
AFTER = [("annotations", "0012_pool_and_attributes_per_enrollment")]


def _migrate(targets: list[tuple[str, str]]) -> object:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_each_enrolment_gets_the_accounts_pool_and_answers_and_the_account_keeps_none() -> None:
    old = _migrate(BEFORE)
    try:
        User = old.get_model("annotations", "User")  # type: ignore[attr-defined]
        Study = old.get_model("annotations", "Study")  # type: ignore[attr-defined]
        Annotator = old.get_model("annotations", "Annotator")  # type: ignore[attr-defined]
        Enrollment = old.get_model("annotations", "Enrollment")  # type: ignore[attr-defined]
        owner = User.objects.create(username="owner", role="researcher")
        one, two = (Study.objects.create(name=n, owner=owner, protocol={}) for n in ("one", "two"))
        expert = User.objects.create(username="expert", role="annotator")
        crowd = User.objects.create(username="crowd", role="annotator")
        Annotator.objects.create(
            kind="human", name="expert", user=expert, pool="expert", attributes={"region": "EMEA"}
        )
        Annotator.objects.create(kind="human", name="crowd", user=crowd)
        Annotator.objects.create(kind="human", name="rater-1", study=one, pool="expert", attributes={"r": 1})
        for study in (one, two):
            Enrollment.objects.create(study=study, user=expert)
            Enrollment.objects.create(study=study, user=crowd)

        new = _migrate(AFTER)
        Enrollment = new.get_model("annotations", "Enrollment")  # type: ignore[attr-defined]
        Annotator = new.get_model("annotations", "Annotator")  # type: ignore[attr-defined]
        rows = sorted(Enrollment.objects.values_list("study__name", "user__username", "pool", "attributes"))
        assert rows == [
            ("one", "crowd", "crowd", {}),
            ("one", "expert", "expert", {"region": "EMEA"}),
            ("two", "crowd", "crowd", {}),
            ("two", "expert", "expert", {"region": "EMEA"}),
        ]
        accounts = Annotator.objects.filter(user__isnull=False).values_list("study_pool", "study_attributes")
        assert list(accounts) == [("crowd", {}), ("crowd", {})]
        imported = Annotator.objects.get(name="rater-1")
        assert (imported.study_pool, imported.study_attributes) == ("expert", {"r": 1})
    finally:
        _migrate(executor_leaves())


def executor_leaves() -> list[tuple[str, str]]:
    """Every app's latest migration, to leave the database as the other tests expect it."""
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
