"""The annotation workflow over the REST API: claim, task, submit, skip, release, my assignments."""

from __future__ import annotations

import pytest

from annotations.models import Annotation, Assignment
from annotations.services.studies import enrollment_add
from tests.factories import ItemFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

ANSWERS = {
    "gender": {"value": "male"},
    "attributes": {"value": ["none_of_the_above"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
}


@pytest.fixture
def enrolled(study, annotator_user):
    ItemFactory.create(study=study, external_id="x", metadata={"identity": "secret"})
    ItemFactory.create(study=study, external_id="y")
    enrollment_add(study=study, user=annotator_user)
    return study


def users(owner, other_researcher, annotator_user):
    return {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}


def test_the_whole_flow(enrolled, annotator_user) -> None:
    api = client_for(annotator_user)
    claimed = api.post(f"/api/studies/{enrolled.pk}/assignments/next/")
    assert claimed.status_code == 200
    task = claimed.json()["task"]
    assert [q["key"] for q in task["questions"]] == ["gender", "attributes", "boxes", "colour", "smiling"]
    assert task["questions"][0]["options"] == [
        {"key": "male", "label": "male"},
        {"key": "female", "label": "female"},
    ]
    assert task["item"]["image_unavailable"] is True and "secret" not in str(claimed.json())
    pk = claimed.json()["id"]
    bad = api.post(f"/api/assignments/{pk}/submit/", {"answers": {"gender": {"value": "x"}}}, format="json")
    assert bad.status_code == 400 and set(bad.json()["errors"]) == {"gender", "attributes"}
    assert not Annotation.objects.exists()
    done = api.post(
        f"/api/assignments/{pk}/submit/", {"answers": ANSWERS, "time_spent_ms": 900}, format="json"
    )
    assert done.status_code == 200 and done.json()["status"] == "submitted"
    again = api.post(f"/api/assignments/{pk}/submit/", {"answers": ANSWERS}, format="json")
    assert again.status_code == 200 and Annotation.objects.count() == 2
    assert api.get(f"/api/assignments/{pk}/").json()["task"]["answers"]["gender"]["value"] == "male"
    second = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    assert api.post(f"/api/assignments/{second}/skip/", {"reason": ""}, format="json").status_code == 400
    assert (
        api.post(f"/api/assignments/{second}/skip/", {"reason": "blurry"}, format="json").json()["status"]
        == "skipped"
    )
    assert api.post(f"/api/studies/{enrolled.pk}/assignments/next/").status_code == 204
    mine = api.get(f"/api/assignments/?study={enrolled.pk}").json()
    assert mine["count"] == 2 and {row["status"] for row in mine["results"]} == {"submitted", "skipped"}
    assert api.post(f"/api/assignments/{pk}/skip/", {"reason": "late"}, format="json").status_code == 409


def test_release(enrolled, annotator_user) -> None:
    api = client_for(annotator_user)
    pk = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    assert api.post(f"/api/assignments/{pk}/release/").json()["status"] == "expired"
    assert api.post(f"/api/assignments/{pk}/release/").status_code == 409


@pytest.mark.parametrize(
    "who,expected", [("owner", 404), ("other", 404), ("annotator", 200), ("anonymous", 401)]
)
def test_claim_permission_matrix(enrolled, owner, other_researcher, annotator_user, who, expected) -> None:
    user = users(owner, other_researcher, annotator_user)[who]
    response = client_for(user).post(f"/api/studies/{enrolled.pk}/assignments/next/")
    assert response.status_code == expected
    assert Assignment.objects.count() == (1 if who == "annotator" else 0)


@pytest.mark.parametrize(
    "who,expected", [("owner", 404), ("other", 404), ("annotator", 200), ("anonymous", 401)]
)
@pytest.mark.parametrize("action", ["submit", "skip", "release", "read"])
def test_assignment_permission_matrix(
    enrolled, owner, other_researcher, annotator_user, who, expected, action
) -> None:
    pk = client_for(annotator_user).post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    api = client_for(users(owner, other_researcher, annotator_user)[who])
    if action == "read":
        response = api.get(f"/api/assignments/{pk}/")
    else:
        body = {"submit": {"answers": ANSWERS}, "skip": {"reason": "r"}, "release": {}}[action]
        response = api.post(f"/api/assignments/{pk}/{action}/", body, format="json")
    assert response.status_code == expected
    status = Assignment.objects.get(pk=pk).status
    if expected != 200:
        assert status == "leased" and not Annotation.objects.exists()
    else:
        assert (
            status
            == {"submit": "submitted", "skip": "skipped", "release": "expired", "read": "leased"}[action]
        )


@pytest.mark.parametrize("who", ["owner", "other", "annotator"])
def test_my_assignments_lists_only_my_own(enrolled, owner, other_researcher, annotator_user, who) -> None:
    client_for(annotator_user).post(f"/api/studies/{enrolled.pk}/assignments/next/")
    listing = client_for(users(owner, other_researcher, annotator_user)[who]).get("/api/assignments/").json()
    assert listing["count"] == (1 if who == "annotator" else 0)


def test_claim_and_submit_query_counts(enrolled, annotator_user, django_assert_max_num_queries) -> None:
    api = client_for(annotator_user)
    # Constant whatever the study size: claim 10 (incl. 2 savepoints and the task) plus one when the
    # annotator's start on the item ring lies above every item (the scan wraps round), submit 9.
    with django_assert_max_num_queries(11):
        pk = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    with django_assert_max_num_queries(9):
        assert (
            api.post(f"/api/assignments/{pk}/submit/", {"answers": ANSWERS}, format="json").status_code == 200
        )


def test_with_a_real_token_the_annotator_comes_with_the_token_lookup(
    enrolled, annotator_user, django_assert_max_num_queries
) -> None:
    """Token authentication loads the account, its participant link and its annotator in one query,
    so on a claim the token costs nothing extra: claim 10 (+1 when the ring scan wraps); a submit,
    which needs no annotator lookup, is the session's 9 plus the token's one."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    token, _ = Token.objects.get_or_create(user=annotator_user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    with django_assert_max_num_queries(11):
        pk = api.post(f"/api/studies/{enrolled.pk}/assignments/next/").json()["id"]
    with django_assert_max_num_queries(10):
        assert (
            api.post(f"/api/assignments/{pk}/submit/", {"answers": ANSWERS}, format="json").status_code == 200
        )
