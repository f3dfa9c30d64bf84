"""The claim + submit hot path (issue 17): statements per request, the cached token lookup and its
invalidation, the cached protocol, and the submit-and-claim-next call. Requests carry a real token
(``Authorization: Token KEY``), so DRF's authentication runs as for any API client."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Annotation, Assignment, Item, Study
from annotations.services.studies import enrollment_add
from tests.factories import ItemFactory, UserFactory

pytestmark = pytest.mark.django_db

ANSWERS = {
    "gender": {"value": "male"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
}
TRANSACTION = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _token_client(user) -> tuple[APIClient, Token]:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client, token


def _work_statements(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in captured.captured_queries if not q["sql"].lstrip().upper().startswith(TRANSACTION)
    ]


@pytest.fixture
def enrolled(study, annotator_user) -> Study:
    for n in range(4):
        ItemFactory.create(study=study, external_id=f"i{n}")
    enrollment_add(study=study, user=annotator_user)
    return study


def _unsigned(payload: Any) -> Any:
    """The payload with each presigned `direct_url` cut to its address (signatures a second apart differ)."""
    if isinstance(payload, dict):
        return {
            key: value.split("?", 1)[0]
            if key == "direct_url" and isinstance(value, str)
            else _unsigned(value)
            for key, value in payload.items()
        }
    if isinstance(payload, list):
        return [_unsigned(value) for value in payload]
    return payload


def test_claim_and_submit_take_at_most_four_statements_each(enrolled, annotator_user) -> None:
    api, _token = _token_client(annotator_user)
    api.post(f"/api/studies/{enrolled.pk}/assignments/next/")  # fills the token cache, makes the annotator
    Assignment.objects.all().delete()
    # Every item at the top of the ring: the first stretch of the claim order finds one (an annotator
    # whose place on the ring is past every open item takes one more statement, the wrapped stretch).
    Item.objects.filter(study=enrolled).update(shuffle_key=2**31 - 1)
    with CaptureQueriesContext(connection) as claim:
        claimed = api.post(f"/api/studies/{enrolled.pk}/assignments/next/")
    assert claimed.status_code == 200, claimed.content
    assert len(_work_statements(claim)) <= 4, [s[:90] for s in _work_statements(claim)]
    with CaptureQueriesContext(connection) as submit:
        done = api.post(
            f"/api/assignments/{claimed.json()['id']}/submit/", {"answers": ANSWERS}, format="json"
        )
    assert done.status_code == 200 and done.json()["status"] == "submitted"
    assert len(_work_statements(submit)) <= 4, _work_statements(submit)
    assert Annotation.objects.filter(annotator__user=annotator_user).count() == 2
    assert Item.objects.get(pk=claimed.json()["item"]).judgements == 1
    # An edit reads the stored answers (one statement more) and keeps the old value as a revision.
    changed = {**ANSWERS, "gender": {"value": "female"}}
    edit = api.post(f"/api/assignments/{claimed.json()['id']}/submit/", {"answers": changed}, format="json")
    assert edit.status_code == 200
    assert Annotation.objects.get(question_key="gender").revisions.count() == 1
    assert Item.objects.get(pk=claimed.json()["item"]).judgements == 1


def test_a_revoked_token_is_refused_at_once(enrolled, annotator_user) -> None:
    api, token = _token_client(annotator_user)
    assert api.post(f"/api/studies/{enrolled.pk}/assignments/next/").status_code == 200
    token.delete()
    assert api.post(f"/api/studies/{enrolled.pk}/assignments/next/").status_code == 401


def test_a_deactivated_account_is_refused_at_once(enrolled, annotator_user) -> None:
    api, _token = _token_client(annotator_user)
    assert api.post(f"/api/studies/{enrolled.pk}/assignments/next/").status_code == 200
    annotator_user.is_active = False
    annotator_user.save()
    assert api.post(f"/api/studies/{enrolled.pk}/assignments/next/").status_code == 401


def test_the_cached_account_is_a_fresh_copy_each_request(enrolled, annotator_user) -> None:
    """Two requests with the same token see each their own user object (nothing a request sets on its
    user reaches the next), with the annotator already attached."""
    api, _token = _token_client(annotator_user)
    first = api.post(f"/api/studies/{enrolled.pk}/assignments/next/")
    second = api.post(f"/api/studies/{enrolled.pk}/assignments/next/")
    assert first.status_code == second.status_code == 200
    assert first.json()["id"] == second.json()["id"]  # the held lease comes back, renewed
    assert Assignment.objects.filter(annotator__user=annotator_user).count() == 1


def test_a_changed_protocol_is_parsed_again(enrolled) -> None:
    before = Study.objects.get(pk=enrolled.pk).protocol_obj
    assert Study.objects.get(pk=enrolled.pk).protocol_obj is before  # parsed once for this text
    protocol = dict(enrolled.protocol)
    protocol["instructions"] = "Look closely."
    Study.objects.filter(pk=enrolled.pk).update(protocol=protocol)
    after = Study.objects.get(pk=enrolled.pk).protocol_obj
    assert after is not before and after.instructions == "Look closely."


def test_submit_and_claim_next_answers_the_next_task(enrolled, annotator_user) -> None:
    api, _token = _token_client(annotator_user)
    seen = []
    current = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()
    for _ in range(4):
        seen.append(current["item"])
        response = api.post(
            f"/api/assignments/{current['id']}/submit/?next=1", {"answers": ANSWERS}, format="json"
        )
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["submitted"]["id"] == current["id"] and body["submitted"]["status"] == "submitted"
        if body["next"] is None:
            break
        assert body["next"]["status"] == "leased" and body["next"]["task"]["questions"]
        current = body["next"]
    assert body["next"] is None and body["detail"] == ""
    assert sorted(seen) == sorted(Item.objects.filter(study=enrolled).values_list("pk", flat=True))
    assert Assignment.objects.filter(status="submitted").count() == 4
    # Without ?next the answer is the assignment alone, as before.
    plain = api.post(f"/api/assignments/{current['id']}/submit/", {"answers": ANSWERS}, format="json")
    assert plain.json()["id"] == current["id"] and "next" not in plain.json()


def test_submit_and_claim_next_respects_overlap(study) -> None:
    """Four people, overlap 3, one item: the fourth's next is null once three have submitted."""
    study.overlap = 3
    study.save()
    ItemFactory.create(study=study, external_id="only")
    clients = []
    for n in range(4):
        user = UserFactory.create(username=f"p{n}", role="annotator")
        enrollment_add(study=study, user=user)
        clients.append(_token_client(user)[0])
    leases = [c.post(f"/api/studies/{study.pk}/assignments/next/") for c in clients]
    assert [r.status_code for r in leases] == [200, 200, 200, 204]
    for client, lease in zip(clients[:3], leases[:3], strict=True):
        body = client.post(
            f"/api/assignments/{lease.json()['id']}/submit/?next=1", {"answers": ANSWERS}, format="json"
        ).json()
        assert body["next"] is None
    assert Item.objects.get(study=study).judgements == 3
    assert clients[3].post(f"/api/studies/{study.pk}/assignments/next/").status_code == 204


def test_invalid_submit_to_someone_elses_assignment_is_not_found(enrolled, annotator_user) -> None:
    api, _token = _token_client(annotator_user)
    pk = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    stranger = UserFactory.create(username="stranger", role="annotator")
    enrollment_add(study=enrolled, user=stranger)
    other, _ = _token_client(stranger)
    assert other.post(f"/api/assignments/{pk}/submit/", {"answers": "x"}, format="json").status_code == 404
    assert (
        other.post(f"/api/assignments/{pk}/submit/", {"answers": ANSWERS}, format="json").status_code == 404
    )
    assert api.post(f"/api/assignments/{pk}/submit/", {"answers": "x"}, format="json").status_code == 400


def test_submit_and_claim_next_in_a_paused_study_keeps_the_submit(enrolled, annotator_user) -> None:
    api, _token = _token_client(annotator_user)
    pk = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    Study.objects.filter(pk=enrolled.pk).update(status=Study.Status.PAUSED)
    response = api.post(f"/api/assignments/{pk}/submit/?next=1", {"answers": ANSWERS}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["submitted"]["status"] == "submitted" and body["next"] is None
    assert "paused" in body["detail"]
    assert Assignment.objects.get(pk=pk).status == "submitted"


def test_claim_and_submit_answer_what_the_serializers_give(enrolled, annotator_user) -> None:
    """The hot path renders its responses without ModelSerializer: the same fields and values."""
    from annotations.api.assignment_serializers import AssignmentSerializer, TaskSerializer

    api, _token = _token_client(annotator_user)
    claimed = api.post(f"/api/studies/{enrolled.pk}/assignments/next/")
    assert claimed.status_code == 200
    lease = Assignment.objects.select_related("study", "item", "annotator").get(pk=claimed.json()["id"])
    assert _unsigned(claimed.json()) == _unsigned(TaskSerializer(lease).data)
    assert claimed.json()["lease_expires_at"].endswith("Z") and claimed.json()["completed_at"] is None
    done = api.post(
        f"/api/assignments/{lease.pk}/submit/", {"answers": ANSWERS, "time_spent_ms": 1234}, format="json"
    )
    assert done.status_code == 200
    submitted = Assignment.objects.get(pk=lease.pk)
    assert done.json() == AssignmentSerializer(submitted).data
    assert done.json()["time_spent_ms"] == 1234 and done.json()["lease_expires_at"] is None
    # A submitted task shows the stored answers.
    shown = api.get(f"/api/assignments/{lease.pk}/")
    assert shown.status_code == 200 and shown.json()["task"]["answers"]


def test_the_prepared_queries_find_what_the_orm_finds(enrolled, annotator_user) -> None:
    """The claim's start query, compiled once and run with new values, gives the ORM's rows."""
    from django.db import transaction
    from django.utils import timezone

    from annotations.services import assignment as service
    from annotations.services.studies import annotator_for_user

    annotator = annotator_for_user(user=annotator_user)
    now = timezone.now()
    with transaction.atomic():
        found = service._CLAIM_START.first(
            connection.alias, study=enrolled.pk, user=annotator_user.pk, annotator=annotator.pk, now=now
        )
        assert found is not None and found.pk == enrolled.pk
        orm: Any = service._claim_start_query(
            study=enrolled.pk, user=annotator_user.pk, annotator=annotator.pk, now=now
        ).first()
        extra: Any = found
        assert (extra.claim_pool, extra.claim_quota, extra.claim_holds) == (
            orm.claim_pool,
            orm.claim_quota,
            orm.claim_holds,
        )
        assert found.overlap == orm.overlap and found.created_at == orm.created_at
        # Someone else's user id, or another study: nothing.
        other = UserFactory.create()
        assert (
            service._CLAIM_START.first(
                connection.alias, study=enrolled.pk, user=other.pk, annotator=annotator.pk, now=now
            )
            is None
        )
        assert (
            service._CLAIM_START.first(
                connection.alias,
                study=enrolled.pk + 1000,
                user=annotator_user.pk,
                annotator=annotator.pk,
                now=now,
            )
            is None
        )


def test_a_claimed_image_item_lists_its_images_in_order(study, annotator_user) -> None:
    """The claim reads the item's images with a query compiled once: the same list as the serializer's."""
    from annotations.api.assignment_serializers import TaskSerializer
    from annotations.models import ItemImage

    item = ItemFactory.create(study=study, external_id="pictured")
    ItemImage.objects.create(item=item, position=1, file="items/b.png", width=30, height=40)
    ItemImage.objects.create(item=item, position=0, file="items/a.png", width=10, height=20)
    ItemImage.objects.create(item=item, position=2, file="", width=0, height=0)  # no file: not shown
    enrollment_add(study=study, user=annotator_user)
    api, _token = _token_client(annotator_user)
    claimed = api.post(f"/api/studies/{study.pk}/assignments/next/")
    assert claimed.status_code == 200
    images = claimed.json()["task"]["item"]["images"]
    assert [(i["position"], i["width"], i["height"]) for i in images] == [(0, 10, 20), (1, 30, 40)]
    lease = Assignment.objects.select_related("study", "item", "annotator").get(pk=claimed.json()["id"])
    assert _unsigned(claimed.json()) == _unsigned(TaskSerializer(lease).data)
