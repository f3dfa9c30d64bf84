"""Unenrol and bulk enrol through the API (issue 25, point 5): the same services and rules as the People
tab, DRF permissions as the other study endpoints, and an unenrol that never says whether an account
exists outside the study."""

from __future__ import annotations

from typing import Any

import pytest

from annotations.models import Assignment, Enrollment, Study, User
from annotations.services.studies import annotator_for_user, enrollment_add
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def _unenrol(user: User | None, study: Study, username: str) -> Any:
    return client_for(user).post(
        f"/api/studies/{study.pk}/enrollments/unenroll/", {"username": username}, format="json"
    )


def test_unenrol_stops_new_items_and_returns_held_ones(owner: User, study: Study) -> None:
    worker = UserFactory.create(username="worker", role="annotator")
    enrollment_add(study=study, user=worker)
    item = ItemFactory.create(study=study)
    Assignment.objects.create(
        study=study, item=item, annotator=annotator_for_user(user=worker), status=Assignment.Status.LEASED
    )
    response = _unenrol(owner, study, "worker")
    assert response.status_code == 200, response.content
    assert response.json() == {"username": "worker", "released": 1}
    assert not Enrollment.objects.filter(study=study, user=worker).exists()
    assert Assignment.objects.get(item=item).status == Assignment.Status.EXPIRED
    again = _unenrol(owner, study, "worker")
    assert again.status_code == 404


def test_unenrol_says_the_same_for_an_account_elsewhere_and_for_none(owner: User, study: Study) -> None:
    elsewhere = UserFactory.create(username="elsewhere", role="annotator")
    enrollment_add(study=StudyFactory.create(owner=owner), user=elsewhere)
    exists = _unenrol(owner, study, "elsewhere")
    missing = _unenrol(owner, study, "nobody-at-all")
    assert exists.status_code == missing.status_code == 404
    assert exists.json() == missing.json()
    assert "no such account is enrolled in this study" in str(exists.json())
    assert Enrollment.objects.filter(user=elsewhere).count() == 1


def test_unenrol_refuses_what_would_lose_data(owner: User, study: Study) -> None:
    told = UserFactory.create(username="told", role="annotator")
    enrollment_add(study=study, user=told, attributes={"region": "north"})
    response = _unenrol(owner, study, "told")
    assert response.status_code == 409 and "gave demographic answers" in str(response.json())
    assert Enrollment.objects.filter(study=study, user=told).exists()


@pytest.mark.parametrize(("role", "status"), [("other", 404), ("annotator", 403), ("anonymous", 401)])
def test_only_who_may_change_the_study_unenrols_or_enrols(
    owner: User, other_researcher: User, annotator_user: User, study: Study, role: str, status: int
) -> None:
    enrollment_add(study=study, user=annotator_user)
    mine = UserFactory.create(username="mine", role="annotator")
    enrollment_add(study=StudyFactory.create(owner=owner), user=mine)
    who = {"other": other_researcher, "annotator": annotator_user, "anonymous": None}[role]
    client = client_for(who)
    answers = [
        _unenrol(who, study, annotator_user.username),
        client.post(f"/api/studies/{study.pk}/enrollments/pool/", {"pool": "crowd"}, format="json"),
        client.post(
            f"/api/studies/{study.pk}/enrollments/bulk/",
            {"usernames": ["mine"], "pool": "crowd"},
            format="json",
        ),
    ]
    assert [a.status_code for a in answers] == [status] * 3
    assert sorted(Enrollment.objects.filter(study=study).values_list("user__username", flat=True)) == [
        annotator_user.username
    ]


def test_enrol_by_pool_takes_the_researchers_own_annotators_of_that_pool(owner: User, study: Study) -> None:
    earlier = StudyFactory.create(owner=owner)
    crowd = UserFactory.create(username="crowd-one", role="annotator")
    expert = UserFactory.create(username="expert-one", role="annotator")
    enrollment_add(study=earlier, user=crowd)
    enrollment_add(study=earlier, user=expert, pool="expert")
    stranger = UserFactory.create(username="stranger", role="annotator")
    enrollment_add(
        study=StudyFactory.create(owner=UserFactory.create(role="researcher")), user=stranger, pool="expert"
    )
    response = client_for(owner).post(
        f"/api/studies/{study.pk}/enrollments/pool/", {"pool": "expert"}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["count"] == 1 and [e["username"] for e in body["enrolled"]] == ["expert-one"]
    assert body["enrolled"][0]["pool"] == "expert"
    again = client_for(owner).post(
        f"/api/studies/{study.pk}/enrollments/pool/", {"pool": "expert"}, format="json"
    )
    assert again.status_code == 201 and again.json()["count"] == 0
    bad = client_for(owner).post(f"/api/studies/{study.pk}/enrollments/pool/", {"pool": "vip"}, format="json")
    assert bad.status_code == 400 and "pool" in str(bad.json()) and "vip" in str(bad.json())


def test_bulk_enrol_by_name_is_all_or_none(owner: User, study: Study) -> None:
    mine = UserFactory.create(username="mine", role="annotator")
    enrollment_add(study=StudyFactory.create(owner=owner), user=mine)
    theirs = UserFactory.create(username="theirs", role="annotator")
    enrollment_add(study=StudyFactory.create(owner=UserFactory.create(role="researcher")), user=theirs)
    url = f"/api/studies/{study.pk}/enrollments/bulk/"
    refused = client_for(owner).post(url, {"usernames": ["mine", "theirs"], "pool": "crowd"}, format="json")
    assert refused.status_code == 400 and "nobody was enrolled" in str(refused.json())
    assert not Enrollment.objects.filter(study=study).exists()
    done = client_for(owner).post(url, {"usernames": ["mine"], "pool": "expert"}, format="json")
    assert done.status_code == 201 and done.json()["count"] == 1
    assert Enrollment.objects.get(study=study).pool == "expert"


def test_the_schema_documents_the_enrolment_endpoints(owner: User) -> None:
    schema = client_for(owner).get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    for path in ("enrollments/unenroll/", "enrollments/pool/", "enrollments/bulk/"):
        assert f"/api/studies/{{id}}/{path}" in schema, path
    assert "UnenrollResult" in schema and "PoolEnrollResult" in schema
