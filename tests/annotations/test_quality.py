"""Quality control: control items, mixing, qualification, per-annotator scores, exclusion."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from annotations.interchange.control_import import controls_import
from annotations.models import (
    Annotation,
    Annotator,
    AnnotatorExclusion,
    Assignment,
    ConsensusLabel,
    Item,
    Study,
    StudyQualitySettings,
)
from annotations.selectors.agreement import agreement_report
from annotations.selectors.controls import control_seed, control_slot, qualification_state, quality_settings
from annotations.selectors.labels import labels_for
from annotations.selectors.quality import claim_refusal, quality_report
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.consensus import consensus_compute
from annotations.services.controls import control_mark, control_unmark, quality_settings_update
from annotations.services.quality import annotator_exclude, annotator_reinstate
from annotations.services.studies import enrollment_add, study_create
from common.errors import Conflict, ImportRefused, ValidationFailed
from protocols.schema import load_preset
from tests.factories import ItemFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

ANSWERS: dict[str, dict[str, Any]] = {"gender": {"value": "female"}, "attributes": {"value": ["hat"]}}


def person(study: Study, name: str, pool: str = "crowd") -> Annotator:
    user = UserFactory.create(username=name, role="annotator")
    enrollment_add(study=study, user=user, pool=pool)
    return user.annotator


def items(study: Study, n: int, prefix: str = "item") -> list[Item]:
    return [ItemFactory.create(study=study, external_id=f"{prefix}-{i}") for i in range(n)]


def gold(study: Study, item: Item, **answers: object) -> Item:
    return control_mark(study=study, item=item, kind="gold", answers=answers or {"gender": "female"})


def submit(study: Study, annotator: Annotator, item: Item, answers: dict, seconds: float = 5.0) -> Assignment:
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator,
        status="leased",
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )
    return assignment_submit(assignment=assignment, answers=answers, time_spent_ms=int(seconds * 1000))


# --- Marking controls --------------------------------------------------------------------------------


class TestMarking:
    def test_answers_are_validated_like_annotations(self, study) -> None:
        (item,) = items(study, 1)
        marked = control_mark(
            study=study,
            item=item,
            kind="gold",
            answers={"gender": "male", "colour": "Navy", "smiling": "1", "attributes": ["beard"]},
        )
        assert marked.control_kind == "gold"
        assert marked.control_answers == {
            "gender": "male",
            "colour": "blue",
            "smiling": 1,
            "attributes": ["beard"],
        }
        study.refresh_from_db()
        assert quality_settings(study).control_rate == 0.1  # the first control turns mixing on at 10%

    @pytest.mark.parametrize(
        "answers, field",
        [
            ({"gender": "robot"}, "gender"),
            ({"nope": "x"}, "nope"),
            ({"boxes": [{"option": "hat", "x": 0, "y": 0, "w": 5, "h": 5}]}, "boxes"),
            ({"attributes": ["hat", "none_of_the_above"]}, "attributes"),
            ({}, "answers"),
        ],
    )
    def test_bad_answers_are_refused_and_nothing_changes(self, study, answers, field) -> None:
        (item,) = items(study, 1)
        with pytest.raises(ValidationFailed) as caught:
            control_mark(study=study, item=item, kind="gold", answers=answers)
        assert field in caught.value.details
        item.refresh_from_db()
        assert item.control_kind == "" and item.control_answers == {}
        study.refresh_from_db()
        assert not StudyQualitySettings.objects.filter(study=study).exists()

    def test_kind_and_study_are_checked_and_unmark_restores(self, study, owner) -> None:
        (item,) = items(study, 1)
        with pytest.raises(ValidationFailed):
            control_mark(study=study, item=item, kind="silver", answers={"gender": "male"})
        other = study_create(owner=owner, name="Other", protocol=study.protocol_obj)
        with pytest.raises(ValidationFailed):
            control_mark(study=other, item=item, kind="gold", answers={"gender": "male"})
        control_mark(
            study=study, item=item, kind="attention", answers={"gender": "male"}, note="Choose 'male' here."
        )
        item = control_unmark(study=study, item=item)
        assert (item.control_kind, item.control_answers, item.note) == ("", {}, "")

    def test_a_chosen_rate_is_kept(self, study) -> None:
        quality_settings_update(study=study, changes={"control_rate": 0})
        gold(study, items(study, 1)[0])
        study.refresh_from_db()
        assert quality_settings(study).control_rate == 0

    def test_settings_are_checked(self, study) -> None:
        for bad in (
            {"control_rate": 0.9},
            {"qualification_items": 1.5},
            {"max_straight_run": "ten"},
            {"x": 1},
        ):
            with pytest.raises(ValidationFailed):
                quality_settings_update(study=study, changes=bad)
        study.refresh_from_db()
        assert not StudyQualitySettings.objects.filter(study=study).exists()
        settings = quality_settings_update(study=study, changes={"qualification_items": 3, "loo_margin": 0.1})
        assert settings.qualification_items == 3 and settings.thresholds["loo_margin"] == 0.1


class TestImport:
    def test_csv_and_jsonl(self, study, tmp_path: Path) -> None:
        items(study, 3)
        csv_file = tmp_path / "gold.csv"
        csv_file.write_text(
            "external_id,kind,note,gender,attributes\n"
            "item-0,,,female,hat;glasses\n"
            "item-1,attention,Select 'male' for this item.,male,\n"
        )
        report = controls_import(study=study, address=csv_file)
        assert (report.marked, report.replaced) == (2, 0)
        first, second = Item.objects.get(external_id="item-0"), Item.objects.get(external_id="item-1")
        assert first.control_kind == "gold" and first.control_answers == {
            "gender": "female",
            "attributes": ["hat", "glasses"],
        }
        assert second.control_kind == "attention" and second.note == "Select 'male' for this item."
        jsonl = tmp_path / "gold.jsonl"
        jsonl.write_text(
            json.dumps({"external_id": "item-0", "answers": {"gender": "male"}})
            + "\n"
            + json.dumps({"external_id": "item-2", "smiling": 0})
            + "\n"
        )
        report = controls_import(study=study, address=jsonl)
        assert (report.marked, report.replaced) == (1, 1)
        assert Item.objects.get(external_id="item-0").control_answers == {"gender": "male"}

    def test_a_bad_row_stops_the_import(self, study, tmp_path: Path) -> None:
        items(study, 2)
        bad = tmp_path / "gold.csv"
        bad.write_text("external_id,gender\nitem-0,female\nitem-1,robot\n")
        with pytest.raises(ImportRefused, match="row 3"):
            controls_import(study=study, address=bad)
        missing = tmp_path / "missing.csv"
        missing.write_text("external_id,gender\nnope,female\n")
        with pytest.raises(ImportRefused, match="no item 'nope'"):
            controls_import(study=study, address=missing)
        assert not Item.objects.exclude(control_kind="").exists()


# --- Mixing --------------------------------------------------------------------------------------------


class TestMixing:
    def test_rate_over_100_claims_is_exact_deterministic_and_never_repeats(self, study) -> None:
        study.overlap = 1
        study.save()
        items(study, 150)
        for item in items(study, 15, prefix="ctl"):
            gold(study, item)
        quality_settings_update(study=study, changes={"control_rate": 0.1})
        annotator = person(study, "a")
        kinds = []
        for _ in range(100):
            assignment = assignment_claim_next(study=study, annotator=annotator)
            kinds.append(bool(assignment.item.control_kind))
            assignment_submit(assignment=assignment, answers=ANSWERS)
        positions = [i for i, is_control in enumerate(kinds) if is_control]
        seed = control_seed(study_id=study.pk, annotator_id=annotator.pk)
        assert positions == [i for i in range(100) if control_slot(seed=seed, index=i, rate=0.1)]
        assert len(positions) == 10  # one slot in each stretch of 10 claims
        controls = Assignment.objects.filter(annotator=annotator).exclude(item__control_kind="")
        assert controls.count() == 10 == controls.values("item").distinct().count()
        # and not periodic: the gaps differ
        assert len({b - a for a, b in zip(positions, positions[1:], strict=False)}) > 1

    def test_controls_take_no_overlap_slot_and_are_left_out_of_real_candidates(self, study) -> None:
        study.overlap = 1
        study.save()
        (real,) = items(study, 1)
        (control,) = items(study, 1, prefix="ctl")
        gold(study, control)
        # one qualification item: everyone's first claim is the gold item, whatever the overlap
        quality_settings_update(
            study=study,
            changes={"control_rate": 0, "qualification_items": 1, "qualification_min_accuracy": 0},
        )
        seen = []
        for name in ("a", "b", "c"):
            annotator = person(study, name)
            while (assignment := assignment_claim_next(study=study, annotator=annotator)) is not None:
                seen.append(assignment.item_id)
                assignment_submit(assignment=assignment, answers=ANSWERS)
        assert seen.count(control.pk) == 3 and seen.count(real.pk) == 1

    def test_claim_query_count_with_mixing(self, study, django_assert_max_num_queries) -> None:
        Item.objects.bulk_create(
            [Item(study=study, external_id=f"bulk{i}", kind="image") for i in range(500)]
        )
        for item in Item.objects.order_by("id")[:5]:
            gold(study, item)
        annotator = person(study, "a")
        for _ in range(12):  # control slots and real claims alike: one count and one pick more at most
            with django_assert_max_num_queries(11):
                assignment = assignment_claim_next(study=study, annotator=annotator)
            assignment_submit(assignment=assignment, answers=ANSWERS)

    def test_no_mixing_without_a_rate(self, study) -> None:
        items(study, 3)
        (control,) = items(study, 1, prefix="ctl")
        gold(study, control)
        quality_settings_update(study=study, changes={"control_rate": 0})
        annotator = person(study, "a")
        got = []
        while (assignment := assignment_claim_next(study=study, annotator=annotator)) is not None:
            got.append(assignment.item_id)
            assignment_submit(assignment=assignment, answers=ANSWERS)
        assert len(got) == 3 and control.pk not in got


# --- Nothing reveals a control -------------------------------------------------------------------------


def _normalised(html: str, assignment: Assignment) -> str:
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)
    # the draft's key and Previous/Next name assignment ids only (the same links for any item)
    html = re.sub(r'data-draft-key="\d+:\d+"', "", html)
    html = re.sub(r'<nav class="flow-nav".*?</nav>', "", html, flags=re.S)
    return html.replace(f"/assignments/{assignment.pk}/", "/assignments/N/")


class TestNotRevealed:
    @pytest.fixture
    def pair(self, study):
        real, control = items(study, 2)
        gold(study, control, gender="male", smiling=1)
        annotator = person(study, "a")
        leases = {}
        for item in (real, control):
            leases[item.pk] = Assignment.objects.create(
                study=study,
                item=item,
                annotator=annotator,
                status="leased",
                lease_expires_at=timezone.now() + timedelta(minutes=30),
            )
        return annotator, leases[real.pk], leases[control.pk]

    def test_task_pages_are_the_same(self, pair) -> None:
        annotator, real, control = pair
        client = Client()
        client.force_login(annotator.user)
        pages = []
        for assignment in (real, control):
            response = client.get(f"/annotate/assignments/{assignment.pk}/")
            assert response.status_code == 200
            pages.append(_normalised(response.content.decode(), assignment))
        assert pages[0] == pages[1]
        for word in ("gold", "control", "attention", "qualif"):
            assert word not in pages[1].lower()

    def test_api_tasks_are_the_same(self, pair) -> None:
        annotator, real, control = pair
        api = client_for(annotator.user)
        bodies = [api.get(f"/api/assignments/{a.pk}/").json() for a in (real, control)]
        for body in bodies:
            for key in ("id", "item", "lease_expires_at", "created_at"):
                body.pop(key)
            body["task"]["item"].pop("id")
        assert bodies[0] == bodies[1]
        claimed = api.post(f"/api/studies/{real.study_id}/assignments/next/")
        text = json.dumps(claimed.json()).lower()
        for word in ("gold", "control", "attention"):
            assert word not in text
        mine = json.dumps(api.get("/api/assignments/").json()).lower()
        assert "control" not in mine and "gold" not in mine

    def test_annotators_do_not_see_the_quality_settings(self, pair, study) -> None:
        annotator, _real, _control = pair
        body = client_for(annotator.user).get(f"/api/studies/{study.pk}/").json()
        assert "quality" not in body["options"]
        owner_body = client_for(study.owner).get(f"/api/studies/{study.pk}/").json()
        assert owner_body["options"]["quality"]["control_rate"] == 0.1


# --- Qualification ----------------------------------------------------------------------------------------


class TestQualification:
    @pytest.fixture
    def qualifying(self, study):
        items(study, 4)
        golds = [gold(study, item, gender="female") for item in items(study, 3, prefix="gold")]
        quality_settings_update(
            study=study,
            changes={"control_rate": 0, "qualification_items": 2, "qualification_min_accuracy": 1.0},
        )
        return golds

    def test_only_gold_until_n_answered_then_real_items(self, study, qualifying) -> None:
        annotator = person(study, "a")
        first = assignment_claim_next(study=study, annotator=annotator)
        ahead = assignment_claim_next(study=study, annotator=annotator, exclude=[first.pk])
        assert first.item.control_kind == ahead.item.control_kind == "gold"
        # two gold leases held: no third item is leased ahead while qualifying
        assert assignment_claim_next(study=study, annotator=annotator, exclude=[first.pk, ahead.pk]) is None
        assert qualification_state(study=study, annotator=annotator).state == "pending"
        for assignment in (first, ahead):
            assignment_submit(assignment=assignment, answers=ANSWERS)
        assert qualification_state(study=study, annotator=annotator).state == "passed"
        following = assignment_claim_next(study=study, annotator=annotator)
        assert following.item.control_kind == ""

    def test_failing_stops_every_item_with_a_clear_message(self, study, qualifying) -> None:
        annotator = person(study, "b")
        for _ in range(2):
            assignment = assignment_claim_next(study=study, annotator=annotator)
            answer = (
                "male"
                if not Assignment.objects.filter(annotator=annotator, status="submitted").exists()
                else "female"
            )
            assignment_submit(assignment=assignment, answers={**ANSWERS, "gender": {"value": answer}})
        state = qualification_state(study=study, annotator=annotator)
        assert (state.state, state.correct, state.n) == ("failed", 1, 2)
        assert assignment_claim_next(study=study, annotator=annotator) is None
        assert "did not pass" in claim_refusal(study=study, annotator=annotator).message
        client = Client()
        client.force_login(annotator.user)
        page = client.get(f"/annotate/studies/{study.pk}/next/")
        assert page.status_code == 403 and "did not pass this study" in page.content.decode()
        api = client_for(annotator.user).post(f"/api/studies/{study.pk}/assignments/next/")
        assert api.status_code == 403 and "did not pass" in api.json()["detail"]

    def test_editing_a_gold_answer_later_does_not_requalify(self, study, qualifying) -> None:
        annotator = person(study, "c")
        done = []
        for _ in range(2):
            assignment = assignment_claim_next(study=study, annotator=annotator)
            done.append(
                assignment_submit(assignment=assignment, answers={**ANSWERS, "gender": {"value": "male"}})
            )
        assert qualification_state(study=study, annotator=annotator).state == "failed"
        for assignment in done:  # change the answers to the right ones: the first answers still count
            assignment_submit(assignment=assignment, answers=ANSWERS, user=annotator.user)
        assert qualification_state(study=study, annotator=annotator).state == "failed"


# --- Scores ------------------------------------------------------------------------------------------------


class TestScores:
    def test_figures_by_hand(self, study) -> None:
        real = items(study, 3)
        (g1,) = items(study, 1, prefix="gold")
        (t1,) = items(study, 1, prefix="check")
        control_mark(study=study, item=g1, kind="gold", answers={"gender": "female", "smiling": 1})
        control_mark(
            study=study, item=t1, kind="attention", answers={"gender": "male"}, note="Select 'male'."
        )
        quality_settings_update(study=study, changes={"loo_min_n": 3, "loo_margin": 0.1})
        a, b, c = person(study, "a"), person(study, "b"), person(study, "c")
        hat = {"attributes": {"value": ["hat"]}}

        def answer(gender: str, **extra: object) -> dict:
            return {"gender": {"value": gender}, **hat, **{k: {"value": v} for k, v in extra.items()}}

        plan = {  # submission order g1, t1, i0, i1, i2
            a: (
                [
                    answer("female", smiling=1),
                    answer("male"),
                    answer("female"),
                    answer("male"),
                    answer("female"),
                ],
                1,
            ),
            b: (
                [
                    answer("male", smiling=1),
                    answer("female"),
                    answer("female"),
                    answer("female"),
                    answer("male"),
                ],
                5,
            ),
            c: ([answer("female"), answer("male"), answer("male"), answer("male"), answer("female")], 8),
        }
        for annotator, (answers, seconds) in plan.items():
            for item, given in zip([g1, t1, *real], answers, strict=True):
                submit(study, annotator, item, given, seconds)
        report = quality_report(study=study)
        rows = {row["annotator"]: row for row in report["annotators"]}
        # gold: a 2/2; b gender wrong 1/2; c smiling left unanswered 1/2
        assert [rows[n]["gold"]["correct"] for n in "abc"] == [2, 1, 1]
        assert [rows[n]["gold"]["n"] for n in "abc"] == [2, 2, 2]
        assert rows["b"]["attention"] == {"passed": 0, "failed": 1}
        assert rows["a"]["attention"] == {"passed": 1, "failed": 0}
        # LOO on real items: gender i0 (f f m), i1 (m f m), i2 (f m f); attributes all "hat" (3 agreements
        # each)
        # a: gender ties everywhere -> 3/3; b: i1 m,m vs f and i2 f,f vs m -> 3/5; c: i0 f,f vs m -> 3/4
        assert {n: (rows[n]["agreement"]["agree"], rows[n]["agreement"]["n"]) for n in "abc"} == {
            "a": (3, 3),
            "b": (3, 5),
            "c": (3, 4),
        }
        assert report["agreement_median"] == 0.75
        assert rows["a"]["median_seconds"] == 1.0 and rows["c"]["median_seconds"] == 8.0
        assert rows["b"]["straight_line"]["question"] == "attributes"
        assert rows["b"]["straight_line"]["longest_run"] == 5
        codes = {n: [f["code"] for f in rows[n]["flags"]] for n in "abc"}
        assert codes == {
            "a": ["speed"],
            "b": ["gold_accuracy", "attention", "agreement"],
            "c": ["gold_accuracy"],
        }
        assert report["controls"] == {"gold": 1, "attention": 1} and report["flagged"] == 3
        assert [rows[n]["items"] for n in "abc"] == [3, 3, 3] and rows["a"]["controls"] == 2

    def test_straight_line_flag(self, study) -> None:
        quality_settings_update(study=study, changes={"max_straight_run": 4})
        a = person(study, "a")
        for item in items(study, 4):
            submit(study, a, item, {"gender": {"value": "male"}, "attributes": {"value": ["hat"]}})
        (row,) = quality_report(study=study)["annotators"]
        assert row["straight_line"]["longest_run"] == 4 and "straight_lining" in [
            f["code"] for f in row["flags"]
        ]


# --- Exclusion ------------------------------------------------------------------------------------------


class TestExclusion:
    def test_recorded_reversible_and_the_majority_changes(self, study, owner, other_researcher) -> None:
        (item,) = items(study, 1)
        a, b, c = person(study, "a"), person(study, "b"), person(study, "c")
        for annotator, gender in ((a, "female"), (b, "male"), (c, "male")):
            submit(study, annotator, item, {"gender": {"value": gender}, "attributes": {"value": ["hat"]}})
        consensus_compute(study=study, question="gender")
        assert ConsensusLabel.objects.get(item=item, question_key="gender").value == "male"

        row = annotator_exclude(study=study, annotator=b, user=owner, reason="failed attention checks")
        label = ConsensusLabel.objects.get(item=item, question_key="gender")
        assert (label.resolved, label.value, label.n_votes) == (False, None, 2)  # 1-1 now: a tie
        assert (row.excluded_by, row.reason, row.reinstated_at) == (owner, "failed attention checks", None)
        with pytest.raises(Conflict):
            annotator_exclude(study=study, annotator=b, user=owner, reason="again")
        assert assignment_claim_next(study=study, annotator=b) is None  # no new items while excluded

        annotator_reinstate(study=study, annotator=b, user=other_researcher, note="checked by hand")
        label = ConsensusLabel.objects.get(item=item, question_key="gender")
        assert (label.resolved, label.value) == (True, "male")
        row.refresh_from_db()
        assert row.reinstated_by == other_researcher and row.reinstated_at is not None
        assert row.reinstate_note == "checked by hand" and AnnotatorExclusion.objects.count() == 1
        with pytest.raises(Conflict):
            annotator_reinstate(study=study, annotator=b, user=owner)

    def test_excluding_the_dissenter_flips_an_all_agree_label(self, owner) -> None:
        # Overlap 2: the two raters left after the exclusion still settle the term (with 3 it is pending).
        study = study_create(
            owner=owner, name="Visual", protocol=load_preset("visualness"), preset="visualness", overlap=2
        )
        term = Item.objects.create(study=study, external_id="hat", kind="text", text="hat")
        people = [person(study, name) for name in ("a", "b", "c")]
        for annotator, value in zip(people, ["agree", "disagree", "strongly_agree"], strict=True):
            submit(study, annotator, term, {"visual": {"value": value}})
        consensus_compute(study=study)
        assert labels_for(study, "visual").values[term.pk] is False
        annotator_exclude(study=study, annotator=people[1], user=owner, reason="random answers")
        assert labels_for(study, "visual").values[term.pk] is True  # recomputed at once

    def test_refusals_write_nothing(self, study, owner) -> None:
        a = person(study, "a")
        with pytest.raises(ValidationFailed):
            annotator_exclude(study=study, annotator=a, user=owner, reason="  ")
        stranger = UserFactory.create(username="stranger", role="annotator")
        from annotations.services.studies import annotator_for_user

        with pytest.raises(ValidationFailed):
            annotator_exclude(
                study=study, annotator=annotator_for_user(user=stranger), user=owner, reason="x"
            )
        with pytest.raises(Conflict):
            annotator_reinstate(study=study, annotator=a, user=owner)
        assert not AnnotatorExclusion.objects.exists()

    def test_agreement_and_metrics_ignore_excluded_people_and_controls(self, study, owner) -> None:
        study.overlap = 2  # the two people left after the exclusion settle each item
        study.save(update_fields=["overlap"])
        real = items(study, 2)
        (control,) = items(study, 1, prefix="gold")
        a, b, c = person(study, "a"), person(study, "b"), person(study, "c")
        for annotator in (a, b, c):
            for item in (*real, control):
                gender = "male" if annotator is c else "female"
                submit(
                    study, annotator, item, {"gender": {"value": gender}, "attributes": {"value": ["hat"]}}
                )
        gold(study, control, gender="female")
        report = agreement_report(study=study, n_resamples=0)
        gender = next(q for q in report["questions"] if q["key"] == "gender")
        assert gender["humans"][0]["n_items"] == 2 and report["n_items"] == 2
        assert report["left_out"]["control_items"] == 1
        annotator_exclude(study=study, annotator=c, user=owner, reason="disagrees with everyone")
        report = agreement_report(study=study, n_resamples=0)
        gender = next(q for q in report["questions"] if q["key"] == "gender")
        assert gender["humans"][0]["coders"] == 2 and report["human_annotators"] == 2
        assert report["left_out"]["excluded_annotators"] == ["c"]
        labels = labels_for(study, "gender")
        assert set(labels.values) == {item.pk for item in real}  # no control item
        assert all(value == "female" for value in labels.values.values())
        assert Annotation.objects.filter(annotator=c).count() == 6  # nothing deleted


def test_the_same_person_racing_for_one_control_shares_the_lease(study) -> None:
    """Two tabs claiming at once can pick the same control (controls are not row-locked): the second
    insert meets the unique (item, annotator) constraint and must get the first tab's lease, not a 500."""
    from annotations.services.assignment import _lease_control

    (item,) = items(study, 1)
    gold(study, item)
    ann = person(study, "twotabs")
    expires = timezone.now() + timedelta(minutes=30)
    first = Assignment.objects.create(
        study=study, item=item, annotator=ann, status="leased", lease_expires_at=expires
    )
    second = _lease_control(item=item, study=study, annotator=ann, expires=expires)  # the other tab's insert
    assert second.pk == first.pk and Assignment.objects.filter(item=item, annotator=ann).count() == 1
    Assignment.objects.filter(pk=first.pk).update(status="submitted")
    with pytest.raises(Conflict, match="ask for the next item again"):
        _lease_control(item=item, study=study, annotator=ann, expires=expires)


def test_the_pages_quality_report_is_kept_a_minute_but_not_past_an_exclusion(study, owner) -> None:
    from django.core.cache import cache

    from annotations.selectors.quality import quality_report_cached

    cache.clear()
    real = items(study, 2)
    ann = person(study, "quick")
    submit(study, ann, real[0], ANSWERS)
    first = quality_report_cached(study=study)
    submit(study, ann, real[1], ANSWERS)  # a new answer within the minute: the kept report is served
    kept = quality_report_cached(study=study)
    assert kept["computed_at"] == first["computed_at"] and kept["annotators"][0]["items"] == 1
    assert quality_report_cached(study=study, fresh=True)["annotators"][0]["items"] == 2
    annotator_exclude(study=study, annotator=ann, user=owner, reason="test")
    after = quality_report_cached(study=study)  # an exclusion is shown at once
    assert after["annotators"][0]["excluded"] and after["computed_at"] != first["computed_at"]
