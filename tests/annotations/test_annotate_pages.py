"""Annotator pages and batch pages through Django's test client (the browser tests drive the JS)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client
from PIL import Image

from annotations.models import (
    Annotation,
    AnnotationRevision,
    Assignment,
    Enrollment,
    Item,
    RevealLog,
    Study,
)
from annotations.services.studies import enrollment_add
from tests.annotations.builders import image_item
from tests.factories import ItemFactory, MachineAnnotatorFactory, StudyFactory, UserFactory
from tests.s3_server import FileStore, fetch_download

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def setup(study, annotator_user):
    study.overlap = 1
    study.save()
    items = [image_item(study, "a"), image_item(study, "b")]
    enrollment_add(study=study, user=annotator_user)
    return study, items, login(annotator_user)


GOOD = {
    "q-gender": "female",
    "q-attributes": ["hat"],
    "shown-attributes": "hat,glasses,beard,none_of_the_above",
    "q-boxes": json.dumps([{"option": "hat", "x": 1500, "y": 100, "w": 400, "h": 300}]),
    "q-colour": "Navy",
    "q-smiling": "1",
    "reason-smiling": "broad smile",
    "time_spent_ms": "4200",
}


def start(client: Client, study: Study) -> int:
    response = client.get(f"/annotate/studies/{study.pk}/next/")
    assert response.status_code == 302
    return int(response["Location"].rstrip("/").split("/")[-1])


def test_dashboard_shows_progress(setup) -> None:
    study, _items, client = setup
    page = client.get("/annotate/").content.decode()
    assert study.name in page and "0 done" in page and "2 left" in page


def test_task_page_shows_every_question_kind_and_prefetches(setup, django_assert_max_num_queries) -> None:
    study, _items, client = setup
    pk = start(client, study)
    with django_assert_max_num_queries(12):
        response = client.get(f"/annotate/assignments/{pk}/")
    page = response.content.decode()
    assert response.status_code == 200
    for needle in (
        'type="radio" name="q-gender"',
        'type="checkbox" name="q-attributes"',
        'data-none="1"',
        'name="q-boxes"',
        'list="colours-colour"',
        'name="reason-smiling"',
        f'data-ahead="/annotate/assignments/{pk}/ahead/"',
        "/display/",
        "js/annotate.js",
        "<script src=",
    ):
        assert needle in page, needle
    assert "<script>" not in page  # the CSP allows no inline script
    # once shown, the page leases the next item ahead (flow.js), and prefetches its image
    assert not Assignment.objects.exclude(pk=pk).exists()
    following = client.post(f"/annotate/assignments/{pk}/ahead/").json()
    ahead = Assignment.objects.exclude(pk=pk).get()
    assert following == {
        "task": f"/annotate/assignments/{ahead.pk}/",
        "image": f"/items/{ahead.item_id}/images/0/display/",
    }
    assert client.post(f"/annotate/assignments/{pk}/ahead/").json() == following  # the same, held


def test_submit_stores_answers_and_moves_on(setup) -> None:
    study, _items, client = setup
    pk = start(client, study)
    client.get(f"/annotate/assignments/{pk}/")
    response = client.post(f"/annotate/assignments/{pk}/", GOOD)
    # straight to the next item's page (claimed in the same request: one redirect, not two)
    ahead = Assignment.objects.exclude(pk=pk).get()
    assert response.status_code == 302 and response["Location"] == f"/annotate/assignments/{ahead.pk}/"
    stored = {a.question_key: a for a in Annotation.objects.filter(item__assignments__pk=pk)}
    assert stored["gender"].value == "female" and stored["colour"].value == "blue"
    assert stored["boxes"].value == [{"option": "hat", "x": 1500, "y": 100, "w": 400, "h": 300}]
    assert stored["attributes"].shown == ["hat", "glasses", "beard", "none_of_the_above"]
    assert stored["smiling"].value == 1 and stored["smiling"].reason == "broad smile"
    assignment = Assignment.objects.get(pk=pk)
    assert assignment.status == "submitted" and assignment.time_spent_ms == 4200
    # a double-clicked submit: the same answers again change nothing
    client.post(f"/annotate/assignments/{pk}/", GOOD)
    assert Annotation.objects.filter(item__assignments__pk=pk).count() == 5
    assert not AnnotationRevision.objects.exists()
    # the next item is the one leased ahead
    nxt = start(client, study)
    assert nxt != pk and Assignment.objects.get(pk=nxt).status == "leased"


def test_submit_query_count(setup, django_assert_max_num_queries) -> None:
    study, _items, client = setup
    pk = start(client, study)
    # the submit (17) and, in the same request, the claim of the next item (8: a new lease here)
    with django_assert_max_num_queries(25):
        assert client.post(f"/annotate/assignments/{pk}/", GOOD).status_code == 302


def test_server_side_errors_are_shown_next_to_the_question(setup) -> None:
    study, _items, client = setup
    pk = start(client, study)
    bad = {
        **GOOD,
        "q-gender": "robot",
        "q-boxes": json.dumps([{"option": "hat", "x": 1900, "y": 0, "w": 400, "h": 10}]),
        "q-colour": "plaid",
    }
    response = client.post(f"/annotate/assignments/{pk}/", bad)
    page = response.content.decode()
    assert response.status_code == 400
    assert 'id="error-gender"' in page and "is not one of male, female" in page
    assert 'id="error-boxes"' in page and "outside the 2000x1000 image" in page
    assert 'id="error-colour"' in page
    assert 'value="robot"' not in page or "checked" not in page.split('value="robot"')[0][-20:]
    assert not Annotation.objects.exists()
    assert Assignment.objects.get(pk=pk).status == "leased"
    # a box linked to an option that is not selected
    response = client.post(
        f"/annotate/assignments/{pk}/",
        {**GOOD, "q-boxes": json.dumps([{"option": "beard", "x": 1, "y": 1, "w": 5, "h": 5}])},
    )
    assert response.status_code == 400 and "is not selected in" in response.content.decode()


def test_go_back_and_edit_keeps_history(setup) -> None:
    study, _items, client = setup
    pk = start(client, study)
    client.post(f"/annotate/assignments/{pk}/", GOOD)
    mine = client.get(f"/annotate/studies/{study.pk}/mine/").content.decode()
    assert f"/annotate/assignments/{pk}/" in mine and "Change answers" in mine
    page = client.get(f"/annotate/assignments/{pk}/").content.decode()
    assert 'value="female" checked' in page and "Save changes" in page
    response = client.post(f"/annotate/assignments/{pk}/", {**GOOD, "q-gender": "male"})
    assert response["Location"] == f"/annotate/studies/{study.pk}/mine/"
    gender = Annotation.objects.get(question_key="gender")
    assert gender.value == "male" and list(gender.revisions.values_list("value", flat=True)) == ["female"]


def test_skip_needs_a_reason(setup) -> None:
    study, _items, client = setup
    pk = start(client, study)
    client.post(f"/annotate/assignments/{pk}/skip/", {"reason": ""})
    assert Assignment.objects.get(pk=pk).status == "leased"
    response = client.post(f"/annotate/assignments/{pk}/skip/", {"reason": "cannot tell"})
    assert response.status_code == 302
    assignment = Assignment.objects.get(pk=pk)
    assert assignment.status == "skipped" and assignment.skip_reason == "cannot tell"


def test_no_one_else_sees_an_assignment_or_machine_labels(setup, other_researcher) -> None:
    study, items, client = setup
    machine = MachineAnnotatorFactory.create(name="gpt-judge")
    for item in items:
        Annotation.objects.create(
            study=study, item=item, annotator=machine, question_key="gender", value="male"
        )
    pk = start(client, study)
    page = client.get(f"/annotate/assignments/{pk}/").content.decode()
    assert "gpt-judge" not in page and 'value="male" checked' not in page
    intruder = UserFactory.create(username="intruder", role="annotator")
    enrollment_add(study=study, user=intruder)
    assert login(intruder).get(f"/annotate/assignments/{pk}/").status_code == 404
    assert login(intruder).post(f"/annotate/assignments/{pk}/", GOOD).status_code == 404
    assert login(other_researcher).get(f"/annotate/assignments/{pk}/").status_code == 404
    assert Client().get(f"/annotate/assignments/{pk}/").status_code == 302
    assert login(other_researcher).get(f"/annotate/studies/{study.pk}/next/").status_code == 404
    assert not Annotation.objects.filter(annotator__kind="human").exists()


def test_reveal_after_submit_is_logged_with_agreement(setup) -> None:
    study, items, client = setup
    study.reveal_after_submit = True
    study.save(update_fields=["reveal_after_submit"])
    machine = MachineAnnotatorFactory.create(name="gpt-judge")
    for item in items:
        Annotation.objects.create(
            study=study, item=item, annotator=machine, question_key="gender", value="male"
        )
    pk = start(client, study)
    # before submitting, the reveal is refused
    assert client.get(f"/annotate/assignments/{pk}/reveal/")["Location"] == f"/annotate/assignments/{pk}/"
    assert not RevealLog.objects.exists()
    response = client.post(f"/annotate/assignments/{pk}/", GOOD)
    assert response["Location"] == f"/annotate/assignments/{pk}/reveal/"
    page = client.get(response["Location"]).content.decode()
    assert "gpt-judge" in page and "male" in page
    log = RevealLog.objects.get()
    assert log.shown == [{"question": "gender", "labeller": "gpt-judge 1", "value": "male"}]
    client.post(f"/annotate/assignments/{pk}/reveal/", {"reveal": log.pk, "agree-gender": "disagree"})
    log.refresh_from_db()
    assert log.agreement == {"gender": "disagree"} and log.answered_at is not None
    client.get(f"/annotate/assignments/{pk}/reveal/")
    assert RevealLog.objects.count() == 2  # every showing is logged


def test_display_image_is_resized_and_cached(
    setup, other_researcher, owner, default_store: FileStore
) -> None:
    study, items, client = setup
    start(client, study)
    item = Assignment.objects.first().item
    response = client.get(f"/items/{item.pk}/images/0/display/")
    if default_store.kind == "filesystem":  # on S3: a presigned URL, which the browser does not cache
        assert response["Cache-Control"] == "private, max-age=600"  # the next item's prefetch, not a year
    data = fetch_download(response, default_store)
    assert Image.open(io.BytesIO(data)).size == (1024, 512)
    assert fetch_download(login(owner).get(f"/items/{item.pk}/images/0/display/"), default_store) == data
    assert login(other_researcher).get(f"/items/{item.pk}/images/0/display/").status_code == 404
    unassigned = Item.objects.exclude(assignments__isnull=False).exclude(pk=item.pk).first()
    if unassigned is not None:
        assert client.get(f"/items/{unassigned.pk}/images/0/display/").status_code == 404


def test_reference_and_text_items(study, annotator_user) -> None:
    ItemFactory.create(study=study, external_id="ref", is_reference=True)
    enrollment_add(study=study, user=annotator_user)
    client = login(annotator_user)
    pk = start(client, study)
    assert "image of this item is unavailable" in client.get(f"/annotate/assignments/{pk}/").content.decode()


def test_paused_study_and_nothing_left(setup) -> None:
    study, _items, client = setup
    study.status = "paused"
    study.save()
    response = client.get(f"/annotate/studies/{study.pk}/next/")
    assert response.status_code == 409 and "paused" in response.content.decode()
    assert not Assignment.objects.exists()


# --- batch pages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "who,expected", [("owner", 200), ("other", 404), ("annotator", 403), ("anonymous", 302)]
)
@pytest.mark.parametrize(
    "url", ["/studies/{pk}/progress/", "/studies/{pk}/progress.json", "/studies/{pk}/progress.csv"]
)
def test_progress_permission_matrix(
    setup, owner, other_researcher, annotator_user, who, expected, url
) -> None:
    study = setup[0]
    users = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}
    client = login(users[who]) if users[who] else Client()
    assert client.get(url.format(pk=study.pk)).status_code == expected


@pytest.mark.parametrize(
    "who,expected", [("owner", 302), ("other", 404), ("annotator", 403), ("anonymous", 302)]
)
def test_pause_permission_matrix(setup, owner, other_researcher, annotator_user, who, expected) -> None:
    study = setup[0]
    users = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}
    client = login(users[who]) if users[who] else Client()
    response = client.post(f"/studies/{study.pk}/run/", {"action": "pause"})
    assert response.status_code == expected
    assert Study.objects.get(pk=study.pk).status == ("paused" if who == "owner" else "active")


def test_progress_figures_by_hand(setup, owner) -> None:
    study, items, client = setup
    study.overlap = 2
    study.save()
    image_item(study, "c")
    pk = start(client, study)  # leases one item and, on the page, one ahead
    client.get(f"/annotate/assignments/{pk}/")
    client.post(f"/annotate/assignments/{pk}/", {**GOOD, "time_spent_ms": "3000"})
    data = login(owner).get(f"/studies/{study.pk}/progress.json").json()
    # 3 items x overlap 2 = 6 judgements needed; 1 submitted; the submitted item and the leased one are
    # in progress
    assert data == {
        "items": 3,
        "complete": 0,
        "in_progress": 2,
        "untouched": 1,
        "judgements": 1,
        "judgements_needed": 6,
        "percent": 16.7,
        "status": "active",
    }
    rows = list(
        csv.DictReader(
            io.StringIO(
                login(owner).get(f"/studies/{study.pk}/progress.csv?by=annotator").getvalue().decode()
            )
        )
    )
    assert rows == [
        {
            "annotator": "ann",
            "pool": "crowd",
            "submitted": "1",
            "skipped": "0",
            "leased": "1",
            "median_seconds": "3.0",
        }
    ]
    page = login(owner).get(f"/studies/{study.pk}/progress/").content.decode()
    assert 'id="progress-bar"' in page and "js/progress.js" in page
    image_item(study, '=HYPERLINK("http://evil.example")')  # an untrusted id that looks like a formula
    rows = list(
        csv.DictReader(io.StringIO(login(owner).get(f"/studies/{study.pk}/progress.csv").getvalue().decode()))
    )
    assert '\'=HYPERLINK("http://evil.example")' in [row["external_id"] for row in rows]


def test_enrol_a_pool_and_toggle_reveal(study, owner) -> None:
    # The owner's annotators are those enrolled in the owner's other studies (docs/security.md).
    earlier = StudyFactory.create(owner=owner)
    crowd = [UserFactory.create(username=f"c{i}", role="annotator") for i in range(2)]
    for person in crowd:
        enrollment_add(study=earlier, user=person)
    expert = UserFactory.create(username="e", role="annotator")
    enrollment_add(study=earlier, user=expert, pool="expert")
    enrollment_add(
        study=ItemFactory.create().study, user=UserFactory.create(username="someone-elses", role="annotator")
    )
    client = login(owner)
    client.post(f"/studies/{study.pk}/enroll-pool/", {"pool": "expert"})
    assert list(Enrollment.objects.filter(study=study).values_list("user__username", "pool")) == [
        ("e", "expert")
    ]
    client.post(f"/studies/{study.pk}/enroll-pool/", {"pool": "crowd"})
    assert sorted(Enrollment.objects.filter(study=study).values_list("user__username", "pool")) == [
        ("c0", "crowd"),
        ("c1", "crowd"),
        ("e", "expert"),
    ]
    client.post(f"/studies/{study.pk}/run/", {"action": "reveal", "reveal": "on"})
    assert Study.objects.get(pk=study.pk).reveal_after_submit is True
