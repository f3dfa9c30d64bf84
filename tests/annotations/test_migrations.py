"""Data made by earlier code survives ``migrate``.

``Study.options`` (a JSON bag until annotations 0009) became typed fields and tables: the test database is
taken back to the migration before (annotations 0007 and whatever depended on later nodes), studies are
written with the historical models carrying every key the bag held (and junk), the database is migrated
forward, and each study is read back through today's models and services. The database is left at the
latest migration whatever happens, for the tests after this one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import UserFactory, example_protocol_dict

BEFORE = [("annotations", "0007_quality")]

pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets: list[tuple[str, str]] | None = None) -> Apps:
    """Migrate the test database to ``targets`` (None: the latest of every app); the models of then."""
    executor = MigrationExecutor(connection)
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_apps() -> Iterator[Apps]:
    try:
        yield _migrate(BEFORE)
    finally:
        _migrate()
        assert not MigrationExecutor(connection).migration_plan(
            MigrationExecutor(connection).loader.graph.leaf_nodes()
        )


def _old_studies(apps: Apps) -> dict[str, Any]:
    """Studies as the code of annotations 0007 stored them; returns their ids and the bags written."""
    User: Any = apps.get_model("annotations", "User")
    Study: Any = apps.get_model("annotations", "Study")
    Item: Any = apps.get_model("annotations", "Item")
    Annotator: Any = apps.get_model("annotations", "Annotator")
    owner = User.objects.create(username="owner", role="researcher")

    def study(name: str, options: dict[str, Any]) -> Any:
        return Study.objects.create(name=name, owner=owner, protocol=example_protocol_dict(), options=options)

    visual = study("visual", {"imported_from": "ratings.xlsx"})
    full = study("full", {})
    items = [Item.objects.create(study=full, external_id=f"i{n}", kind="image") for n in range(4)]
    bot = Annotator.objects.create(kind="machine", name="bot", version="1")
    full.options = {
        "reveal_after_submit": True,
        "seed": 42,
        "imported_from": "annotations.csv",
        "visualness_study": visual.pk,
        "quality": {"control_rate": 0.2, "max_attention_failures": 3, "loo_margin": 0.1},
        "consensus": {"gender": {"rule": "unanimous"}, "smiling": {"rule": "at-least-k", "k": 2}},
        "validation_sample": {
            "labeller": bot.pk,
            "labeller_name": "bot",
            "item_ids": [items[1].pk, items[3].pk],
            "seed": 3,
            "stratify_by": "condition",
        },
    }
    full.save()
    junk = study(
        "junk",
        {
            "seed": "not a number",
            "reveal_after_submit": False,
            "visualness_study": 10**9,
            "quality": {"control_rate": 0.9, "loo_min_n": "ten", "max_straight_run": 4},
            "consensus": {"gender": {"rule": "at-least-k"}, "colour": {"rule": "telepathy"}, "smiling": "x"},
            "validation_sample": {"item_ids": "all"},
            "no_longer_read": [1, 2],
        },
    )
    strays = study(
        "strays", {"seed": "7", "validation_sample": {"labeller": 10**9, "item_ids": [items[0].pk]}}
    )
    Item.objects.create(study=strays, external_id="s0", kind="image")
    plain = study("plain", {})
    return {
        "ids": {s.name: s.pk for s in (visual, full, junk, strays, plain)},
        "items": [item.pk for item in items],
        "bot": bot.pk,
        "full": full.options,
    }


def _a_person(study: Any) -> Any:
    from annotations.services.studies import annotator_for_user, enrollment_add

    user = UserFactory.create(username=f"person-{study.pk}", role="annotator")
    enrollment_add(study=study, user=user)
    return annotator_for_user(user=user)


def test_every_key_of_the_options_bag_survives_migrate(old_apps: Apps) -> None:
    old = _old_studies(old_apps)
    _migrate()

    from annotations.interchange.exports import export_jsonl
    from annotations.models import Annotation, Annotator, ConsensusLabel, Study
    from annotations.selectors.controls import quality_settings
    from annotations.selectors.study_options import study_options
    from annotations.services.assignment import assignment_claim_next, claim_order
    from annotations.services.consensus import consensus_compute, rule_for

    ids, items = old["ids"], old["items"]
    full = Study.objects.get(pk=ids["full"])
    assert (full.reveal_after_submit, full.seed, full.imported_from, full.visualness_study_id) == (
        True,
        42,
        "annotations.csv",
        ids["visual"],
    )
    # The export and the API show the same bag as before.
    assert study_options(full) == old["full"]
    assert json.loads(next(export_jsonl(full)))["options"] == old["full"]
    # Quality settings: the chosen ones, defaults for the rest.
    settings = quality_settings(full)
    assert (settings.control_rate, settings.qualification_items) == (0.2, 0)
    assert settings.thresholds["loo_margin"] == 0.1 and settings.thresholds["max_attention_failures"] == 3
    assert settings.thresholds["loo_min_n"] == 10
    # Consensus uses the rule chosen per question.
    assert rule_for(full, "gender") == {"rule": "unanimous"}
    assert rule_for(full, "smiling") == {"rule": "at-least-k", "k": 2}
    for name, value in (("r1", "male"), ("r2", "male"), ("r3", "female")):
        rater = Annotator.objects.create(kind="human", name=name, study=full)
        Annotation.objects.create(
            study=full, item_id=items[0], annotator=rater, question_key="gender", value=value
        )
    consensus_compute(study=full, question="gender")
    label = ConsensusLabel.objects.get(item_id=items[0], question_key="gender")
    assert (label.rule, label.resolved) == ("unanimous", False)  # majority would have said male
    # The claim query hands out the sampled items only.
    person = _a_person(full)
    assert sorted(claim_order(study=full, annotator=person)) == [items[1], items[3]]
    claimed = assignment_claim_next(study=full, annotator=person)
    assert claimed is not None and claimed.item_id in (items[1], items[3])
    assert full.validation_sample.labeller_id == old["bot"] and full.validation_sample.seed == 3

    # Junk is read the way the old code read it: the defaults.
    junk = Study.objects.get(pk=ids["junk"])
    assert (junk.reveal_after_submit, junk.seed, junk.visualness_study_id) == (False, None, None)
    assert study_options(junk) == {"quality": {"max_straight_run": 4}}
    assert quality_settings(junk).control_rate == 0.0 and quality_settings(junk).thresholds["loo_min_n"] == 10
    assert rule_for(junk, "gender") == {"rule": "majority"}
    assert len(claim_order(study=junk, annotator=_a_person(junk))) == 0  # it has no items, and no sample

    # A sample whose ids are no items of the study still restricts claims: to nothing, as before.
    strays = Study.objects.get(pk=ids["strays"])
    assert strays.seed == 7 and strays.validation_sample.labeller_id is None
    assert not strays.validation_sample.items.exists()
    assert claim_order(study=strays, annotator=_a_person(strays)) == []

    for name in ("visual", "plain"):
        study = Study.objects.get(pk=ids[name])
        assert study_options(study) == ({"imported_from": "ratings.xlsx"} if name == "visual" else {})
        assert not hasattr(study, "options")


def test_migrating_back_writes_the_bag_again(old_apps: Apps) -> None:
    old = _old_studies(old_apps)
    _migrate()
    apps = _migrate(BEFORE)
    Study: Any = apps.get_model("annotations", "Study")
    bags = dict(Study.objects.values_list("name", "options"))
    assert bags["full"] == old["full"]
    assert bags["junk"] == {"quality": {"max_straight_run": 4}}
    assert bags["strays"] == {
        "seed": 7,
        "validation_sample": {
            "labeller": None,
            "labeller_name": "",
            "item_ids": [],
            "seed": 0,
            "stratify_by": "",
        },
    }
    assert bags["visual"] == {"imported_from": "ratings.xlsx"} and bags["plain"] == {}


def test_images_stored_before_the_blank_check_are_checked_and_identical_items_survive_going_back() -> None:
    """annotations 0012 (issue 14 point 3): images already stored get is_blank (None when the file cannot
    be read); going back to one item per file hash blanks the hash of the later items, keeping them."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from tests.annotations.imagefiles import drawn_png_bytes, png_bytes

    before = [("annotations", "0012_pool_and_attributes_per_enrollment")]
    try:
        apps = _migrate(before)
        User, Study = apps.get_model("annotations", "User"), apps.get_model("annotations", "Study")
        Item, ItemImage = apps.get_model("annotations", "Item"), apps.get_model("annotations", "ItemImage")
        owner = User.objects.create(username="owner", role="researcher")
        study = Study.objects.create(name="s", owner=owner, protocol=example_protocol_dict())
        files = {"black": png_bytes((0, 0, 0)), "drawn": drawn_png_bytes(), "gone": None}
        for n, (name, data) in enumerate(files.items()):
            item = Item.objects.create(study=study, external_id=name, kind="image", sha256=f"{n:064x}")
            stored = default_storage.save(f"items/{study.pk}/{name}.png", ContentFile(data or b""))
            if data is None:
                default_storage.delete(stored)
            ItemImage.objects.create(item=item, position=0, file=stored, sha256=f"{n:064x}")
        apps = _migrate()
        flags = apps.get_model("annotations", "ItemImage").objects.values_list(
            "item__external_id", "is_blank", "blank_colour"
        )
        assert sorted(flags) == [("black", True, "#000000"), ("drawn", False, ""), ("gone", None, "")]
        Item = apps.get_model("annotations", "Item")
        Item.objects.create(study_id=study.pk, external_id="black-2", kind="image", sha256=f"{0:064x}")
        apps = _migrate(before)  # the unique (study, sha256) constraint comes back
        hashes = dict(apps.get_model("annotations", "Item").objects.values_list("external_id", "sha256"))
        assert hashes["black"] == f"{0:064x}" and hashes["black-2"] == "" and len(hashes) == 4
    finally:
        _migrate()
