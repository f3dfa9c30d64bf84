"""Drafts kept on the server (``AssignmentDraft``) through the HTTP path the task page takes
(``/annotate/assignments/ID/draft/``): own annotator only, while the lease is theirs, size-limited,
checked like answers but possibly incomplete, restored on the page, dropped on submit, skip, release
and expiry. The page side (flow.js, a second browser) is in tests/browser/test_canvas_tools_browser.py."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import Assignment, AssignmentDraft, Study, User
from annotations.services.assignment import assignment_release, assignments_expire
from annotations.services.drafts import MAX_DRAFT_BYTES
from annotations.services.studies import enrollment_add, study_create
from protocols.schema import load_protocol_text
from tests.annotations.builders import image_item
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Drafts
unit: image
questions:
  - key: wears
    kind: multi
    prompt: What does the person wear?
    options: ["A red hat", "Dark glasses"]
    none_option: Nothing of these
  - key: boxes
    kind: boxes
    prompt: Box each thing you selected.
    linked_question: wears
    required: false
  - key: mood
    kind: single
    prompt: Mood?
    options: ["Very happy", "Rather sad"]
"""
ANSWER: dict[str, Any] = {
    "q-wears": ["a_red_hat"],
    "shown-wears": "a_red_hat,dark_glasses,none_of_the_above",
    "q-boxes": json.dumps([{"option": "a_red_hat", "x": 10, "y": 10, "w": 50, "h": 50}]),
    "q-mood": "very_happy",
    "time_spent_ms": "3000",
}


def make_study(owner: User, *, items: int) -> Study:
    study = study_create(owner=owner, name="Draft study", protocol=load_protocol_text(PROTOCOL), overlap=1)
    for index in range(items):
        image_item(study, f"draft-{index}", size=(400, 300))
    return study


def enrolled(study: Study, username: str) -> tuple[User, Client]:
    user = UserFactory.create(username=username, role="annotator")
    enrollment_add(study=study, user=user)
    client = Client()
    client.force_login(user)
    return user, client


def claim(client: Client, study: Study) -> int:
    response = client.get(f"/annotate/studies/{study.pk}/next/")
    assert response.status_code == 302
    return int(response["Location"].split("?")[0].rstrip("/").split("/")[-1])


# Incomplete: "mood" (required) is not answered, nor are the boxes each option may need.
PARTIAL = [["q-wears", "a_red_hat"], ["shown-wears", "a_red_hat,dark_glasses"], ["q-mood", ""]]


def put(client: Client, pk: int, body: Any, *, raw: bool = False) -> Any:
    data = body if raw else json.dumps(body)
    return client.put(f"/annotate/assignments/{pk}/draft/", data, content_type="application/json")


def server_draft(page: str) -> Any:
    start = page.find('<script id="server-draft" type="application/json">')
    if start < 0:
        return None
    start = page.index(">", start) + 1
    return json.loads(page[start : page.index("</script>", start)])


def test_a_draft_is_kept_for_its_annotator_and_restored_on_the_page(owner: User) -> None:
    study = make_study(owner, items=2)
    _user, me = enrolled(study, "me")
    pk = claim(me, study)
    assert me.get(f"/annotate/assignments/{pk}/draft/").json() == {"fields": None}
    response = put(me, pk, {"fields": PARTIAL})
    assert response.status_code == 200, response.content
    assert AssignmentDraft.objects.get(assignment_id=pk).fields == PARTIAL
    assert me.get(f"/annotate/assignments/{pk}/draft/").json() == {"fields": PARTIAL}
    # the task page carries it, for flow.js to put back into the form on any device
    assert server_draft(me.get(f"/annotate/assignments/{pk}/").content.decode()) == PARTIAL
    # a newer draft replaces it
    assert put(me, pk, {"fields": [["q-mood", "rather_sad"]]}).status_code == 200
    assert AssignmentDraft.objects.get(assignment_id=pk).fields == [["q-mood", "rather_sad"]]
    assert me.delete(f"/annotate/assignments/{pk}/draft/").status_code == 204
    assert not AssignmentDraft.objects.filter(assignment_id=pk).exists()


def test_another_annotator_can_neither_read_nor_write_a_draft(owner: User) -> None:
    study = make_study(owner, items=2)
    _user, me = enrolled(study, "me")
    _other, other = enrolled(study, "other")
    pk = claim(me, study)
    assert put(me, pk, {"fields": PARTIAL}).status_code == 200
    assert other.get(f"/annotate/assignments/{pk}/draft/").status_code == 404
    assert put(other, pk, {"fields": [["q-mood", "rather_sad"]]}).status_code == 404
    assert other.delete(f"/annotate/assignments/{pk}/draft/").status_code == 404
    assert other.get(f"/annotate/assignments/{pk}/").status_code == 404
    # their own task page never carries my draft
    theirs = claim(other, study)
    assert server_draft(other.get(f"/annotate/assignments/{theirs}/").content.decode()) is None
    assert AssignmentDraft.objects.get(assignment_id=pk).fields == PARTIAL
    assert Client().get(f"/annotate/assignments/{pk}/draft/").status_code == 302  # to sign in
    researcher = Client()
    researcher.force_login(owner)  # the study's own researcher does not read it either
    assert researcher.get(f"/annotate/assignments/{pk}/draft/").status_code == 404


def test_no_draft_once_the_lease_expired(owner: User) -> None:
    study = make_study(owner, items=2)
    _user, me = enrolled(study, "me")
    pk = claim(me, study)
    assert put(me, pk, {"fields": PARTIAL}).status_code == 200
    Assignment.objects.filter(pk=pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    response = put(me, pk, {"fields": [["q-mood", "rather_sad"]]})
    assert response.status_code == 409 and "no longer leased" in response.json()["error"]
    assert me.get(f"/annotate/assignments/{pk}/draft/").json() == {"fields": None}  # not shown
    assert assignments_expire(study=study) == 1
    assert not AssignmentDraft.objects.filter(assignment_id=pk).exists()  # and gone with the lease


def test_release_and_skip_drop_the_draft(owner: User) -> None:
    study = make_study(owner, items=3)
    user, me = enrolled(study, "me")
    pk = claim(me, study)
    assert put(me, pk, {"fields": PARTIAL}).status_code == 200
    assignment_release(assignment=Assignment.objects.get(pk=pk), user=user)
    assert not AssignmentDraft.objects.filter(assignment_id=pk).exists()
    pk = claim(me, study)
    assert put(me, pk, {"fields": PARTIAL}).status_code == 200
    assert me.post(f"/annotate/assignments/{pk}/skip/", {"reason": "cannot judge"}).status_code == 302
    assert not AssignmentDraft.objects.filter(assignment_id=pk).exists()


def test_too_large_bad_json_and_bad_answers_are_refused(owner: User) -> None:
    study = make_study(owner, items=1)
    _user, me = enrolled(study, "me")
    pk = claim(me, study)
    big = put(me, pk, {"fields": [["q-mood", "x" * MAX_DRAFT_BYTES]]})
    assert big.status_code == 413 and "larger than 64 KiB" in big.json()["error"]
    bad = put(me, pk, '{"fields": [["q-mood", ', raw=True)
    assert bad.status_code == 400 and "draft" in bad.json()["error"]
    for body, problem in (
        ([1, 2], "must be a JSON object"),
        ({"fields": [["q-mood"]]}, "must be a [name, value] pair"),
        ({"fields": [["csrfmiddlewaretoken", "x"]]}, "is not an answer field"),
    ):
        response = put(me, pk, body)
        assert response.status_code == 400 and problem in response.json()["error"], response.content
    for fields, key, problem in (
        ([["q-mood", "furious"]], "mood", "'furious' is not one of"),
        ([["q-wears", "a_red_hat"], ["q-wears", "none_of_the_above"]], "wears", "excludes every other"),
        ([["q-boxes", "[{"]], "boxes", ""),
        (
            [["q-boxes", json.dumps([{"option": "a_red_hat", "x": 390, "y": 0, "w": 50, "h": 5}])]],
            "boxes",
            "outside",
        ),
        ([["q-nope", "1"]], "nope", "is not a question"),
    ):
        response = put(me, pk, {"fields": fields})
        assert response.status_code == 400, response.content
        assert problem in response.json()["errors"][key]
    assert not AssignmentDraft.objects.exists()
    # a box for an option not (yet) selected, no mood: a draft may be incomplete
    boxes = json.dumps([{"option": "dark_glasses", "x": 1, "y": 1, "w": 5, "h": 5}])
    assert put(me, pk, {"fields": [["q-boxes", boxes], ["shown-wears", "a_red_hat"]]}).status_code == 200


def test_submit_drops_the_draft(owner: User) -> None:
    study = make_study(owner, items=2)
    _user, me = enrolled(study, "me")
    pk = claim(me, study)
    assert put(me, pk, {"fields": PARTIAL}).status_code == 200
    assert me.post(f"/annotate/assignments/{pk}/", ANSWER).status_code == 302
    assert not AssignmentDraft.objects.filter(assignment_id=pk).exists()
    # editing the submitted item keeps no draft on the server (the lease is over)
    assert put(me, pk, {"fields": PARTIAL}).status_code == 409
    assert server_draft(me.get(f"/annotate/assignments/{pk}/").content.decode()) is None
