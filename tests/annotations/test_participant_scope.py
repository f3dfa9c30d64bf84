"""An invited participant reaches only their study's annotate pages: every URL the app serves is tried.

The list of URLs comes from the project's resolver (``django.urls.get_resolver``), so a page added
later is covered without touching this test. Integer arguments are filled with real ids of another
study and its item, assignment, invitation and export, and of another annotator's assignment and
item in the participant's own study; those ids (9001...) are chosen apart from the participant's own.
"""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotations.models import Assignment, ExportJob, Invitation, Item, ItemImage, Study
from annotations.services.assignment import assignment_claim_next
from annotations.services.invitations import PlatformIds, invitation_create, participant_join
from annotations.services.studies import enrollment_add
from tests.annotations.imagefiles import png_bytes
from tests.annotations.url_walk import INT_PARAMETERS, OTHER_PARAMETERS, PLACEHOLDER, every_url
from tests.factories import StudyFactory, UserFactory
from tests.s3_server import FileStore, fetch_download
from workbench.middleware import PARTICIPANT_REDIRECTS, PARTICIPANT_URL_NAMES

pytestmark = pytest.mark.django_db

FOREIGN = {
    "other_study": 9001,
    "other_item": 9002,
    "other_assignment": 9003,
    "other_invitation": 9004,
    "other_export": 9005,
    "neighbour_assignment": 9006,
    "neighbour_item": 9007,
}


def _image_item(study: Study, name: str, **extra: Any) -> Item:
    item = Item.objects.create(study=study, external_id=name, kind="image", **extra)
    image = ItemImage(
        item=item, position=0, width=32, height=24, content_type="image/png", sha256=name.ljust(64, "0")
    )
    image.file.save(f"{name}.png", ContentFile(png_bytes()), save=False)
    image.save()
    return item


@pytest.fixture
def world(_media_root: Any) -> dict[str, Any]:
    owner = UserFactory.create(username="res", role="researcher")
    study = StudyFactory.create(owner=owner, overlap=1)
    own_item = _image_item(study, "own")
    invitation = invitation_create(
        study=study,
        created_by=owner,
        expires_at=timezone.now() + timedelta(days=1),
        max_uses=5,
        platform="prolific",
        completion_code="CODE1",
    )
    participant, _ = participant_join(invitation=invitation, ids=PlatformIds(participant_id="abc123"))
    own_assignment = assignment_claim_next(study=study, annotator=participant.user.annotator)
    assert own_assignment is not None and own_assignment.item_id == own_item.pk
    # another annotator in the participant's own study, with their own item and assignment
    neighbour = UserFactory.create(username="neighbour", role="annotator")
    enrollment_add(study=study, user=neighbour)
    neighbour_item = _image_item(study, "neighbour", pk=FOREIGN["neighbour_item"])
    Assignment.objects.create(
        pk=FOREIGN["neighbour_assignment"],
        study=study,
        item=neighbour_item,
        annotator=neighbour.annotator,
        status="submitted",
    )
    # another study, with everything a URL can name
    other_owner = UserFactory.create(username="other-res", role="researcher")
    other = StudyFactory.create(pk=FOREIGN["other_study"], owner=other_owner, overlap=1)
    other_item = _image_item(other, "other", pk=FOREIGN["other_item"])
    enrollment_add(study=other, user=neighbour)
    Assignment.objects.create(
        pk=FOREIGN["other_assignment"],
        study=other,
        item=other_item,
        annotator=neighbour.annotator,
        status="leased",
        lease_expires_at=timezone.now() + timedelta(hours=1),
    )
    Invitation.objects.create(
        pk=FOREIGN["other_invitation"],
        study=other,
        created_by=other_owner,
        max_uses=3,
        expires_at=timezone.now() + timedelta(days=1),
    )
    ExportJob.objects.create(
        pk=FOREIGN["other_export"], study=other, requested_by=other_owner, format="csv", status="done"
    )
    own_ids = {study.pk, own_item.pk, own_assignment.pk, invitation.pk, participant.user_id}
    assert not own_ids & set(FOREIGN.values())
    client = Client()
    client.force_login(participant.user)
    return {
        "study": study,
        "participant": participant,
        "own_assignment": own_assignment,
        "own_item": own_item,
        "client": client,
        "neighbour": neighbour,
        "owner": owner,
    }


def fill(template: str, ints: dict[str, int]) -> str:
    def value(match: re.Match[str]) -> str:
        converter, name = match.groups()
        if converter == "drf_format_suffix":  # DRF's suffix converter matches the dot too
            return ".json"
        return str(ints[name]) if name in INT_PARAMETERS else OTHER_PARAMETERS[name]

    return PLACEHOLDER.sub(value, template)


def int_parameters(template: str) -> list[str]:
    names = [m.group(2) for m in PLACEHOLDER.finditer(template)]
    unknown = [n for n in names if n not in INT_PARAMETERS and n not in OTHER_PARAMETERS]
    assert not unknown, f"{template}: say how to fill {unknown}"
    return [n for n in names if n in INT_PARAMETERS]


def test_every_url_is_refused_to_an_invited_participant_except_their_own_tasks(world) -> None:
    client: Client = world["client"]
    study: Study = world["study"]
    urls = every_url()
    assert len(urls) > 150  # the resolver really was walked (admin, API, pages)
    tried = 0
    for template, name in urls:
        if name == "logout":
            continue  # allowed; signing out would end the test's session
        params = int_parameters(template)
        allowed = name in PARTICIPANT_URL_NAMES
        if allowed:  # reachable by name: every combination of foreign ids must be not found
            combos = [
                dict(zip(params, values, strict=True))
                for values in itertools.product(FOREIGN.values(), repeat=len(params))
            ]
        else:  # refused by name: the participant's own study id and a foreign id alike
            combos = [dict.fromkeys(params, study.pk), dict.fromkeys(params, FOREIGN["other_study"])]
        for ints in combos:
            path = fill(template, ints)
            for method in ("get", "post"):
                response = getattr(client, method)(path)
                tried += 1
                where = f"{method.upper()} {path} ({name})"
                assert not 200 <= response.status_code < 300, f"{where} answered {response.status_code}"
                if allowed:
                    assert response.status_code in (404, 405), f"{where} answered {response.status_code}"
                elif name in PARTICIPANT_REDIRECTS:
                    assert (
                        response.status_code == 302
                        and response["Location"] == f"/annotate/studies/{study.pk}/next/"
                    )
                else:
                    assert response.status_code == 403, f"{where} answered {response.status_code}"
    assert tried > 500
    # the participant's session survived the whole walk, and the own flow still works
    assert client.get(f"/annotate/assignments/{world['own_assignment'].pk}/").status_code == 200


def test_the_participants_own_flow_works(world, default_store: FileStore) -> None:
    client: Client = world["client"]
    study, assignment = world["study"], world["own_assignment"]
    assert (
        client.get(f"/annotate/studies/{study.pk}/next/")["Location"]
        == f"/annotate/assignments/{assignment.pk}/"
    )
    assert client.get(f"/annotate/assignments/{assignment.pk}/").status_code == 200
    assert fetch_download(client.get(f"/items/{world['own_item'].pk}/images/0/display/"), default_store)
    assert client.get(f"/annotate/studies/{study.pk}/mine/").status_code == 200
    assert client.get("/")["Location"] == f"/annotate/studies/{study.pk}/next/"
    assert client.get("/annotate/")["Location"] == f"/annotate/studies/{study.pk}/next/"


def test_api_is_refused_with_a_session_or_a_token(world) -> None:
    response = world["client"].get(f"/api/studies/{world['study'].pk}/")
    assert response.status_code == 403 and "one study" in response.json()["detail"]
    token, _ = Token.objects.get_or_create(user=world["participant"].user)  # e.g. made by an admin
    response = Client().get("/api/me/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 403
    response = Client().get(
        f"/api/studies/{world['study'].pk}/assignments/next/", HTTP_AUTHORIZATION=f"Token {token.key}"
    )
    assert response.status_code == 403


def test_other_accounts_are_not_fenced(world) -> None:
    neighbour = Client()
    neighbour.force_login(world["neighbour"])
    home = neighbour.get("/", follow=True)  # an annotator's home is their dashboard
    assert home.status_code == 200 and home.redirect_chain == [("/annotate/", 302)]
    assert neighbour.get("/annotate/").status_code == 200
    researcher = Client()
    researcher.force_login(world["owner"])
    assert researcher.get(f"/studies/{world['study'].pk}/").status_code == 200
    assert researcher.get(f"/api/studies/{world['study'].pk}/").status_code == 200
