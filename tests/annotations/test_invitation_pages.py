"""The researcher's invitation page (whole links, Copy buttons, estimated minutes, the form builder's
field kinds) and the participant preview, which records nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import (
    Annotation,
    Annotator,
    Assignment,
    Enrollment,
    Invitation,
    Participant,
    Study,
    User,
)
from annotations.services.invitations import demographic_answers_clean, invitation_create
from annotations.services.studies import enrollment_add
from common.errors import ValidationFailed
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db

FORM = [
    {"key": "region", "label": "Where do you live?", "kind": "choice", "choices": ["Asia", "EMEA"]},
    {"key": "age", "label": "Your age", "kind": "number"},
    {"key": "language", "label": "First <i>language</i>", "kind": "text", "required": False},
]


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def invite(study: Study, owner: User, **extra: Any) -> Invitation:
    values: dict[str, Any] = {
        "expires_at": timezone.now() + timedelta(days=3),
        "max_uses": 5,
        "consent_text": "We publish the answers.",
        "demographics": FORM,
        "estimated_minutes": 12,
        "items_per_participant": 4,
        "label": "Pilot",
    }
    values.update(extra)
    return invitation_create(study=study, created_by=owner, **values)


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (Participant, Assignment, Annotation, Enrollment, Annotator, User, Invitation)
    }


def new_link(owner: User, study: Study, **fields: Any) -> Any:
    data = {"platform": "none", "pool": "crowd", "valid_days": 7, "max_uses": 10, **fields}
    return login(owner).post(f"/studies/{study.pk}/invitations/", data)


def test_the_link_is_shown_whole_with_a_copy_button(owner) -> None:
    study = StudyFactory.create(owner=owner)
    invitation = invite(study, owner)
    html = login(owner).get(f"/studies/{study.pk}/invitations/").content.decode()
    link = f"http://testserver/join/{invitation.token}/"
    assert f'<code class="invitation-link" id="link-{invitation.pk}"' in html and f">{link}</code>" in html
    assert f'data-copy-target="link-{invitation.pk}"' in html and 'aria-live="polite"' in html
    assert f'href="/studies/{study.pk}/invitations/{invitation.pk}/preview/"' in html
    assert 'id="demographics-builder"' in html and "js/study.js" in html


def test_the_estimated_minutes_are_checked_stored_and_shown_on_the_consent_page(owner) -> None:
    study = StudyFactory.create(owner=owner, name="Faces <audit>")
    bad = new_link(owner, study, estimated_minutes=0)
    assert bad.status_code == 400 and not Invitation.objects.exists()
    assert new_link(owner, study, estimated_minutes=15, consent_text="Fine.").status_code == 302
    invitation = Invitation.objects.get()
    assert invitation.estimated_minutes == 15
    client = Client()
    consent = client.get(f"/join/{invitation.token}/", follow=True).content.decode()
    assert "Faces &lt;audit&gt;" in consent and "It takes about 15 minutes" in consent


def test_a_form_written_by_the_builder_is_checked_by_the_same_function(owner) -> None:
    study = StudyFactory.create(owner=owner)
    built = json.dumps(FORM, indent=2)
    assert new_link(owner, study, demographics=built).status_code == 302
    assert Invitation.objects.get().demographics[1] == {
        "key": "age",
        "label": "Your age",
        "kind": "number",
        "required": True,
    }
    no_choices = json.dumps([{"key": "region", "label": "Region", "kind": "choice", "choices": []}])
    refused = new_link(owner, study, demographics=no_choices)
    assert (
        refused.status_code == 400
        and "a choice field needs a list of 1 to 50 choices" in refused.content.decode()
    )
    numbered = json.dumps([{"key": "age", "label": "Age", "kind": "number", "choices": ["1"]}])
    assert "a number field has no choices" in new_link(owner, study, demographics=numbered).content.decode()
    assert Invitation.objects.count() == 1


def test_number_answers_must_be_numbers() -> None:
    fields = [{"key": "age", "label": "Age", "kind": "number", "required": True}]
    assert demographic_answers_clean(fields=fields, data={"age": " 42 "}) == {"age": "42"}
    assert demographic_answers_clean(fields=fields, data={"age": "-1.5"}) == {"age": "-1.5"}
    for bad in ("forty", "1e9", "4 2"):
        with pytest.raises(ValidationFailed) as caught:
            demographic_answers_clean(fields=fields, data={"age": bad})
        assert caught.value.details == {"age": "Write a number (digits, optionally a decimal point)."}


def test_the_preview_walks_consent_form_and_task_and_records_nothing(owner) -> None:
    study = StudyFactory.create(owner=owner, status=Study.Status.DRAFT, name="Preview <study>")
    ItemFactory.create(study=study, kind="text", text="nurse <b>")
    invitation = invite(study, owner)
    before = counts()
    client = login(owner)
    base = f"/studies/{study.pk}/invitations/{invitation.pk}/preview/"
    consent = client.get(base)
    html = consent.content.decode()
    assert consent.status_code == 200 and "Preview — nothing is recorded" in html
    assert (
        "We publish the answers." in html and "Preview &lt;study&gt;" in html and "about 12 minutes" in html
    )
    assert f'action="{base}about/"' in html  # agreeing only moves on
    form = client.get(f"{base}about/").content.decode()
    assert "Preview — nothing is recorded" in form and "First &lt;i&gt;language&lt;/i&gt;" in form
    wrong = client.post(f"{base}about/", {"d-region": "Mars", "d-age": "old"})
    assert wrong.status_code == 400
    assert (
        "Choose one of the options." in wrong.content.decode() and "Write a number" in wrong.content.decode()
    )
    right = client.post(f"{base}about/", {"d-region": "EMEA", "d-age": "33"})
    assert right.status_code == 302 and right["Location"] == f"{base}task/"
    task = client.get(right["Location"]).content.decode()
    assert "Preview — nothing is recorded" in task and "nurse &lt;b&gt;" in task
    assert 'name="q-' in task and "disabled" in task
    assert counts() == before
    assert "join" not in client.session


def test_the_preview_of_a_study_without_items_says_so(owner) -> None:
    study = StudyFactory.create(owner=owner)
    invitation = invite(study, owner, consent_text="", demographics=[])
    client = login(owner)
    base = f"/studies/{study.pk}/invitations/{invitation.pk}/preview/"
    assert client.get(base)["Location"] == f"{base}about/"
    assert client.post(f"{base}about/")["Location"] == f"{base}task/"
    assert 'id="preview-no-item"' in client.get(f"{base}task/").content.decode()


def test_only_the_studys_writers_preview_its_links(owner, other_researcher, annotator_user) -> None:
    study = StudyFactory.create(owner=owner)
    invitation = invite(study, owner)
    enrollment_add(study=study, user=annotator_user)
    base = f"/studies/{study.pk}/invitations/{invitation.pk}/preview/"
    for path in ("", "about/", "task/"):
        assert login(other_researcher).get(base + path).status_code == 404
        assert login(annotator_user).get(base + path).status_code == 403
    other = StudyFactory.create(owner=owner)
    assert login(owner).get(f"/studies/{other.pk}/invitations/{invitation.pk}/preview/").status_code == 404


def test_the_completion_page_has_a_copy_button_for_the_code(owner) -> None:
    study = StudyFactory.create(owner=owner, overlap=1)
    ItemFactory.create(study=study)
    invitation = invite(
        study, owner, consent_text="", demographics=[], completion_code="DONE-1", items_per_participant=None
    )
    participant = Client()
    participant.get(f"/join/{invitation.token}/", follow=True)
    participant.post(f"/join/{invitation.token}/begin/")
    account = Participant.objects.get()
    Participant.objects.filter(pk=account.pk).update(completed_at=timezone.now())
    html = participant.get(f"/annotate/studies/{study.pk}/complete/").content.decode()
    assert '<strong id="completion-code">DONE-1</strong>' in html
    assert 'data-copy-target="completion-code"' in html and 'id="copy-status"' in html
