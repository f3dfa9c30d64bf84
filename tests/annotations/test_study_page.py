"""The researcher's study page (tabs, setup checklist, launch), drafts, the dashboard's % complete and
the enrolment autocomplete, through the pages a researcher and an annotator use."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations.models import Assignment, Invitation, Item, Study, User
from annotations.services.invitations import invitation_create, invitation_revoke
from annotations.services.studies import annotator_for_user, enrollment_add, study_set_running
from common.errors import ValidationFailed
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

TABS = ("overview", "protocol", "items", "people", "invitations", "export", "settings")


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def draft(owner: User, **extra: Any) -> Study:
    return StudyFactory.create(owner=owner, status=Study.Status.DRAFT, **extra)


def invite(study: Study, owner: User, **extra: Any) -> Invitation:
    return invitation_create(
        study=study, created_by=owner, expires_at=timezone.now() + timedelta(days=3), max_uses=5, **extra
    )


def checklist(html: str) -> dict[str, str]:
    """Each setup step's state as the Overview shows it (``done`` / ``not done``)."""
    steps = re.findall(
        r'data-step="(\w+)">.*?<span class="setup-state">([a-z ]+)</span>', html, flags=re.DOTALL
    )
    return dict(steps)


# --- Drafts --------------------------------------------------------------------------------------


def test_the_page_and_the_api_create_drafts(owner) -> None:
    login(owner).post(
        "/studies/new/", {"name": "Paged", "preset": "bias-axes", "overlap": 3, "lease_minutes": 30}
    )
    assert Study.objects.get(name="Paged").status == Study.Status.DRAFT
    response = client_for(owner).post(
        "/api/studies/", {"name": "Posted", "preset": "bias-axes"}, format="json"
    )
    assert response.status_code == 201 and response.json()["status"] == "draft"


def test_launch_is_refused_until_the_study_has_items_and_people(owner, annotator_user) -> None:
    study = draft(owner)
    client = login(owner)
    page = client.post(f"/studies/{study.pk}/launch/", follow=True).content.decode()
    assert "Not launched: the study cannot be launched: it has no items yet" in page
    ItemFactory.create(study=study)
    page = client.post(f"/studies/{study.pk}/launch/", follow=True).content.decode()
    assert "no one can judge its items yet" in page
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT
    # the settings form cannot skip the checks either
    settings = {"name": study.name, "overlap": 3, "lease_minutes": 30, "status": "active"}
    page = client.post(f"/studies/{study.pk}/settings/", settings, follow=True).content.decode()
    assert "Settings not saved: the study cannot be launched" in page
    # a revoked link is no one to judge; an enrolled annotator is
    invitation_revoke(invitation=invite(study, owner))
    assert "no one can judge" in client.post(f"/studies/{study.pk}/launch/", follow=True).content.decode()
    enrollment_add(study=study, user=annotator_user)
    response = client.post(f"/studies/{study.pk}/launch/")
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/#overview"
    study.refresh_from_db()
    assert study.status == Study.Status.ACTIVE
    again = client.post(f"/studies/{study.pk}/launch/", follow=True).content.decode()
    assert "only a draft is launched" in again


def test_the_api_cannot_skip_the_launch_checks(owner, annotator_user) -> None:
    study = draft(owner)
    api = client_for(owner)
    refused = api.patch(f"/api/studies/{study.pk}/", {"status": "active"}, format="json")
    assert refused.status_code == 400 and "it has no items yet" in refused.json()["detail"]
    ItemFactory.create(study=study)
    enrollment_add(study=study, user=annotator_user)
    launched = api.patch(f"/api/studies/{study.pk}/", {"status": "active"}, format="json")
    assert launched.status_code == 200 and launched.json()["status"] == "active"


def test_an_open_invitation_link_is_enough_to_launch(owner) -> None:
    study = draft(owner)
    ItemFactory.create(study=study)
    invite(study, owner)
    login(owner).post(f"/studies/{study.pk}/launch/")
    study.refresh_from_db()
    assert study.status == Study.Status.ACTIVE


def test_only_writers_launch(owner, other_researcher, annotator_user) -> None:
    study = draft(owner)
    ItemFactory.create(study=study)
    enrollment_add(study=study, user=annotator_user)
    assert login(other_researcher).post(f"/studies/{study.pk}/launch/").status_code == 404
    assert login(annotator_user).post(f"/studies/{study.pk}/launch/").status_code == 403
    assert Study.objects.get(pk=study.pk).status == Study.Status.DRAFT


def test_annotators_get_nothing_from_a_draft_and_links_say_not_open_yet(owner, annotator_user) -> None:
    study = draft(owner)
    ItemFactory.create(study=study)
    enrollment_add(study=study, user=annotator_user)
    page = login(annotator_user).get(f"/annotate/studies/{study.pk}/next/")
    assert page.status_code == 409 and "not open yet" in page.content.decode()
    assert not Assignment.objects.exists()
    invitation = invite(study, owner)
    joined = Client().get(f"/join/{invitation.token}/")
    html = joined.content.decode()
    assert joined.status_code == 410 and "This study is not open yet" in html and "not launched it" in html
    with pytest.raises(ValidationFailed):  # resume is not a way round the launch
        study_set_running(study=study, running=True)
    login(owner).post(f"/studies/{study.pk}/launch/")
    assert login(annotator_user).get(f"/annotate/studies/{study.pk}/next/").status_code == 302


def test_pause_and_resume_still_work_after_launch(owner, annotator_user) -> None:
    study = StudyFactory.create(owner=owner)
    client = login(owner)
    client.post(f"/studies/{study.pk}/run/", {"action": "pause"})
    assert Study.objects.get(pk=study.pk).status == Study.Status.PAUSED
    client.post(f"/studies/{study.pk}/run/", {"action": "resume"})
    assert Study.objects.get(pk=study.pk).status == Study.Status.ACTIVE


# --- The study page --------------------------------------------------------------------------------


def test_the_page_has_tabs_and_a_checklist_read_from_the_data(owner, annotator_user) -> None:
    study = draft(owner)
    client = login(owner)
    html = client.get(f"/studies/{study.pk}/").content.decode()
    for tab in TABS:
        assert f'href="#{tab}"' in html and f'id="{tab}"' in html
    assert checklist(html) == {
        "protocol": "done",
        "items": "not done",
        "people": "not done",
        "invitations": "not done",
        "launch": "not done",
    }
    assert "Not ready: it has no items yet" in html
    ItemFactory.create(study=study)
    enrollment_add(study=study, user=annotator_user)
    html = client.get(f"/studies/{study.pk}/").content.decode()
    assert checklist(html)["items"] == "done" and checklist(html)["people"] == "done"
    assert "Not ready" not in html and 'id="launch-button"' in html
    invite(study, owner, label="Pilot <b>")
    client.post(f"/studies/{study.pk}/launch/")
    html = client.get(f"/studies/{study.pk}/").content.decode()
    assert checklist(html)["invitations"] == "done" and checklist(html)["launch"] == "done"
    assert "Pilot &lt;b&gt;" in html and 'value="pause"' in html and 'id="launch-button"' not in html


def test_forms_send_the_researcher_back_to_their_tab(owner, annotator_user) -> None:
    study = StudyFactory.create(owner=owner)
    enrollment_add(study=study, user=annotator_user)
    other = StudyFactory.create(owner=owner)
    client = login(owner)
    response = client.post(f"/studies/{other.pk}/enroll/", {"username": "ann", "pool": "crowd"})
    assert response["Location"] == f"/studies/{other.pk}/#people"
    settings = {"name": "Renamed", "overlap": 2, "lease_minutes": 30, "status": "active"}
    assert (
        client.post(f"/studies/{other.pk}/settings/", settings)["Location"]
        == f"/studies/{other.pk}/#settings"
    )
    empty = client.post(f"/studies/{other.pk}/enroll/", {"username": "", "pool": "crowd"}, follow=True)
    assert "No one was enrolled." in empty.content.decode()


# --- The dashboard's % complete ----------------------------------------------------------------------


def _submitted(study: Study, item: Item, user: User) -> None:
    Assignment.objects.create(
        study=study, item=item, annotator=annotator_for_user(user=user), status=Assignment.Status.SUBMITTED
    )


def _completion_cell(html: str, study: Study) -> str:
    match = re.search(rf'class="completion" data-study="{study.pk}">(.*?)</td>', html, flags=re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_dashboard_shows_percent_complete_per_study(owner) -> None:
    half = StudyFactory.create(owner=owner, name="Half", overlap=2)
    items = [ItemFactory.create(study=half) for _ in range(2)]
    people = [UserFactory.create(username=f"p{n}", role="annotator") for n in range(3)]
    _submitted(half, items[0], people[0])
    _submitted(half, items[0], people[1])
    _submitted(half, items[0], people[2])  # beyond the overlap: counts once up to 2
    _submitted(half, items[1], people[0])
    empty = StudyFactory.create(owner=owner, name="Empty")
    html = login(owner).get("/").content.decode()
    cell = _completion_cell(html, half)
    assert 'value="75.0"' in cell and "75.0%" in cell and "3 of 4 judgements" in cell
    assert "0.0%" in _completion_cell(html, empty) and "0 of 0 judgements" in _completion_cell(html, empty)


def test_the_dashboard_reads_completion_in_one_query_for_every_study(owner) -> None:
    def queries() -> int:
        client = login(owner)
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/").status_code == 200
        return len(captured)

    StudyFactory.create(owner=owner)
    one = queries()
    for _ in range(4):
        study = StudyFactory.create(owner=owner)
        ItemFactory.create(study=study)
    assert queries() == one


def test_annotators_see_no_completion_column(owner, annotator_user) -> None:
    study = StudyFactory.create(owner=owner)
    enrollment_add(study=study, user=annotator_user)
    assert 'class="completion"' not in login(annotator_user).get("/").content.decode()


# --- Enrolment autocomplete --------------------------------------------------------------------------


def test_the_account_suggestions_are_for_researchers_only_and_limited(owner, other_researcher) -> None:
    mine = StudyFactory.create(owner=owner)
    target = StudyFactory.create(owner=owner)
    for n in range(25):
        enrollment_add(study=mine, user=UserFactory.create(username=f"rater{n:02d}", role="annotator"))
    theirs = StudyFactory.create(owner=other_researcher)
    enrollment_add(study=theirs, user=UserFactory.create(username="rater_theirs", role="annotator"))
    UserFactory.create(username="rater_researcher", role="researcher")
    url = f"/studies/{target.pk}/enroll/accounts.json"
    response = login(owner).get(url, {"q": "RATER"})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    results = response.json()["results"]
    assert len(results) == 20
    assert all(set(row) == {"username", "name"} for row in results)
    names = [row["username"] for row in results]
    assert names == sorted(names) and "rater_theirs" not in names and "rater_researcher" not in names
    assert login(owner).get(url, {"q": "rater_t"}).json()["results"] == []
    assert login(owner).get(url, {"q": ""}).json()["results"] == []
    annotator = UserFactory.create(username="nosy", role="annotator")
    enrollment_add(study=target, user=annotator)
    assert login(annotator).get(url, {"q": "rater"}).status_code == 403
    assert login(other_researcher).get(url, {"q": "rater"}).status_code == 404
    assert Client().get(url, {"q": "rater"}).status_code == 302  # to the sign-in page


def test_suggestions_match_names_and_leave_out_those_already_enrolled(owner) -> None:
    mine = StudyFactory.create(owner=owner)
    target = StudyFactory.create(owner=owner)
    ada = UserFactory.create(username="u1", role="annotator", first_name="Ada", last_name="Lovelace")
    bob = UserFactory.create(username="u2", role="annotator", first_name="Bob", last_name="Lo")
    for user in (ada, bob):
        enrollment_add(study=mine, user=user)
    url = f"/studies/{target.pk}/enroll/accounts.json"
    assert login(owner).get(url, {"q": "lo"}).json()["results"] == [
        {"username": "u1", "name": "Ada Lovelace"},
        {"username": "u2", "name": "Bob Lo"},
    ]
    enrollment_add(study=target, user=ada)
    assert [row["username"] for row in login(owner).get(url, {"q": "lo"}).json()["results"]] == ["u2"]


def test_the_people_tab_offers_the_suggestions_and_the_server_still_checks(owner, other_researcher) -> None:
    study = StudyFactory.create(owner=owner)
    client = login(owner)
    html = client.get(f"/studies/{study.pk}/").content.decode()
    assert (
        'list="enroll-suggestions"' in html
        and f'data-candidates-url="/studies/{study.pk}/enroll/accounts.json"' in html
    )
    stranger = StudyFactory.create(owner=other_researcher)
    enrollment_add(study=stranger, user=UserFactory.create(username="theirs", role="annotator"))
    page = client.post(f"/studies/{study.pk}/enroll/", {"username": "theirs", "pool": "crowd"}, follow=True)
    assert "no account named &#x27;theirs&#x27; that you may enrol" in page.content.decode()
    assert not study.enrollments.exists()
