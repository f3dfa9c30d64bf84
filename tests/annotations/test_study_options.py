"""A study's settings: typed fields and tables, shown to the export and the API as the ``options`` object
they replaced (same keys, same values), read back by study import and ``PATCH /api/studies/ID/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import IntegrityError, models, transaction

from annotations.interchange.exports import export_jsonl
from annotations.interchange.study_import import study_import
from annotations.models import (
    QUALITY_SETTINGS,
    ConsensusRuleChoice,
    Study,
    StudyQualitySettings,
    User,
    ValidationSample,
)
from annotations.selectors.controls import quality_settings
from annotations.selectors.study_options import study_options
from annotations.services.consensus import consensus_rule_choose, rule_for
from annotations.services.controls import quality_settings_update
from annotations.services.studies import study_set_reveal, study_share
from annotations.services.validation_sample import validation_sample_store
from common.errors import ImportRefused
from tests.factories import ItemFactory, MachineAnnotatorFactory, StudyFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def configured(study: Study, owner: User) -> dict[str, Any]:
    """A study with every setting chosen, and the options object the old bag held for it."""
    visual = StudyFactory.create(owner=owner, name="visual-ness")
    items = [ItemFactory.create(study=study) for _ in range(3)]
    bot = MachineAnnotatorFactory.create(name="bot")
    study_set_reveal(study=study, reveal=True)
    quality_settings_update(study=study, changes={"control_rate": 0.25, "loo_min_n": 5})
    consensus_rule_choose(study=study, question_keys=["gender"], rule={"rule": "at-least-k", "k": 2})
    validation_sample_store(
        study=study,
        labeller=bot,
        labeller_name="bot",
        item_ids=[items[2].pk, items[0].pk],
        seed=9,
        stratify_by="condition",
    )
    Study.objects.filter(pk=study.pk).update(seed=11, imported_from="a.csv", visualness_study=visual)
    expected = {
        "reveal_after_submit": True,
        "seed": 11,
        "imported_from": "a.csv",
        "visualness_study": visual.pk,
        "quality": {"control_rate": 0.25, "loo_min_n": 5},
        "consensus": {"gender": {"rule": "at-least-k", "k": 2}},
        "validation_sample": {
            "labeller": bot.pk,
            "labeller_name": "bot",
            "item_ids": sorted([items[0].pk, items[2].pk]),
            "seed": 9,
            "stratify_by": "condition",
        },
    }
    return {"study": Study.objects.get(pk=study.pk), "visual": visual, "expected": expected}


def test_quality_columns_and_constraints_follow_the_settings() -> None:
    columns = {f.name: f for f in StudyQualitySettings._meta.fields if f.name != "study"}
    assert list(columns) == list(QUALITY_SETTINGS)
    for name, (_default, low, high, whole) in QUALITY_SETTINGS.items():
        assert isinstance(columns[name], models.IntegerField if whole else models.FloatField), name
        assert columns[name].null
        assert MinValueValidator(low) in columns[name].validators, name
        assert MaxValueValidator(high) in columns[name].validators, name
    names = {constraint.name for constraint in StudyQualitySettings._meta.constraints}
    assert names == {f"quality_{name}_range" for name in QUALITY_SETTINGS}


def test_the_database_refuses_out_of_range_settings_and_a_second_rule(study: Study) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyQualitySettings.objects.create(study=study, control_rate=0.9)
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(seed=-1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Study.objects.filter(pk=study.pk).update(visualness_study=study)
    ConsensusRuleChoice.objects.create(study=study, question_key="gender", rule="majority")
    with pytest.raises(IntegrityError), transaction.atomic():
        ConsensusRuleChoice.objects.create(study=study, question_key="gender", rule="unanimous")
    with pytest.raises(IntegrityError), transaction.atomic():
        ConsensusRuleChoice.objects.create(study=study, question_key="smiling", rule="telepathy")


def test_a_new_study_has_no_options_and_defaults(study: Study) -> None:
    assert study_options(study) == {}
    assert json.loads(next(export_jsonl(study)))["options"] == {}
    assert quality_settings(study).control_rate == 0.0 and rule_for(study, "gender") == {"rule": "majority"}


def test_export_writes_the_bag_and_import_fills_the_fields(configured, owner, tmp_path: Path) -> None:
    study, expected = configured["study"], configured["expected"]
    assert study_options(study) == expected
    (tmp_path / "s.jsonl").write_text("".join(export_jsonl(study)))
    assert json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])["options"] == expected

    copy = study_import(owner=owner, address=tmp_path / "s.jsonl", name="copy")
    assert (copy.reveal_after_submit, copy.seed, copy.imported_from) == (True, 11, "a.csv")
    assert copy.visualness_study_id == configured["visual"].pk  # a study the importing owner can read
    assert quality_settings(copy).control_rate == 0.25 and quality_settings(copy).thresholds["loo_min_n"] == 5
    assert rule_for(copy, "gender") == {"rule": "at-least-k", "k": 2}
    # The sample names items and a labeller of the exporting database: not restored.
    assert not ValidationSample.objects.filter(study=copy).exists()
    assert study_options(copy) == {k: v for k, v in expected.items() if k != "validation_sample"}


def test_import_by_someone_who_cannot_read_the_linked_study_drops_the_link(
    configured, other_researcher, tmp_path: Path
) -> None:
    (tmp_path / "s.jsonl").write_text("".join(export_jsonl(configured["study"])))
    copy = study_import(owner=other_researcher, address=tmp_path / "s.jsonl")
    assert copy.visualness_study_id is None and copy.seed == 11
    study_share(study=configured["visual"], username=other_researcher.username)
    again = study_import(owner=other_researcher, address=tmp_path / "s.jsonl")
    assert again.visualness_study_id == configured["visual"].pk


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([1, 2], "options must be an object"),
        ({"colour_scheme": "dark"}, "unknown option 'colour_scheme'"),
        ({"reveal_after_submit": "yes"}, "options.reveal_after_submit must be true or false"),
        ({"seed": "seven"}, "options.seed must be a whole number"),
        ({"seed": -3}, "options.seed must be a whole number"),
        ({"imported_from": 5}, "options.imported_from must be a text"),
        ({"visualness_study": "3"}, "options.visualness_study must be a whole number"),
        ({"quality": {"control_rate": 0.9}}, "options.quality control_rate must be between 0 and 0.5"),
        ({"quality": {"speed": 1}}, "options.quality has an unknown setting 'speed'"),
        (
            {"consensus": {"gender": {"rule": "at-least-k"}}},
            "options.consensus.gender the at-least-k rule needs k",
        ),
        (
            {"consensus": {"nope": {"rule": "majority"}}},
            "options.consensus names 'nope', which is not a question",
        ),
        ({"consensus": {"boxes": {"rule": "majority"}}}, "options.consensus names 'boxes', a boxes question"),
        (
            {"validation_sample": {"item_ids": "all"}},
            "options.validation_sample must be an object with a list",
        ),
        ({"validation_sample": {"item_ids": [1, "x"]}}, "options.validation_sample.item_ids must be a whole"),
    ],
)
def test_import_refuses_malformed_options_by_line(study, owner, tmp_path: Path, options, message) -> None:
    lines = list(export_jsonl(study))
    head = json.loads(lines[0])
    head["options"] = options
    (tmp_path / "bad.jsonl").write_text("".join([json.dumps(head) + "\n", *lines[1:]]))
    with pytest.raises(ImportRefused, match=f"^line 1: {message}"):
        study_import(owner=owner, address=tmp_path / "bad.jsonl")
    assert Study.objects.count() == 1  # nothing half-imported


def test_the_api_shows_the_bag_and_patch_replaces_it(configured, owner, other_researcher) -> None:
    study, expected = configured["study"], configured["expected"]
    api = client_for(owner)
    assert api.get(f"/api/studies/{study.pk}/").json()["options"] == expected
    listed = {row["id"]: row for row in api.get("/api/studies/").json()["results"]}
    assert listed[study.pk]["options"] == expected
    # GET, change, PATCH back: the object round-trips.
    changed = {**expected, "seed": 12, "quality": {"control_rate": 0.1}}
    response = api.patch(f"/api/studies/{study.pk}/", {"options": changed}, format="json")
    assert response.status_code == 200 and response.json()["options"] == changed
    # Keys left out go back to their defaults, as when the bag was replaced.
    response = api.patch(
        f"/api/studies/{study.pk}/", {"options": {"reveal_after_submit": True}}, format="json"
    )
    assert response.json()["options"] == {"reveal_after_submit": True}
    study.refresh_from_db()
    assert (
        study.seed is None and study.visualness_study_id is None and quality_settings(study).control_rate == 0
    )
    assert not ValidationSample.objects.filter(study=study).exists()
    assert rule_for(study, "gender") == {"rule": "majority"}
    # Refused: a bad value, a study the caller cannot read, items of another study; nothing changes.
    elsewhere = StudyFactory.create(owner=other_researcher)
    for options, field in (
        ({"seed": "x"}, "seed"),
        ({"visualness_study": elsewhere.pk}, "visualness_study"),
        ({"visualness_study": study.pk}, "visualness_study"),
        ({"validation_sample": {"item_ids": [ItemFactory.create(study=elsewhere).pk]}}, "validation_sample"),
    ):
        response = api.patch(f"/api/studies/{study.pk}/", {"options": options, "overlap": 7}, format="json")
        assert response.status_code == 400 and field in json.dumps(response.json()), options
    study.refresh_from_db()
    assert study_options(study) == {"reveal_after_submit": True} and study.overlap == 3


def test_deleting_the_visualness_study_unlinks_it(configured) -> None:
    configured["visual"].delete()
    configured["study"].refresh_from_db()
    assert configured["study"].visualness_study_id is None
