"""Item images end with the annotator's place in the study (third hardening round, L2): an annotator
sees an item's images only while it is leased to them or submitted by them, in a study they are still
enrolled in and not excluded from; the API's presigned ``direct_url`` only for their current lease.
Through the image URLs and the task API, on the media folder and on a bucket (``file_store``); the
image page still reads the image in one query. Researchers keep their sight of every item."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations.models import Assignment, Study, User
from annotations.services.assignment import assignments_expire
from annotations.services.studies import annotator_for_user, enrollment_add
from tests.annotations.builders import image_item
from tests.helpers import client_for
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db

ANSWERS = {
    "gender": {"value": "male"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
}


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def image_paths(item_id: int) -> list[str]:
    return [f"/items/{item_id}/images/0/", f"/items/{item_id}/images/0/display/"]


def shown(client: Client, item_id: int) -> bool:
    """Whether both image URLs of the item answer with the image (or its redirect); a refusal must be a
    404 that names no bucket URL."""
    answers = [client.get(path) for path in image_paths(item_id)]
    if all(a.status_code in (200, 302) for a in answers):
        return True
    codes = [a.status_code for a in answers]
    assert all(a.status_code == 404 and "Location" not in a for a in answers), codes
    return False


def direct_urls(api, assignment_id: int) -> list[str | None]:
    task = api.get(f"/api/assignments/{assignment_id}/")
    assert task.status_code == 200, task.content
    return [image["direct_url"] for image in task.json()["task"]["item"]["images"]]


def claim(api, study: Study) -> dict:
    claimed = api.post(f"/api/studies/{study.pk}/assignments/next/")
    assert claimed.status_code == 200, claimed.content
    return dict(claimed.json())


@pytest.fixture
def work(file_store: FileStore, study, annotator_user) -> tuple[dict, dict]:
    """The annotator enrolled in a study of image items, with one item submitted and one leased now
    (the claims and the submit through the API)."""
    for name in "abcdef":
        image_item(study, name, size=(64, 48))
    enrollment_add(study=study, user=annotator_user)
    api = client_for(annotator_user)
    submitted = claim(api, study)
    done = api.post(f"/api/assignments/{submitted['id']}/submit/", {"answers": ANSWERS}, format="json")
    assert done.status_code == 200, done.content
    leased = claim(api, study)
    assert leased["id"] != submitted["id"]
    return submitted, leased


def test_an_unenrolled_annotator_loses_every_image_and_direct_url(
    file_store: FileStore, work, study, owner, annotator_user
) -> None:
    submitted, leased = work
    annotator, api = login(annotator_user), client_for(annotator_user)
    assert shown(annotator, submitted["item"]) and shown(annotator, leased["item"])
    on_s3 = file_store.kind == "s3"
    assert direct_urls(api, submitted["id"]) == [None]  # not the current lease: no presigned URL
    (current,) = direct_urls(api, leased["id"])
    assert (current is not None) == on_s3
    unenrolled = client_for(owner).post(
        f"/api/studies/{study.pk}/enrollments/unenroll/", {"username": annotator_user.username}
    )
    assert unenrolled.status_code == 200, unenrolled.content
    assert not shown(annotator, submitted["item"]) and not shown(annotator, leased["item"])
    assert direct_urls(api, submitted["id"]) == direct_urls(api, leased["id"]) == [None]
    assert "X-Amz" not in api.get(f"/api/assignments/{leased['id']}/").content.decode()
    owner_page = login(owner)  # the study's researchers see every item as before
    assert shown(owner_page, submitted["item"]) and shown(owner_page, leased["item"])
    # Enrolled again: the submitted item is theirs to see again (its lease went back when unenrolled).
    enrollment_add(study=study, user=annotator_user)
    assert shown(annotator, submitted["item"]) and not shown(annotator, leased["item"])


def test_an_excluded_annotator_loses_every_image_and_direct_url_until_reinstated(
    file_store: FileStore, work, study, owner, annotator_user
) -> None:
    submitted, leased = work
    annotator, api = login(annotator_user), client_for(annotator_user)
    annotator_id = annotator_for_user(user=annotator_user).pk
    excluded = client_for(owner).post(
        f"/api/studies/{study.pk}/exclusions/", {"annotator": annotator_id, "reason": "straight-lining"}
    )
    assert excluded.status_code == 201, excluded.content
    assert Assignment.objects.get(pk=leased["id"]).status == Assignment.Status.LEASED  # still held
    assert not shown(annotator, submitted["item"]) and not shown(annotator, leased["item"])
    assert direct_urls(api, submitted["id"]) == direct_urls(api, leased["id"]) == [None]
    assert shown(login(owner), leased["item"])
    reinstated = client_for(owner).post(f"/api/studies/{study.pk}/exclusions/{annotator_id}/reinstate/", {})
    assert reinstated.status_code == 200, reinstated.content
    assert shown(annotator, submitted["item"]) and shown(annotator, leased["item"])
    (current,) = direct_urls(api, leased["id"])
    assert (current is not None) == (file_store.kind == "s3")


def test_a_released_skipped_or_expired_item_is_no_longer_shown(
    file_store: FileStore, work, study, owner, annotator_user
) -> None:
    submitted, leased = work
    annotator, api = login(annotator_user), client_for(annotator_user)
    released = api.post(f"/api/assignments/{leased['id']}/release/")
    assert released.status_code == 200 and released.json()["status"] == "expired"
    skipped = claim(api, study)
    answer = api.post(f"/api/assignments/{skipped['id']}/skip/", {"reason": "cannot see it"}, format="json")
    assert answer.status_code == 200 and answer.json()["status"] == "skipped"
    lapsed = claim(api, study)
    Assignment.objects.filter(pk=lapsed["id"]).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert assignments_expire(study=study) == 1
    current = claim(api, study)
    assert len({submitted["item"], leased["item"], skipped["item"], lapsed["item"], current["item"]}) == 5
    for gone in (leased, skipped, lapsed):
        assert not shown(annotator, gone["item"]), gone
        assert direct_urls(api, gone["id"]) == [None]
        assert shown(login(owner), gone["item"])
    assert shown(annotator, current["item"]) and shown(annotator, submitted["item"])
    (direct,) = direct_urls(api, current["id"])
    assert (direct is not None) == (file_store.kind == "s3")


def test_the_image_page_still_reads_the_image_in_one_query(work, annotator_user) -> None:
    """The session, the account, then the image with every condition in one query (as before)."""
    submitted, leased = work
    client = login(annotator_user)
    for item_id in (submitted["item"], leased["item"]):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/items/{item_id}/images/0/")
        assert response.status_code in (200, 302)
        reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
        assert len(reads) == 3, reads
        assert "annotations_enrollment" in reads[-1] and "annotations_annotatorexclusion" in reads[-1]
