"""Unenrol and bulk enrol (issue 25, point 5), through the study page's forms."""

from __future__ import annotations

import pytest
from django.test import Client

from annotations.models import Annotation, Enrollment, Study, User
from annotations.services.studies import enrollment_add
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_unenrol_refuses_what_would_lose_data_and_who_may_not_change(owner: User, study: Study) -> None:
    with_answers = UserFactory.create(username="told", role="annotator")
    enrollment_add(study=study, user=with_answers, attributes={"region": "north"})
    page = _client(owner).post(f"/studies/{study.pk}/unenroll/", {"username": "told"}, follow=True)
    assert "told gave demographic answers to this study" in page.content.decode()
    assert Enrollment.objects.filter(study=study, user=with_answers).exists()
    missing = _client(owner).post(f"/studies/{study.pk}/unenroll/", {"username": "nobody"}, follow=True)
    assert "Not unenrolled: No such account is enrolled here." in missing.content.decode()
    reader = UserFactory.create(username="reader", role="researcher")
    other = _client(reader).post(f"/studies/{study.pk}/unenroll/", {"username": "told"})
    assert other.status_code == 404 and Enrollment.objects.filter(user=with_answers).exists()


def test_bulk_enrol_is_all_or_none_and_keeps_to_the_enrolment_rule(owner: User, study: Study) -> None:
    elsewhere = StudyFactory.create(owner=UserFactory.create(username="rival", role="researcher"))
    theirs = UserFactory.create(username="theirs", role="annotator")
    enrollment_add(study=elsewhere, user=theirs)  # another researcher's annotator: not ours to enrol
    mine = UserFactory.create(username="mine", role="annotator")
    enrollment_add(study=StudyFactory.create(owner=owner), user=mine)
    refused = _client(owner).post(
        f"/studies/{study.pk}/enroll/bulk/", {"usernames": "mine theirs", "pool": "crowd"}, follow=True
    )
    assert "Nobody was enrolled" in refused.content.decode() and "theirs" in refused.content.decode()
    assert not Enrollment.objects.filter(study=study).exists()
    done = _client(owner).post(f"/studies/{study.pk}/enroll/bulk/", {"usernames": "mine", "pool": "expert"})
    assert done.status_code == 302 and Enrollment.objects.get(study=study).pool == "expert"
    assert Annotation.objects.count() == 0
