"""A platform participant id is not a bearer credential (docs/crowd.md, "One account per participant id,
and resuming"; docs/security.md, "Resuming a crowd session"): whoever has the public link and another
participant's id cannot open their session without the resume cookie of the browser that joined, or the
platform's session id."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import Invitation, Participant, Study, User
from annotations.services.invitations import invitation_create
from annotations.views.join import RESUME_COOKIE
from tests.factories import ItemFactory

pytestmark = pytest.mark.django_db

NEXT = "/annotate/studies/{pk}/next/"
PID = "5f1a2b3c4d5e6f7a8b9c0d1e"
PROLIFIC = f"?PROLIFIC_PID={PID}&STUDY_ID=60aa11&SESSION_ID=sess42"


def invite(study: Study, owner: User, **overrides: Any) -> Invitation:
    values: dict[str, Any] = {
        "expires_at": timezone.now() + timedelta(days=7),
        "max_uses": 5,
        "platform": "prolific",
        "completion_code": "C0DE42",
        "consent_text": "Your answers will be published.",
        "demographics": [{"key": "region", "label": "Where?", "kind": "choice", "choices": ["Asia", "EMEA"]}],
        "items_per_participant": 2,
    }
    values.update(overrides)
    return invitation_create(study=study, created_by=owner, **values)


def join(client: Client, invitation: Invitation, query: str = PROLIFIC) -> Any:
    """Consent and the demographic form, as a browser would post them; returns the last response."""
    response = client.get(f"/join/{invitation.token}/{query}")
    assert response.status_code == 302 and response["Location"].endswith("/consent/")
    response = client.post(response["Location"], {"consent": "agree"})
    assert response.status_code == 302 and response["Location"].endswith("/begin/")
    return client.post(response["Location"], {"d-region": "EMEA"})


@pytest.fixture
def crowd(study, owner):
    study.overlap = 1
    study.save()
    for n in range(4):
        ItemFactory.create(study=study, external_id=f"i{n}")
    return study, invite(study, owner)


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_another_browser_with_the_id_but_not_the_secret_is_refused(crowd) -> None:
    study, invitation = crowd
    victim = Client()
    join(victim, invitation)
    cookie = victim.cookies[RESUME_COOKIE]
    assert cookie["httponly"] and cookie["path"] == "/join/" and len(cookie.value) >= 40
    participant = Participant.objects.get()
    assert participant.resume_secret_hash and cookie.value not in participant.resume_secret_hash
    for query in (f"?PROLIFIC_PID={PID}", f"?PROLIFIC_PID={PID}&STUDY_ID=60aa11&SESSION_ID=guessed"):
        attacker = Client()
        response = attacker.get(f"/join/{invitation.token}/{query}")
        assert response.status_code == 403, query
        assert "already started this study in another browser" in response.content.decode()
        assert not _signed_in(attacker)
        # nor by walking the steps with a half-made join of their own
        assert attacker.get(f"/join/{invitation.token}/begin/").status_code == 302
        assert not _signed_in(attacker)
    forged = Client()
    forged.cookies[RESUME_COOKIE] = "not-the-secret"
    assert forged.get(f"/join/{invitation.token}/?PROLIFIC_PID={PID}").status_code == 403
    assert Participant.objects.count() == 1 and not _signed_in(forged)


def test_the_race_through_the_form_is_refused_too(crowd) -> None:
    """Both open the link before either joins; the victim joins first; the attacker's Start is refused."""
    study, invitation = crowd
    victim, attacker = Client(), Client()
    query = f"?PROLIFIC_PID={PID}&STUDY_ID=60aa11&SESSION_ID=other"
    attacker.get(f"/join/{invitation.token}/{query}")
    attacker.post(f"/join/{invitation.token}/consent/", {"consent": "agree"})
    join(victim, invitation)
    response = attacker.post(f"/join/{invitation.token}/begin/", {"d-region": "EMEA"})
    assert response.status_code == 403 and not _signed_in(attacker)


def test_the_same_browser_and_the_platform_s_session_id_resume(crowd) -> None:
    study, invitation = crowd
    first = Client()
    join(first, invitation)
    participant = Participant.objects.get()
    # the same browser, signed out (the session ended; the client's logout forgets every cookie, a
    # browser keeps the resume cookie), with only the participant id
    kept = first.cookies[RESUME_COOKIE].value
    first.logout()
    first.cookies[RESUME_COOKIE] = kept
    response = first.get(f"/join/{invitation.token}/?PROLIFIC_PID={PID}")
    assert response.status_code == 302 and response["Location"] == NEXT.format(pk=study.pk)
    assert int(first.session["_auth_user_id"]) == participant.user_id
    # another browser sent by Prolific with the submission's SESSION_ID
    second = Client()
    response = second.get(f"/join/{invitation.token}/?PROLIFIC_PID={PID}&STUDY_ID=60aa11&SESSION_ID=sess42")
    assert response.status_code == 302 and int(second.session["_auth_user_id"]) == participant.user_id
    invitation.refresh_from_db()
    assert invitation.uses == 1


def test_mturk_binds_to_the_assignment_id(study, owner) -> None:
    ItemFactory.create(study=study)
    invitation = invite(study, owner, platform="mturk", consent_text="", demographics=[])
    worker = Client()
    worker.get(f"/join/{invitation.token}/?workerId=A1B2C3&assignmentId=3ASG&hitId=3HIT")
    worker.post(f"/join/{invitation.token}/begin/")
    assert Participant.objects.count() == 1
    again = Client().get(f"/join/{invitation.token}/?workerId=A1B2C3&assignmentId=3ASG&hitId=3HIT")
    assert again.status_code == 302
    stranger = Client().get(f"/join/{invitation.token}/?workerId=A1B2C3&assignmentId=OTHER&hitId=3HIT")
    assert stranger.status_code == 403
