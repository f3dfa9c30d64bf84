"""The claim's answer (issue 38, point 4): its item's images and the direct-URL rule
(``access.assignment_gives_direct_urls``: the annotator's current lease, in a study they are still
enrolled in and not excluded from) are read in one statement, so a claim on a bucket takes the same
4 statements as on the media folder; an excluded annotator's held lease still comes back without a
presigned URL. The submit reads its input through one kept serializer with the serializer's errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotations.api.assignment_serializers import SubmitSerializer, submit_input
from annotations.models import Item
from annotations.services.studies import annotator_for_user, enrollment_add
from tests.annotations.builders import image_item
from tests.helpers import client_for
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db

TRANSACTION = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
ANSWERS = {
    "gender": {"value": "male"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
}


def _work(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in captured.captured_queries if not q["sql"].lstrip().upper().startswith(TRANSACTION)
    ]


def _direct(task: dict[str, Any]) -> list[str | None]:
    return [image["direct_url"] for image in task["task"]["item"]["images"]]


def test_a_claim_carries_its_direct_url_in_four_statements_and_an_excluded_annotator_none(
    file_store: FileStore, study: Any, owner: Any, annotator_user: Any
) -> None:
    for name in "abcd":
        image_item(study, name, size=(64, 48))
    # Every item first in the annotator's seeded order: the claim's first pass finds one (4 statements).
    Item.objects.filter(study=study).update(shuffle_key=2**31 - 1)
    enrollment_add(study=study, user=annotator_user)
    api = client_for(annotator_user)
    first = api.post(f"/api/studies/{study.pk}/assignments/next/")  # the token's lookup, the annotator
    assert first.status_code == 200, first.content
    api.post(f"/api/assignments/{first.json()['id']}/submit/", {"answers": ANSWERS}, format="json")
    with CaptureQueriesContext(connection) as captured:
        claimed = api.post(f"/api/studies/{study.pk}/assignments/next/")
    assert claimed.status_code == 200, claimed.content
    assert len(_work(captured)) <= 4, "\n".join(s[:150] for s in _work(captured))
    (url,) = _direct(claimed.json())
    assert (url is not None) == (file_store.kind == "s3")
    if url is not None:
        assert url.startswith(file_store.bucket.endpoint_url) and "Signature=" in url

    excluded = client_for(owner).post(
        f"/api/studies/{study.pk}/exclusions/",
        {"annotator": annotator_for_user(user=annotator_user).pk, "reason": "straight-lining"},
    )
    assert excluded.status_code == 201, excluded.content
    held = api.post(f"/api/studies/{study.pk}/assignments/next/")  # the lease still held comes back
    assert held.status_code == 200 and held.json()["id"] == claimed.json()["id"]
    assert _direct(held.json()) == [None]


def test_submit_and_claim_next_gives_the_next_tasks_direct_url(
    file_store: FileStore, study: Any, annotator_user: Any
) -> None:
    for name in "abc":
        image_item(study, name, size=(64, 48))
    enrollment_add(study=study, user=annotator_user)
    api = client_for(annotator_user)
    claimed = api.post(f"/api/studies/{study.pk}/assignments/next/").json()
    both = api.post(f"/api/assignments/{claimed['id']}/submit/?next=1", {"answers": ANSWERS}, format="json")
    assert both.status_code == 200, both.content
    (url,) = _direct(both.json()["next"])
    assert (url is not None) == (file_store.kind == "s3")


@pytest.mark.parametrize(
    "data",
    [
        {"answers": ANSWERS},
        {"answers": ANSWERS, "time_spent_ms": 1200},
        {},
        {"answers": []},
        {"answers": {"gender": "male"}},
        {"answers": ANSWERS, "time_spent_ms": -1},
        {"answers": ANSWERS, "time_spent_ms": "soon"},
        {"answers": None},
        [],
        "answers",
    ],
)
def test_the_kept_submit_serializer_answers_as_a_new_one(data: Any) -> None:
    from rest_framework.exceptions import ValidationError

    fresh = SubmitSerializer(data=data)
    if fresh.is_valid():
        assert submit_input(data) == fresh.validated_data
    else:
        with pytest.raises(ValidationError) as refused:
            submit_input(data)
        assert refused.value.detail == fresh.errors
    submit_input({"answers": ANSWERS})  # nothing of the refused data stays behind
    assert submit_input({"answers": ANSWERS}) == {"answers": ANSWERS}
