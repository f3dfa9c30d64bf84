"""A database made by the code before the layout change (issue 13) migrates forward and reads back.

The test database is taken back to the last migrations that code had (annotations 0007, generation
0002, no ``labelling`` app), filled through the historical models with a study, its items, a human
and a machine annotator with answers, a labelling job with a failed attempt, a cached answer and an
embedding (the labelling tables were ``generation_*`` then), then migrated to the latest migrations.
Every row is read back through today's models: the labelling models moved apps by a state-only
migration and kept their tables (renamed to ``labelling_*`` later, by labelling 0007), so nothing is
copied and nothing is lost. The database is left at
the latest migration for the tests after this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import example_protocol_dict

PREVIOUS_CODE = [("annotations", "0007_quality"), ("generation", "0002_labelling"), ("labelling", None)]

pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets: list[tuple[str, str | None]] | None = None) -> Apps:
    executor = MigrationExecutor(connection)
    plan_targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(plan_targets)  # None: unapply the whole app
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in plan_targets if t[1] is not None]).apps


@pytest.fixture
def previous_apps() -> Iterator[Apps]:
    try:
        yield _migrate(PREVIOUS_CODE)
    finally:
        _migrate()


def _historical(apps: Apps, label: str) -> Any:
    """A model as it was at the migration state ``apps`` (by label, so the type checker reads it as such)."""
    return apps.get_model(label)


def _fill(apps: Apps) -> dict[str, Any]:
    user_model = _historical(apps, "annotations.User")
    study_model = _historical(apps, "annotations.Study")
    item_model = _historical(apps, "annotations.Item")
    annotator_model = _historical(apps, "annotations.Annotator")
    annotation_model = _historical(apps, "annotations.Annotation")
    job_model = _historical(apps, "generation.LabellingJob")
    attempt_model = _historical(apps, "generation.LabelAttempt")
    cache_model = _historical(apps, "generation.LabelCacheEntry")
    feature_model = _historical(apps, "generation.ItemFeature")
    owner = user_model.objects.create(username="owner", role="researcher")
    person = user_model.objects.create(username="person", role="annotator")
    study = study_model.objects.create(
        name="Made before the move", owner=owner, protocol=example_protocol_dict(), options={"seed": 7}
    )
    items = [item_model.objects.create(study=study, external_id=f"i{n}", prompt=f"p{n}") for n in range(3)]
    human = annotator_model.objects.create(kind="human", name="person", user=person, pool="expert")
    machine = annotator_model.objects.create(
        kind="machine", name="colour-rule", version="v1", config={"kind": "colour"}
    )
    for item in items:
        annotation_model.objects.create(
            study=study, item=item, annotator=human, question_key="gender", value="male"
        )
        annotation_model.objects.create(
            study=study, item=item, annotator=machine, question_key="gender", value="female"
        )
    job = job_model.objects.create(study=study, annotator=machine, status="done", total_items=3, done_items=3)
    attempt_model.objects.create(job=job, item=items[0], question_key="gender", error="unparseable", raw="??")
    cache_model.objects.create(key="k" * 64, raw='{"gender": "female"}', model="colour")
    feature_model.objects.create(
        item=items[1], annotator=machine, kind="embedding", vector=b"\x00" * 8, data={"shape": [2]}
    )
    return {"study": study.pk, "job": job.pk, "items": [item.pk for item in items], "machine": machine.pk}


def test_a_database_of_the_previous_code_migrates_forward_with_every_row(previous_apps: Apps) -> None:
    made = _fill(previous_apps)
    _migrate()

    from annotations.models import Annotation, Enrollment, ItemFeature, Study
    from labelling.models import LabelAttempt, LabelCacheEntry, LabellingJob

    study = Study.objects.get(pk=made["study"])
    assert study.seed == 7 and study.items.count() == 3
    assert Annotation.objects.filter(study=study).count() == 6
    job = LabellingJob.objects.get(pk=made["job"])
    assert (job.study_id, job.annotator_id, job.status, job.done_items) == (
        study.pk,
        made["machine"],
        "done",
        3,
    )
    assert LabelAttempt.objects.get(job=job).raw == "??"
    assert LabelCacheEntry.objects.get(key="k" * 64).model == "colour"
    feature = ItemFeature.objects.get(item_id=made["items"][1])
    assert bytes(feature.vector or b"") == b"\x00" * 8 and feature.data == {"shape": [2]}
    # The move copied nothing; labelling 0007 then renamed the tables (generation_* to labelling_*).
    assert LabellingJob._meta.db_table == "labelling_labellingjob"
    assert not Enrollment.objects.exists()  # the account-level pool had no enrolment to move to
