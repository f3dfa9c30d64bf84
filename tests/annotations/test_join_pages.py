"""Joining through an invitation link, the completion page and the researcher's invitation pages and API."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import Assignment, Invitation, Participant, Study, User
from annotations.services.annotation_writes import AnswerToSave, annotations_save
from annotations.services.controls import control_mark
from annotations.services.invitations import invitation_create
from annotations.services.studies import enrollment_add
from protocols.answers import CleanAnswer
from tests.factories import ItemFactory, UserFactory
from tests.helpers import client_for, streamed

pytestmark = pytest.mark.django_db

PID = "5f1a2b3c4d5e6f7a8b9c0d1e"
PROLIFIC = f"?PROLIFIC_PID={PID}&STUDY_ID=60aa11&SESSION_ID=sess42"
CONSENT = "Your answers will be published.\n<b>Not bold</b>"
DEMOGRAPHICS = [
    {
        "key": "region",
        "label": "Where do you live?",
        "kind": "choice",
        "choices": ["Asia", "EMEA", "North America"],
    },
    {"key": "language", "label": "First language", "kind": "text", "required": False},
]
ANSWERS = {
    "q-gender": "female",
    "q-attributes": ["hat"],
    "shown-attributes": "hat,glasses,beard,none_of_the_above",
    "q-boxes": "[]",
    "time_spent_ms": "4200",
}


def invite(study: Study, owner: User, **overrides: Any) -> Invitation:
    values: dict[str, Any] = {
        "expires_at": timezone.now() + timedelta(days=7),
        "max_uses": 5,
        "platform": "prolific",
        "completion_code": "C0DE42",
        "consent_text": CONSENT,
        "demographics": DEMOGRAPHICS,
        "items_per_participant": 2,
    }
    values.update(overrides)
    return invitation_create(study=study, created_by=owner, **values)


@pytest.fixture
def crowd(study, owner):
    study.overlap = 1
    study.save()
    for n in range(4):
        ItemFactory.create(study=study, external_id=f"i{n}")
    return study, invite(study, owner)


def join(client: Client, invitation: Invitation, query: str = PROLIFIC) -> Any:
    """Consent and the demographic form, as a browser would post them; returns the last response."""
    response = client.get(f"/join/{invitation.token}/{query}")
    assert response.status_code == 302 and response["Location"].endswith("/consent/")
    page = client.get(response["Location"])
    assert page.status_code == 200
    response = client.post(response["Location"], {"consent": "agree"})
    assert response.status_code == 302 and response["Location"].endswith("/begin/")
    return client.post(response["Location"], {"d-region": "EMEA", "d-language": "Greek"})


def test_full_flow_consent_form_quota_completion(crowd) -> None:
    study, invitation = crowd
    client = Client()
    page = client.get(f"/join/{invitation.token}/{PROLIFIC}", follow=True)
    html = page.content.decode()
    assert "Your answers will be published." in html and "&lt;b&gt;Not bold&lt;/b&gt;" in html  # escaped
    # the demographic form is checked on the server: a missing answer comes back, nothing is created
    response = client.post(f"/join/{invitation.token}/consent/", {"consent": "agree"})
    response = client.post(f"/join/{invitation.token}/begin/", {"d-region": "Mars"})
    assert response.status_code == 400 and "Choose one of the options." in response.content.decode()
    assert not Participant.objects.exists()
    response = client.post(f"/join/{invitation.token}/begin/", {"d-region": "EMEA", "d-language": "Greek"})
    assert response.status_code == 302 and response["Location"] == f"/annotate/studies/{study.pk}/next/"
    participant = Participant.objects.get()
    assert (participant.participant_id, participant.platform_study_id, participant.session_id) == (
        PID,
        "60aa11",
        "sess42",
    )
    assert participant.consented_at is not None
    assert participant.user.enrollments.get(study=study).attributes == {"region": "EMEA", "language": "Greek"}
    # the completion page is not reachable before the work is done
    assert (
        client.get(f"/annotate/studies/{study.pk}/complete/")["Location"]
        == f"/annotate/studies/{study.pk}/next/"
    )
    for _ in range(2):
        task = client.get(f"/annotate/studies/{study.pk}/next/")
        assert task.status_code == 302 and "/annotate/assignments/" in task["Location"]
        page = client.get(task["Location"])
        assert page.status_code == 200
        assert client.post(task["Location"], ANSWERS).status_code == 302
    response = client.get(f"/annotate/studies/{study.pk}/next/")
    assert response["Location"] == f"/annotate/studies/{study.pk}/complete/"
    done = client.get(response["Location"])
    html = done.content.decode()
    assert done.status_code == 200 and "C0DE42" in html
    assert 'href="https://app.prolific.com/submissions/complete?cc=C0DE42"' in html
    participant.refresh_from_db()
    assert participant.completed_at is not None
    assert participant.user.annotator.assignments.filter(status="submitted").count() == 2


def _payment_record(owner: User, study: Study) -> dict[str, str]:
    researcher = Client()
    researcher.force_login(owner)
    response = researcher.get(f"/studies/{study.pk}/payments.csv")
    lines = b"".join(streamed(response)).decode().splitlines()
    rows = list(csv.DictReader(lines))
    assert len(rows) == 1
    return rows[0]


def test_a_participant_who_skips_every_item_gets_no_completion_code(study, owner) -> None:
    study.overlap = 1
    study.save()
    for n in range(3):
        ItemFactory.create(study=study, external_id=f"i{n}")
    invitation = invite(study, owner, consent_text="", demographics=[], items_per_participant=None)
    client = Client()
    assert client.get(f"/join/{invitation.token}/{PROLIFIC}")["Location"].endswith("/begin/")
    client.post(f"/join/{invitation.token}/begin/")
    for _ in range(3):
        task = client.get(f"/annotate/studies/{study.pk}/next/")["Location"]
        assert client.post(task + "skip/", {"reason": "rather not"}).status_code == 302
    finished = client.get(f"/annotate/studies/{study.pk}/next/")
    page = finished.content.decode()
    assert finished.status_code == 200 and "C0DE42" not in page and "prolific.com" not in page
    assert "You have answered <strong>0</strong> of the 1 item" in page and "<strong>1</strong> left" in page
    assert "you skipped 3" in page
    assert client.get(f"/annotate/studies/{study.pk}/complete/")["Location"].endswith("/next/")
    assert Participant.objects.get().completed_at is None
    record = _payment_record(owner, study)
    assert (record["items_skipped"], record["items_answered"], record["items_required"]) == ("3", "0", "1")
    assert record["completed"] == "False" and record["completed_at"] == ""
    api = client_for(owner).get(f"/api/studies/{study.pk}/payments/").json()[0]
    assert (api["items_answered"], api["items_required"], api["completed"]) == (0, 1, False)
    researcher = Client()
    researcher.force_login(owner)
    progress = researcher.get(f"/studies/{study.pk}/progress/").content.decode()
    assert (
        '<span class="payment-answered">0 answered, 1 needed</span> <small class="muted">no code</small>'
        in progress
    )


def test_the_study_sets_how_many_answers_the_code_needs_and_failed_checks_do_not_count(study, owner) -> None:
    study.overlap = 1
    study.save()
    items = [ItemFactory.create(study=study, external_id=f"i{n}") for n in range(3)]
    invitation = invite(
        study, owner, consent_text="", demographics=[], items_per_participant=None, min_answered_items=3
    )
    client = Client()
    client.get(f"/join/{invitation.token}/{PROLIFIC}")
    client.post(f"/join/{invitation.token}/begin/")
    annotator = Participant.objects.get().user.annotator
    # an attention check the participant was shown and failed (answered "female"; "male" was expected)
    check = items.pop()
    control_mark(study=study, item=check, kind="attention", answers={"gender": "male"})
    Assignment.objects.create(
        study=study, item=check, annotator=annotator, status="submitted", completed_at=timezone.now()
    )
    annotations_save(
        study_id=study.pk,
        answers=[AnswerToSave(check.pk, annotator, CleanAnswer("gender", "female"))],
        source="ui",
    )
    for _ in items:
        task = client.get(f"/annotate/studies/{study.pk}/next/")["Location"]
        assert client.post(task, ANSWERS).status_code == 302
    page = client.get(f"/annotate/studies/{study.pk}/next/").content.decode()
    assert (
        "You have answered <strong>2</strong> of the 3 items" in page
        and "failed attention checks (1)" in page
    )
    assert "C0DE42" not in page
    record = _payment_record(owner, study)
    assert (record["items_completed"], record["items_answered"], record["items_required"]) == ("3", "2", "3")
    # the researcher lowers nothing, but a study needing 2 lets the same work through
    Invitation.objects.filter(pk=invitation.pk).update(min_answered_items=2)
    done = client.get(f"/annotate/studies/{study.pk}/next/")
    assert done["Location"] == f"/annotate/studies/{study.pk}/complete/"
    assert "C0DE42" in client.get(done["Location"]).content.decode()
    assert _payment_record(owner, study)["completed"] == "True"


def test_the_items_needed_for_the_code_are_set_on_the_invitation(study, owner) -> None:
    api = client_for(owner)
    url = f"/api/studies/{study.pk}/invitations/"
    made = api.post(url, {"max_uses": 3, "items_per_participant": 10, "min_answered_items": 8}, format="json")
    assert made.status_code == 201 and made.json()["min_answered_items"] == 8
    too_many = api.post(
        url, {"max_uses": 3, "items_per_participant": 10, "min_answered_items": 11}, format="json"
    )
    assert too_many.status_code == 400 and "between 1 and the quota" in too_many.json()["detail"]
    page = Client()
    page.force_login(owner)
    form = {"platform": "none", "pool": "crowd", "valid_days": 7, "max_uses": 5, "min_answered_items": 4}
    assert page.post(f"/studies/{study.pk}/invitations/", form).status_code == 302
    assert Invitation.objects.get(max_uses=5).min_answered_items == 4
    assert "4 answered for the code" in page.get(f"/studies/{study.pk}/invitations/").content.decode()


def test_the_task_page_counts_to_the_quota(crowd) -> None:
    study, invitation = crowd
    client = Client()
    join(client, invitation)
    task = client.get(f"/annotate/studies/{study.pk}/next/")
    page = client.get(task["Location"]).content.decode()
    assert '<span id="progress-count">0 done, 0 skipped, 2 left</span>' in page


def test_same_pid_resumes_in_a_new_browser_without_a_second_use(crowd) -> None:
    study, invitation = crowd
    first = Client()
    join(first, invitation)
    second = Client()
    response = second.get(f"/join/{invitation.token}/{PROLIFIC}")
    assert response.status_code == 302 and response["Location"] == f"/annotate/studies/{study.pk}/next/"
    assert int(second.session["_auth_user_id"]) == Participant.objects.get().user_id
    invitation.refresh_from_db()
    assert invitation.uses == 1 and Participant.objects.count() == 1
    # the same browser opening the link again also lands in the study
    assert (
        first.get(f"/join/{invitation.token}/{PROLIFIC}")["Location"] == f"/annotate/studies/{study.pk}/next/"
    )
    # another participant id in the same browser is told to sign out first
    other = f"?PROLIFIC_PID={'a' * 24}&STUDY_ID=60aa11&SESSION_ID=s2"
    assert first.get(f"/join/{invitation.token}/{other}").status_code == 409


@pytest.mark.parametrize(
    ("change", "status", "needle"),
    [
        ({"expires_at": timezone.now() - timedelta(seconds=1)}, 410, "This link has expired"),
        ({"uses": 5}, 410, "This link has been used up"),
        ({"revoked_at": timezone.now()}, 410, "This link has been withdrawn"),
        ({"study_status": "closed"}, 410, "not taking new participants"),
    ],
)
def test_refused_links_show_a_clear_page_and_create_nothing(crowd, change, status, needle) -> None:
    study, invitation = crowd
    if "study_status" in change:
        Study.objects.filter(pk=study.pk).update(status=change.pop("study_status"))
    if change:
        Invitation.objects.filter(pk=invitation.pk).update(**change)
    response = Client().get(f"/join/{invitation.token}/{PROLIFIC}")
    assert response.status_code == status and needle in response.content.decode()
    assert not Participant.objects.exists()


def test_a_link_used_up_while_someone_fills_the_form_is_refused_at_the_end(crowd) -> None:
    _study, invitation = crowd
    client = Client()
    client.get(f"/join/{invitation.token}/{PROLIFIC}")
    client.post(f"/join/{invitation.token}/consent/", {"consent": "agree"})
    Invitation.objects.filter(pk=invitation.pk).update(uses=5)
    response = client.post(f"/join/{invitation.token}/begin/", {"d-region": "EMEA"})
    assert response.status_code == 410 and not Participant.objects.exists()


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("", "PROLIFIC_PID parameter is missing"),
        ("?PROLIFIC_PID=%7B%7B%25PROLIFIC_PID%25%7D%7D", "not a valid id"),
        ("?PROLIFIC_PID=%3Cscript%3Ealert(1)%3C/script%3E", "not a valid id"),
    ],
)
def test_missing_or_bad_platform_ids_are_refused(crowd, query, needle) -> None:
    _study, invitation = crowd
    response = Client().get(f"/join/{invitation.token}/{query}")
    html = response.content.decode()
    assert response.status_code == 400 and needle in html and "<script>" not in html


def test_unknown_token_and_skipped_steps(crowd) -> None:
    _study, invitation = crowd
    response = Client().get("/join/not-a-real-token/")
    assert response.status_code == 404 and "This link is not valid" in response.content.decode()
    # a step opened without passing through the link goes back to the link
    assert Client().get(f"/join/{invitation.token}/begin/")["Location"] == f"/join/{invitation.token}/"
    client = Client()
    client.get(f"/join/{invitation.token}/{PROLIFIC}")
    # no consent yet: the form sends back to the consent page
    assert client.post(f"/join/{invitation.token}/begin/", {"d-region": "EMEA"})["Location"].endswith(
        "/consent/"
    )
    assert not Participant.objects.exists()


def test_declining_consent_creates_nothing(crowd) -> None:
    _study, invitation = crowd
    client = Client()
    client.get(f"/join/{invitation.token}/{PROLIFIC}")
    response = client.post(f"/join/{invitation.token}/consent/", {"consent": "decline"})
    assert response.status_code == 200 and "You did not consent" in response.content.decode()
    assert not Participant.objects.exists() and Invitation.objects.get().uses == 0


def test_get_never_creates_an_account_for_a_link_without_steps(study, owner) -> None:
    invitation = invite(study, owner, platform="none", completion_code="", consent_text="", demographics=[])
    client = Client()
    response = client.get(f"/join/{invitation.token}/", follow=True)
    assert response.status_code == 200 and "Start" in response.content.decode()
    assert not Participant.objects.exists()
    response = client.post(f"/join/{invitation.token}/begin/")
    assert response.status_code == 302 and Participant.objects.count() == 1
    # the same browser comes back through the plain link: same account
    assert client.get(f"/join/{invitation.token}/")["Location"] == f"/annotate/studies/{study.pk}/next/"
    assert Participant.objects.count() == 1


def test_mturk_preview_and_completion_without_url(study, owner) -> None:
    ItemFactory.create(study=study)
    invitation = invite(
        study, owner, platform="mturk", consent_text="", demographics=[], completion_code="MT-9"
    )
    preview = Client().get(f"/join/{invitation.token}/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=3HIT")
    assert preview.status_code == 200 and "Accept the HIT" in preview.content.decode()
    client = Client()
    client.get(f"/join/{invitation.token}/?workerId=A1B2C3&assignmentId=3ASG&hitId=3HIT")
    client.post(f"/join/{invitation.token}/begin/")
    participant = Participant.objects.get()
    assert (participant.participant_id, participant.assignment_id, participant.platform_study_id) == (
        "A1B2C3",
        "3ASG",
        "3HIT",
    )
    task = client.get(f"/annotate/studies/{study.pk}/next/")
    client.post(task["Location"], ANSWERS)
    done = client.get(client.get(f"/annotate/studies/{study.pk}/next/")["Location"])
    assert "MT-9" in done.content.decode() and "Paste the code" in done.content.decode()


def test_a_signed_in_researcher_is_not_turned_into_a_participant(crowd, owner) -> None:
    _study, invitation = crowd
    client = Client()
    client.force_login(owner)
    response = client.get(f"/join/{invitation.token}/{PROLIFIC}")
    assert response.status_code == 409 and "Sign out first" in response.content.decode()
    assert not Participant.objects.exists()


# --- Researcher pages and API ---------------------------------------------------------------------------


def test_invitations_page_create_list_revoke(study, owner) -> None:
    client = Client()
    client.force_login(owner)
    assert f"/studies/{study.pk}/invitations/" in client.get(f"/studies/{study.pk}/").content.decode()
    response = client.post(
        f"/studies/{study.pk}/invitations/",
        {
            "label": "Pilot <1>",
            "platform": "prolific",
            "pool": "crowd",
            "valid_days": "3",
            "max_uses": "20",
            "items_per_participant": "10",
            "completion_code": "ABC123",
            "completion_url": "",
            "consent_text": "ok",
            "demographics": "- key: region\n  label: Region\n  kind: choice\n  choices: [Asia, EMEA]\n",
        },
    )
    assert response.status_code == 302
    invitation = Invitation.objects.get()
    assert (invitation.max_uses, invitation.items_per_participant, invitation.created_by) == (20, 10, owner)
    assert (
        timedelta(days=3) - timedelta(minutes=1) < invitation.expires_at - timezone.now() <= timedelta(days=3)
    )
    assert invitation.demographics[0]["choices"] == ["Asia", "EMEA"]
    page = client.get(f"/studies/{study.pk}/invitations/").content.decode()
    assert f"/join/{invitation.token}/" in page and "Pilot &lt;1&gt;" in page and "PROLIFIC_PID" in page
    response = client.post(f"/studies/{study.pk}/invitations/{invitation.pk}/revoke/")
    assert response.status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None


def test_invitation_form_errors_come_back(study, owner) -> None:
    client = Client()
    client.force_login(owner)
    response = client.post(
        f"/studies/{study.pk}/invitations/",
        {
            "platform": "prolific",
            "pool": "crowd",
            "valid_days": "3",
            "max_uses": "20",
            "completion_code": "",
            "demographics": "- key: Bad Key\n  label: x",
        },
    )
    assert response.status_code == 400 and not Invitation.objects.exists()


@pytest.mark.parametrize(
    ("who", "status"), [("owner", 200), ("other", 404), ("annotator", 404), ("anonymous", 302)]
)
def test_invitations_page_permissions(study, owner, other_researcher, annotator_user, who, status) -> None:
    invitation = invite(study, owner)
    client = Client()
    user = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}[who]
    if user is not None:
        client.force_login(user)
    assert client.get(f"/studies/{study.pk}/invitations/").status_code == status
    revoke = client.post(f"/studies/{study.pk}/invitations/{invitation.pk}/revoke/")
    invitation.refresh_from_db()
    assert (invitation.revoked_at is not None) == (who == "owner")
    assert revoke.status_code == (302 if who in ("owner", "anonymous") else 404)


def test_an_enrolled_annotator_cannot_see_links(study, owner) -> None:
    enrolled = UserFactory.create(username="enrolled", role="annotator")
    enrollment_add(study=study, user=enrolled)
    client = Client()
    client.force_login(enrolled)
    assert client.get(f"/studies/{study.pk}/invitations/").status_code == 403


@pytest.mark.parametrize(
    ("who", "status"), [("owner", 201), ("other", 404), ("annotator", 404), ("anonymous", 401)]
)
def test_api_create_permissions(study, owner, other_researcher, annotator_user, who, status) -> None:
    user = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}[who]
    response = client_for(user).post(
        f"/api/studies/{study.pk}/invitations/",
        {
            "platform": "prolific",
            "max_uses": 3,
            "completion_code": "XYZ",
            "items_per_participant": 5,
            "demographics": DEMOGRAPHICS,
        },
        format="json",
    )
    assert response.status_code == status
    assert Invitation.objects.count() == (1 if who == "owner" else 0)


def test_api_list_and_revoke(study, owner) -> None:
    api = client_for(owner)
    created = api.post(
        f"/api/studies/{study.pk}/invitations/",
        {"platform": "mturk", "max_uses": 3, "completion_code": "XYZ", "label": "HIT 1"},
        format="json",
    ).json()
    assert created["url"].endswith(f"/join/{created['token']}/") and created["state"] == "open"
    assert created["completion_url"] == "" and created["uses"] == 0
    listed = api.get(f"/api/studies/{study.pk}/invitations/").json()
    assert [row["id"] for row in listed] == [created["id"]] and listed[0]["joined"] == 0
    revoked = api.post(f"/api/studies/{study.pk}/invitations/{created['id']}/revoke/").json()
    assert revoked["state"] == "revoked"
    bad = api.post(
        f"/api/studies/{study.pk}/invitations/",
        {
            "platform": "prolific",
            "max_uses": 3,
            "completion_code": "XYZ",
            "demographics": [{"key": "a", "label": "A", "kind": "choice"}],
        },
        format="json",
    )
    assert bad.status_code == 400 and "choice" in json.dumps(bad.json())


def test_consent_is_rendered_with_the_safe_markdown_of_instructions(study, owner) -> None:
    """A researcher's Markdown list reads as a list, as the instructions do; raw HTML and script links
    stay text (common/safe_markdown.py)."""
    text = "- It takes about 5 minutes\n- You may stop at any time\n\n[terms](javascript:alert(1)) <i>x</i>"
    invitation = invite(study, owner, consent_text=text)
    client = Client()
    opened = client.get(f"/join/{invitation.token}/{PROLIFIC}")
    html = client.get(opened["Location"]).content.decode()
    consent = html[
        html.index('class="rendered-text consent-text"') : html.index("</div>", html.index("consent-text"))
    ]
    assert "<li>It takes about 5 minutes</li>" in consent and "<li>You may stop at any time</li>" in consent
    # A script link stays text, never a link; raw HTML is escaped.
    assert 'href="javascript:' not in consent and "<a " not in consent
    assert "<i>" not in consent and "&lt;i&gt;x&lt;/i&gt;" in consent
