"""The annotator's flow through the Django test client: Previous / Next over one's own items only,
"Your answers" (thumbnails, readable answers, pages), undoing a skip, the dashboard's counts and
buttons, and the task page's query budget. The drafts and keys are in tests/browser/test_flow_browser.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotations.models import Annotation, Assignment, Item, Study, User
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.studies import annotator_for_user, enrollment_add, study_create
from protocols.schema import load_protocol_text
from tests.annotations.builders import image_item
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Flow
unit: image
description: Say what the person wears, and box it.
instructions: |
  Look at the whole image first.
  Then answer.
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
    "q-wears": ["a_red_hat", "dark_glasses"],
    "shown-wears": "a_red_hat,dark_glasses,none_of_the_above",
    "q-boxes": json.dumps(
        [
            {"option": "a_red_hat", "x": 10, "y": 10, "w": 50, "h": 50},
            {"option": "a_red_hat", "x": 100, "y": 10, "w": 50, "h": 50},
            {"option": "dark_glasses", "x": 300, "y": 10, "w": 50, "h": 50},
        ]
    ),
    "q-mood": "very_happy",
    "time_spent_ms": "3000",
}


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_study(owner: User, *, items: int, overlap: int = 1) -> Study:
    study = study_create(
        owner=owner, name="Flow study", protocol=load_protocol_text(PROTOCOL), overlap=overlap
    )
    for index in range(items):
        image_item(study, f"flow-{index}", size=(400, 300))
    return study


def enrolled(study: Study, username: str) -> tuple[User, Client]:
    user = UserFactory.create(username=username, role="annotator")
    enrollment_add(study=study, user=user)
    return user, login(user)


def task_id(location: str) -> int:
    match = re.fullmatch(r"/annotate/assignments/(\d+)/(\?.*)?", location)
    assert match, location
    return int(match.group(1))


def claim(client: Client, study: Study) -> int:
    response = client.get(f"/annotate/studies/{study.pk}/next/")
    assert response.status_code == 302
    return task_id(response["Location"])


def links(page: str) -> dict[str, str]:
    found = {}
    for name in ("flow-previous", "flow-next"):
        match = re.search(rf'id="{name}" rel="\w+" href="([^"]+)"', page)
        if match:
            found[name] = match.group(1)
    return found


def counts(page: str) -> tuple[int, int, int]:
    match = re.search(r"(\d+) done, (\d+) skipped, (\d+) left", page)
    assert match, "no counts on the page"
    done, skipped, left = match.groups()
    return int(done), int(skipped), int(left)


def test_previous_and_next_walk_ones_own_items_only(owner: User) -> None:
    study = make_study(owner, items=6, overlap=2)
    _ann, me = enrolled(study, "me")
    _other, other = enrolled(study, "other")
    mine: list[int] = []
    theirs: list[int] = []
    for _round in range(2):  # two people take turns: their assignments interleave with mine
        pk = claim(me, study)
        mine.append(pk)
        response = me.post(f"/annotate/assignments/{pk}/", ANSWER)
        assert response.status_code == 302
        pk = claim(other, study)
        theirs.append(pk)
        assert other.post(f"/annotate/assignments/{pk}/", ANSWER).status_code == 302
    current = claim(me, study)
    page = me.get(f"/annotate/assignments/{current}/").content.decode()
    assert links(page) == {"flow-previous": f"/annotate/assignments/{mine[1]}/"}
    # once shown, the page leases one ahead (flow.js), which is then Next
    ahead_task = me.post(f"/annotate/assignments/{current}/ahead/").json()["task"]
    ahead = Assignment.objects.get(annotator__user__username="me", status="leased", pk__gt=current)
    assert ahead_task == f"/annotate/assignments/{ahead.pk}/"
    page = me.get(f"/annotate/assignments/{current}/").content.decode()
    assert links(page)["flow-next"] == ahead_task
    # the first item: no Previous; Next is my second, never the other annotator's in between
    page = me.get(f"/annotate/assignments/{mine[0]}/").content.decode()
    assert "Changing your answers" in page
    assert links(page) == {"flow-next": f"/annotate/assignments/{mine[1]}/"}
    page = me.get(f"/annotate/assignments/{mine[1]}/").content.decode()
    assert links(page) == {
        "flow-previous": f"/annotate/assignments/{mine[0]}/",
        "flow-next": f"/annotate/assignments/{current}/",
    }
    # from the newest, Next is the held item; the page always lists only my ids
    for pk in mine + [current, ahead.pk]:
        page = me.get(f"/annotate/assignments/{pk}/").content.decode()
        assert not set(links(page).values()) & {f"/annotate/assignments/{pk}/" for pk in theirs}
    # the server refuses another annotator's assignment whichever way it is asked for
    for pk in theirs:
        assert me.get(f"/annotate/assignments/{pk}/").status_code == 404
        assert me.post(f"/annotate/assignments/{pk}/", ANSWER).status_code == 404
        assert me.post(f"/annotate/assignments/{pk}/unskip/").status_code == 404
        assert me.post(f"/annotate/assignments/{pk}/ahead/").status_code == 404
        assert me.post(f"/annotate/assignments/{pk}/skip/", {"reason": "x"}).status_code == 404
    assert Assignment.objects.filter(pk__in=theirs, status="submitted").count() == 2


def test_submit_goes_straight_to_the_next_item_and_from_the_newest_submitted_next_claims(owner: User) -> None:
    study = make_study(owner, items=3)
    _ann, me = enrolled(study, "me")
    first = claim(me, study)
    response = me.post(f"/annotate/assignments/{first}/", ANSWER)
    second = task_id(response["Location"])  # no stop at /next/
    assert second != first and Assignment.objects.get(pk=second).status == "leased"
    page = me.get(f"/annotate/assignments/{first}/").content.decode()
    assert links(page)["flow-next"] == f"/annotate/assignments/{second}/"
    me.post(f"/annotate/assignments/{second}/", ANSWER)
    third = Assignment.objects.get(annotator__user__username="me", status="leased").pk
    me.post(f"/annotate/assignments/{third}/", ANSWER)
    # nothing left: the submit lands on the claim page, which says so
    page = me.get(f"/annotate/assignments/{third}/").content.decode()
    assert links(page) == {
        "flow-previous": f"/annotate/assignments/{second}/",
        "flow-next": f"/annotate/studies/{study.pk}/next/",
    }
    assert "nothing left for you" in me.get(f"/annotate/studies/{study.pk}/next/").content.decode()


def test_your_answers_shows_thumbnails_labels_box_counts_and_pages(owner: User) -> None:
    study = make_study(owner, items=28)
    Item.objects.create(study=study, external_id="words", kind="text", text="<b>nurse</b> term")
    user, me = enrolled(study, "me")
    annotator = annotator_for_user(user=user)
    answers = {
        "wears": {"value": ["a_red_hat", "dark_glasses"], "shown": ["a_red_hat", "dark_glasses"]},
        "boxes": {"value": json.loads(ANSWER["q-boxes"])},
        "mood": {"value": "very_happy"},
    }
    for _index in range(29):  # every item, the text one included
        assignment = assignment_claim_next(study=study, annotator=annotator)
        assert assignment is not None
        if assignment.item.kind == "text":
            assignment_submit(
                assignment=assignment, answers={"wears": answers["wears"], "mood": answers["mood"]}
            )
        else:
            assignment_submit(assignment=assignment, answers=answers)
    newest = Assignment.objects.filter(annotator=annotator, status="submitted").latest("completed_at", "id")
    page = me.get(f"/annotate/studies/{study.pk}/mine/").content.decode()
    assert "Page 1 of 2" in page
    # readable answers: labels, not keys; box counts per label
    assert "A red hat, Dark glasses" in page and "Very happy" in page
    assert "3 boxes: A red hat ×2, Dark glasses ×1" in page
    assert "a_red_hat" not in page.split("<table")[1]
    # thumbnails of images, newest first
    first_row = page.split("<tbody>")[1].split("</tr>")[0]
    assert f'id="assignment-{newest.pk}"' in first_row
    if newest.item.kind == "image":
        assert f"/items/{newest.item_id}/images/0/display/" in first_row and "<img" in first_row
    second = me.get(f"/annotate/studies/{study.pk}/mine/?page=2").content.decode()
    assert "Page 2 of 2" in second and second.count('id="assignment-') == 29 - 25
    everything = page + second
    # a text item shows its text, escaped
    assert "&lt;b&gt;nurse&lt;/b&gt; term" in everything and "<b>nurse</b>" not in everything
    assert me.get(f"/annotate/studies/{study.pk}/mine/?page=zzz").status_code == 200


def test_skip_then_undo_from_the_next_page_keeps_the_counts(owner: User) -> None:
    study = make_study(owner, items=4)
    _ann, me = enrolled(study, "me")
    first = claim(me, study)
    page = me.get(f"/annotate/assignments/{first}/").content.decode()
    assert counts(page) == (0, 0, 4)
    response = me.post(f"/annotate/assignments/{first}/skip/", {"reason": "cannot judge"}, follow=True)
    page = response.content.decode()
    assert response.redirect_chain[-1][0].endswith(f"?skipped={first}")
    assert f'action="/annotate/assignments/{first}/unskip/"' in page and "Skipped." in page
    assert counts(page) == (0, 1, 3)  # the denominator does not drop: done + skipped + left stays 4
    dashboard = me.get("/annotate/").content.decode()
    assert counts(dashboard) == (0, 1, 3)
    response = me.post(f"/annotate/assignments/{first}/unskip/", follow=True)
    assert response.redirect_chain[-1][0] == f"/annotate/assignments/{first}/"
    page = response.content.decode()
    assert "Skip undone" in page and counts(page) == (0, 0, 4)
    assignment = Assignment.objects.get(pk=first)
    assert assignment.status == "leased" and assignment.skip_reason == "" and assignment.lease_expires_at
    # and it can be answered
    assert me.post(f"/annotate/assignments/{first}/", ANSWER).status_code == 302
    assert counts(me.get("/annotate/").content.decode()) == (1, 0, 3)
    # an undo offer for an assignment that is not skipped (or not mine) is not shown
    page = me.get(f"/annotate/studies/{study.pk}/next/?skipped={first}", follow=True).content.decode()
    assert "/unskip/" not in page


def test_undo_refused_when_others_filled_the_item_or_hold_it(owner: User) -> None:
    study = make_study(owner, items=2, overlap=1)
    _me_user, me = enrolled(study, "me")
    other_user, other = enrolled(study, "other")
    mine = claim(me, study)
    item_id = Assignment.objects.get(pk=mine).item_id
    me.post(f"/annotate/assignments/{mine}/skip/", {"reason": "unsure"})
    # the other annotator gets the freed item: first a live lease ...
    other_annotator = annotator_for_user(user=other_user)
    theirs = None
    for _attempt in range(2):
        leased = assignment_claim_next(study=study, annotator=other_annotator)
        assert leased is not None
        if leased.item_id == item_id:
            theirs = leased
            break
        assignment_submit(
            assignment=leased,
            answers={"wears": {"value": ["none_of_the_above"]}, "mood": {"value": "rather_sad"}},
        )
    assert theirs is not None
    response = me.post(f"/annotate/assignments/{mine}/unskip/", follow=True)
    page = response.content.decode()
    assert response.redirect_chain[-1][0] == f"/annotate/studies/{study.pk}/mine/"
    assert "The skip cannot be undone: others have judged this item" in page
    assert Assignment.objects.get(pk=mine).status == "skipped"
    # ... then a submitted answer: still refused; "Your answers" lists the skip with its undo button
    assert other.post(f"/annotate/assignments/{theirs.pk}/", ANSWER).status_code == 302
    page = me.get(f"/annotate/studies/{study.pk}/mine/").content.decode()
    assert "Undo skip" in page and f'action="/annotate/assignments/{mine}/unskip/"' in page
    me.post(f"/annotate/assignments/{mine}/unskip/")
    assert Assignment.objects.get(pk=mine).status == "skipped"
    # a paused study hands nothing out, undo included
    study.status = Study.Status.PAUSED
    study.save()
    assert (
        "no items are handed out now"
        in me.post(f"/annotate/assignments/{mine}/unskip/", follow=True).content.decode()
    )
    # an undo of what is not skipped is refused clearly
    study.status = Study.Status.ACTIVE
    study.save()
    assert (
        "there is no skip to undo"
        in other.post(f"/annotate/assignments/{theirs.pk}/unskip/", follow=True).content.decode()
    )


def test_dashboard_continue_start_and_no_researcher_words(owner: User) -> None:
    study = make_study(owner, items=3)
    _ann, me = enrolled(study, "me")
    page = me.get("/annotate/").content.decode()
    assert re.search(rf'href="/annotate/studies/{study.pk}/next/">Start<', page)
    assert "Say what the person wears, and box it." in page  # what to do
    assert counts(page) == (0, 0, 3)
    held = claim(me, study)
    page = me.get("/annotate/").content.decode()
    assert re.search(rf'href="/annotate/assignments/{held}/"[^>]*>Continue<', page)
    assert "resumes the item you hold" in page
    me.post(f"/annotate/assignments/{held}/", ANSWER)  # claims the next: held again
    Assignment.objects.filter(status="leased").update(status="expired")
    page = me.get("/annotate/").content.decode()
    assert re.search(rf'href="/annotate/studies/{study.pk}/next/">Continue<', page)
    assert counts(page) == (1, 0, 2)
    assert "Time spent: 3 s" in page and "about 6 s left at your pace" in page
    # annotators' pages carry no researcher words; the home page is their dashboard
    assert me.get("/")["Location"] == "/annotate/"
    for url in ("/annotate/", f"/annotate/studies/{study.pk}/mine/", f"/annotate/assignments/{held}/"):
        text = re.sub(r"<[^>]+>", " ", me.get(url).content.decode())
        for word in ("Overlap", "overlap", "Protocol", "protocol", owner.username):
            assert word not in text, (url, word)


def test_left_follows_others_fills_at_once_and_new_items_at_once(owner: User) -> None:
    # issue 17: left is a cached count of the items a claim could hand out less the items blocked for
    # the person (read from assignments); others' fills count at the next request, a new item at once
    study = make_study(owner, items=4, overlap=2)
    image_item(study, "expert-only")
    Item.objects.filter(external_id="expert-only").update(expert_only=True)
    _me, me = enrolled(study, "me")
    assert counts(me.get("/annotate/").content.decode()) == (0, 0, 4)  # the expert-only item is not theirs
    claim(me, study)
    assert counts(me.get("/annotate/").content.decode()) == (0, 0, 4)
    others = [enrolled(study, name)[1] for name in ("other1", "other2")]
    for client, turns in zip(others, (4, 3), strict=True):
        for _turn in range(turns):  # other1 gets all 4 real items, other2 the 3 that I do not hold
            assert client.post(f"/annotate/assignments/{claim(client, study)}/", ANSWER).status_code == 302
    assert Item.objects.filter(study=study, judgements=2).count() == 3
    assert counts(me.get("/annotate/").content.decode()) == (0, 0, 1)  # only the one I hold
    image_item(study, "added")
    assert counts(me.get("/annotate/").content.decode()) == (0, 0, 2)


def test_task_page_query_budget_does_not_grow_with_work_done(owner: User) -> None:
    study = make_study(owner, items=14)
    _ann, me = enrolled(study, "me")

    def measured(pk: int) -> int:
        with CaptureQueriesContext(connection) as context:
            assert me.get(f"/annotate/assignments/{pk}/").status_code == 200
        return len(context.captured_queries)

    pk = claim(me, study)
    early = measured(pk)
    for _index in range(8):
        response = me.post(f"/annotate/assignments/{pk}/", ANSWER)
        pk = task_id(response["Location"])
    late = measured(pk)
    # session, user, assignment, item, images, stored answers, the expert pool, progress (2), Previous/Next
    # (1): the lease ahead is no part of it (the page asks for it once shown: ``ahead``)
    assert early <= 11 and late <= 11, (early, late)
    assert late <= early
    assert Annotation.objects.filter(annotator__user__username="me").count() == 8 * 3


def test_annotator_cannot_reach_the_pages_of_a_study_they_are_not_in(owner: User) -> None:
    study = make_study(owner, items=1)
    stranger: Any = UserFactory.create(username="stranger", role="annotator")
    client = login(stranger)
    assert client.get(f"/annotate/studies/{study.pk}/mine/").status_code == 404
    assert client.get(f"/annotate/studies/{study.pk}/next/").status_code == 404
