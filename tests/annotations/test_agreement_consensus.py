"""The agreement report, consensus and adjudication on a small study worked out by hand."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.models import Annotator, ConsensusLabel, Item, Study, ValidationSampleItem
from annotations.selectors.adjudication import adjudication_queue
from annotations.selectors.agreement import agreement_report
from annotations.selectors.labels import labels_for
from annotations.services.consensus import (
    consensus_adjudicate,
    consensus_adjudicate_item,
    consensus_compute,
    rules_chosen,
)
from annotations.services.studies import enrollment_add
from common.errors import ValidationFailed
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def line(item: str, who: str, question: str, value, kind: str = "human") -> dict:
    return {"item": item, "annotator": who, "annotator_kind": kind, "question": question, "value": value}


@pytest.fixture
def judged(study):
    for name in ("i1", "i2", "i3"):
        ItemFactory.create(
            study=study, external_id=name, condition="gender:women" if name != "i3" else "base"
        )
    records = [
        line("i1", "r1", "gender", "male"),
        line("i1", "r2", "gender", "male"),
        line("i1", "r3", "gender", "female"),
        line("i2", "r1", "gender", "female"),
        line("i2", "r2", "gender", "female"),
        line("i2", "r3", "gender", "female"),
        line("i3", "r1", "gender", "male"),
        line("i3", "r2", "gender", "female"),
        line("i1", "bot", "gender", "male", "machine"),
        line("i2", "bot", "gender", "male", "machine"),
        line("i3", "bot", "gender", "female", "machine"),
        line("i1", "r1", "attributes", ["hat"]),
        line("i1", "r2", "attributes", ["hat"]),
        line("i1", "r1", "boxes", [{"option": "hat", "x": 0, "y": 0, "w": 10, "h": 10}]),
        line("i1", "r2", "boxes", [{"option": "hat", "x": 5, "y": 0, "w": 10, "h": 10}]),
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    # Fully rated: every item has the overlap's judgements (i3 has two), so no consensus is pending.
    study.overlap = 2
    study.save(update_fields=["overlap"])
    return study


def test_alpha_among_humans_is_the_hand_computed_value(judged) -> None:
    report = agreement_report(study=judged, n_resamples=200)
    gender = next(q for q in report["questions"] if q["key"] == "gender")
    humans = gender["humans"][0]
    # Coincidences: i1 (m,m,f) gives o_mm 1, o_mf 1, o_fm 1; i2 (f,f,f) o_ff 3; i3 (m,f) o_mf 1, o_fm 1.
    # n = 8, n_m = 3, n_f = 5; D_o = 4/8 = 0.5; D_e = 2*3*5/(8*7) = 30/56; alpha = 1 - 0.5*56/30 = 1/15.
    assert humans["value"] == pytest.approx(1 / 15)
    assert (humans["n_items"], humans["n_judgements"], humans["level"]) == (3, 8, "nominal")
    assert humans["ci_low"] is not None and humans["ci_low"] <= humans["ci_high"]
    # The labeller against the consensus (i1 male, i2 female; i3 is a tie): right on i1, wrong on i2.
    machine = gender["machines_vs_consensus"][0]
    assert machine["labeller"] == "bot" and machine["n_items"] == 2
    # accuracy 1/2; kappa: p_o 1/2, p_e = 1/2*1 + 1/2*0 = 1/2, so (1/2 - 1/2)/(1 - 1/2) = 0, but the
    # labeller answered one class only, so kappa is 0 whatever it does: undefined, with the reason.
    assert machine["overall"]["accuracy"] == 0.5 and machine["overall"]["kappa"] is None
    assert "one class" in machine["overall"]["kappa_undefined_reason"]
    assert [g["group"] for g in machine["by_condition"]] == ["gender:women"]
    # Boxes: (0,0,10,10) vs (5,0,10,10): intersection 50, union 150, IoU 1/3 < 0.5: no match.
    boxes = next(q for q in report["questions"] if q["key"] == "boxes")["boxes"]["humans"]
    assert boxes["n_matched"] == 0 and boxes["match_rate"] == 0.0


def test_labeller_against_stored_consensus_with_a_metadata_breakdown(judged, owner) -> None:
    Item.objects.filter(external_id="i1").update(metadata={"region": "north"})
    Item.objects.filter(external_id="i2").update(metadata={"region": "south"})
    consensus_compute(study=judged, question="gender")  # i1 male, i2 female, i3 a tie (unresolved)
    consensus_adjudicate(
        study=judged,
        item=Item.objects.get(external_id="i3"),
        question_key="gender",
        value="female",
        user=owner,
    )
    gender = next(
        q
        for q in agreement_report(study=judged, n_resamples=0, breakdown="region")["questions"]
        if q["key"] == "gender"
    )
    machine = gender["machines_vs_consensus"][0]
    # Reference (stored) male, female, female; bot male, male, female. Labels [female, male]:
    # C = [[1, 1], [0, 1]]; p_o = 2/3; p_e = (2/3)(1/3) + (1/3)(2/3) = 4/9; kappa = (2/9)/(5/9) = 0.4.
    assert machine["n_items"] == 3 and machine["overall"]["confusion"] == [[1, 1], [0, 1]]
    assert machine["overall"]["accuracy"] == pytest.approx(2 / 3) and machine["overall"][
        "kappa"
    ] == pytest.approx(0.4)
    assert [(g["group"], g["report"]["accuracy"]) for g in machine["by_condition"]] == [
        ("base", 1.0),
        ("gender:women", 0.5),
    ]
    assert [(g["group"], g["report"]["accuracy"]) for g in machine["by_region"]] == [
        ("None", 1.0),
        ("north", 1.0),
        ("south", 0.0),
    ]


def test_undefined_alpha_is_reported_with_its_reason(study) -> None:
    ItemFactory.create(study=study, external_id="only")
    annotations_import_records(study=study, records=[(1, line("only", "r1", "gender", "male"))])
    gender = next(
        q for q in agreement_report(study=study, n_resamples=50)["questions"] if q["key"] == "gender"
    )
    assert gender["humans"][0]["value"] is None and gender["humans"][0]["undefined_reason"]
    report = agreement_report(study=study, n_resamples=0)
    assert report["study_alpha"]["mean"] is None and report["study_alpha"]["undefined_reason"]


def test_consensus_rules_and_idempotent_recomputation(judged) -> None:
    summary = consensus_compute(study=judged, question="gender")
    assert summary["gender"] == {"labels": 3, "resolved": 2, "unresolved": 1, "pending": 0, "adjudicated": 0}
    labels = {label.item.external_id: label for label in ConsensusLabel.objects.select_related("item")}
    assert labels["i1"].value == "male" and labels["i1"].confidence == pytest.approx(2 / 3)
    assert len(labels["i1"].support) == 2 and labels["i3"].value is None and "tie" in labels["i3"].reason
    before = sorted(ConsensusLabel.objects.values_list("item_id", "value", "resolved"))
    consensus_compute(study=judged, question="gender")
    assert sorted(ConsensusLabel.objects.values_list("item_id", "value", "resolved")) == before
    consensus_compute(study=judged, question="gender", rule={"rule": "unanimous"})
    assert dict(ConsensusLabel.objects.values_list("item__external_id", "value")) == {
        "i1": None,
        "i2": "female",
        "i3": None,
    }
    assert rules_chosen(judged) == {"gender": {"rule": "unanimous"}}
    consensus_compute(study=judged, question="gender", rule={"rule": "at-least-k", "k": 2})
    assert dict(ConsensusLabel.objects.values_list("item__external_id", "value")) == {
        "i1": "male",
        "i2": "female",
        "i3": None,
    }
    with pytest.raises(ValidationFailed, match="needs k"):
        consensus_compute(study=judged, question="gender", rule={"rule": "at-least-k"})
    with pytest.raises(ValidationFailed, match="boxes"):
        consensus_compute(study=judged, question="boxes")


def test_ties_and_machine_disagreements_go_to_adjudication_and_decisions_override(judged, owner) -> None:
    consensus_compute(study=judged, question="gender")
    queue = adjudication_queue(study=judged)
    assert [(q["external_id"], q["question"]) for q in queue] == [("i2", "gender"), ("i3", "gender")]
    assert "bot said 'male'" in queue[0]["reason"]
    i3 = Item.objects.get(external_id="i3")
    with pytest.raises(ValidationFailed, match="'robot' is not one of"):
        consensus_adjudicate(study=judged, item=i3, question_key="gender", value="robot", user=owner)
    consensus_adjudicate(
        study=judged, item=i3, question_key="gender", value="female", user=owner, note="clear"
    )
    consensus_compute(study=judged, question="gender")  # a recomputation keeps the decision
    label = ConsensusLabel.objects.get(item=i3)
    assert (label.value, label.rule, label.adjudicated_by, label.note) == (
        "female",
        "adjudicated",
        owner,
        "clear",
    )
    assert labels_for(judged, "gender").values[i3.pk] == "female"  # metrics read the stored consensus


def test_an_items_decisions_are_all_written_or_none(judged, owner) -> None:
    """``consensus_adjudicate_item``: every required question decided, each validated once, all
    written or none; an item of another study is refused before anything is read."""
    i2, i3 = Item.objects.get(external_id="i2"), Item.objects.get(external_id="i3")
    with pytest.raises(ValidationFailed) as refused:
        consensus_adjudicate_item(
            study=judged,
            item=i3,
            decisions={"gender": "robot"},
            allowed={"gender"},
            required={"gender"},
            user=owner,
        )
    assert "'robot' is not one of" in refused.value.details["gender"]
    with pytest.raises(ValidationFailed, match="needs a decision"):
        consensus_adjudicate_item(
            study=judged, item=i3, decisions={}, allowed={"gender"}, required={"gender"}, user=owner
        )
    stranger = ItemFactory.create(study=StudyFactory.create(owner=owner))
    with pytest.raises(ValidationFailed, match="not in this study"):
        consensus_adjudicate_item(
            study=judged,
            item=stranger,
            decisions={"gender": "female"},
            allowed={"gender"},
            required=set(),
            user=owner,
        )
    assert not ConsensusLabel.objects.filter(rule="adjudicated").exists()
    (label,) = consensus_adjudicate_item(
        study=judged,
        item=i2,
        decisions={"gender": "female"},
        allowed={"gender"},
        required={"gender"},
        user=owner,
    )
    assert (label.item, label.value, label.rule, label.adjudicated_by) == (i2, "female", "adjudicated", owner)


def test_dawid_skene_rule_runs_over_the_question(judged) -> None:
    consensus_compute(study=judged, question="gender", rule={"rule": "dawid-skene"})
    labels = dict(ConsensusLabel.objects.values_list("item__external_id", "value"))
    assert labels["i2"] == "female" and set(labels) == {"i1", "i2", "i3"}


def test_commands(judged) -> None:
    out = io.StringIO()
    call_command("agreement", str(judged.pk), "--json", "--resamples", "100", stdout=out)
    assert json.loads(out.getvalue())["questions"][0]["humans"][0]["value"] == pytest.approx(1 / 15)
    out = io.StringIO()
    call_command("consensus", str(judged.pk), "--rule", "majority", "--question", "gender", stdout=out)
    result = json.loads(out.getvalue())
    assert result["questions"]["gender"]["unresolved"] == 1 and result["to_adjudicate"] == 2
    out = io.StringIO()
    call_command(
        "sample_for_validation",
        str(judged.pk),
        "--labeller",
        "bot",
        "--size",
        "2",
        "--width",
        "0.2",
        stdout=out,
    )
    sample = json.loads(out.getvalue())
    assert sample["size"] == 2 and sample["allocation"] == {"base": 1, "gender:women": 1}
    assert sample["smallest_size_for_width"] > 2 and 0 < sample["interval_width_95"] < 1
    assert ValidationSampleItem.objects.filter(sample__study=judged).count() == 2


def test_a_validation_sample_restricts_what_humans_are_given(judged) -> None:
    from annotations.services.assignment import assignment_claim_next
    from annotations.services.studies import annotator_for_user
    from annotations.services.validation_sample import validation_sample_create

    judged.overlap = 10
    judged.save()
    validation_sample_create(study=judged, labeller=Annotator.objects.get(name="bot"), size=1, seed=3)
    sampled = set(ValidationSampleItem.objects.filter(sample__study=judged).values_list("item_id", flat=True))
    user = UserFactory.create(username="validator", role="annotator")
    enrollment_add(study=judged, user=user)
    annotator = annotator_for_user(user=user)
    study = Study.objects.get(pk=judged.pk)
    first = assignment_claim_next(study=study, annotator=annotator)
    assert first is not None and first.item_id in sampled
    assert assignment_claim_next(study=study, annotator=annotator, exclude=[first.pk]) is None


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_agreement_and_consensus_api(judged, owner, other_researcher, annotator_user, role, status) -> None:
    enrollment_add(study=judged, user=annotator_user)
    users = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}
    client = client_for(users[role])
    assert client.get(f"/api/studies/{judged.pk}/agreement/?resamples=50").status_code == status
    computed = client.post(f"/api/studies/{judged.pk}/consensus/", {"question": "gender"}, format="json")
    assert computed.status_code == status
    assert ConsensusLabel.objects.exists() is (status == 200)
    if status == 200:
        assert len(client.get(f"/api/studies/{judged.pk}/consensus/?question=gender").json()) == 3
        queue = client.get(f"/api/studies/{judged.pk}/adjudication/").json()
        i3 = Item.objects.get(external_id="i3")
        decided = client.post(
            f"/api/studies/{judged.pk}/adjudication/",
            {"item": i3.pk, "question": "gender", "value": "male"},
            format="json",
        )
        assert len(queue) == 2 and decided.status_code == 201 and decided.json()["rule"] == "adjudicated"


def test_experts_adjudicate_on_the_page_crowd_cannot(judged, owner) -> None:
    consensus_compute(study=judged, question="gender")
    expert = UserFactory.create(username="expert", role="annotator")
    crowd = UserFactory.create(username="crowd", role="annotator")
    enrollment_add(study=judged, user=expert, pool="expert")
    enrollment_add(study=judged, user=crowd, pool="crowd")
    i3 = Item.objects.get(external_id="i3")
    client = Client()
    client.force_login(expert)
    page = client.get(f"/studies/{judged.pk}/adjudicate/{i3.pk}/").content.decode()
    assert "Everyone&#x27;s answers" in page or "Everyone's answers" in page
    # People blinded (Annotator 1, 2...), the machine labeller by its name.
    assert "<td>Annotator 1</td>" in page and "<td>r1</td>" not in page and "bot" in page
    client.post(f"/studies/{judged.pk}/adjudicate/{i3.pk}/", {"d-gender": "female"})
    assert ConsensusLabel.objects.get(item=i3).adjudicated_by == expert
    other = Client()
    other.force_login(crowd)
    assert other.get(f"/studies/{judged.pk}/adjudicate/{i3.pk}/").status_code == 403
    researcher_page = Client()
    researcher_page.force_login(owner)
    report = researcher_page.get(f"/studies/{judged.pk}/agreement/?resamples=50")
    assert report.status_code == 200 and "0.067" in report.content.decode()
    csv_text = researcher_page.get(
        f"/studies/{judged.pk}/agreement/?format=csv&resamples=20"
    ).content.decode()
    assert csv_text.startswith("question,comparison,alpha")


def test_a_large_consensus_refreshes_the_planner_statistics_of_its_labels(study) -> None:
    """Exports page consensus labels by key (PostgreSQL plans those pages from the table's statistics):
    computing labels for many items runs ANALYZE on them, as every bulk write does."""
    from django.db import connection

    from annotations.interchange.item_import import items_import_records
    from common.planner_statistics import BULK_ROWS

    def study_in_label_statistics() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT most_common_vals::text FROM pg_stats "
                "WHERE tablename = 'annotations_consensuslabel' AND attname = 'study_id'"
            )
            rows = cursor.fetchall()
        return any(str(study.pk) in (row[0] or "").strip("{}").split(",") for row in rows)

    names = [f"c{n}" for n in range(BULK_ROWS)]
    items_import_records(study=study, records=[(name, {"external_id": name}) for name in names])
    records = [line(name, who, "gender", "male") for name in names for who in ("r1", "r2")]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    if connection.vendor != "postgresql":
        assert consensus_compute(study=study, question="gender")["gender"]["labels"] == BULK_ROWS
        return
    assert not study_in_label_statistics()
    assert consensus_compute(study=study, question="gender")["gender"]["labels"] == BULK_ROWS
    assert study_in_label_statistics()
