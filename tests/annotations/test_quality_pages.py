"""Quality control through pages, the REST API and commands; who may do what."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from annotations.models import Annotator, AnnotatorExclusion, Assignment, ConsensusLabel, Item, Study
from annotations.selectors.controls import quality_settings
from annotations.services.assignment import assignment_submit
from annotations.services.consensus import consensus_compute
from annotations.services.controls import control_mark
from annotations.services.studies import enrollment_add
from tests.factories import ItemFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def person(study: Study, name: str) -> Annotator:
    user = UserFactory.create(username=name, role="annotator")
    enrollment_add(study=study, user=user)
    return user.annotator


def submit(study: Study, annotator: Annotator, item: Item, gender: str, seconds: float = 5) -> Assignment:
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator,
        status="leased",
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )
    return assignment_submit(
        assignment=assignment,
        answers={"gender": {"value": gender}, "attributes": {"value": ["hat"]}},
        time_spent_ms=int(seconds * 1000),
    )


@pytest.fixture
def world(study):
    real = [ItemFactory.create(study=study, external_id=f"real-{i}") for i in range(2)]
    check = ItemFactory.create(study=study, external_id="check")
    control_mark(study=study, item=check, kind="attention", answers={"gender": "male"}, note="Select 'male'.")
    a, b, c = person(study, "a"), person(study, "b"), person(study, "c")
    for annotator, genders in (
        (a, ["female", "female", "male"]),
        (b, ["female", "female", "male"]),
        (c, ["male", "male", "female"]),
    ):
        for item, gender in zip([*real, check], genders, strict=True):
            submit(study, annotator, item, gender)
    consensus_compute(study=study, question="gender")
    return {"study": study, "real": real, "check": check, "a": a, "b": b, "c": c}


ROLES = ["owner", "other", "annotator", "anonymous"]


def _user(role: str, study: Study, other_researcher, annotator_user):
    """The account of a role; the annotator is enrolled in the study (the case where 403 is due)."""
    enrollment_add(study=study, user=annotator_user)
    return {"owner": study.owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}[
        role
    ]


class TestPages:
    def test_progress_page_shows_flags_and_the_exclude_form(self, world) -> None:
        study = world["study"]
        page = login(study.owner).get(f"/studies/{study.pk}/progress/")
        html = page.content.decode()
        assert page.status_code == 200
        assert f'id="quality-{world["c"].pk}" class="flagged"' in html
        assert "failed 1 attention check" in html
        # excluding is a secondary action, a second step: the page that asks for the reason
        exclude = f"/studies/{study.pk}/annotators/{world['c'].pk}/exclude/"
        assert f'<a class="button secondary" href="{exclude}">Exclude c…</a>' in html
        confirm = login(study.owner).get(exclude).content.decode()
        assert "Reason for excluding c" in confirm and "stop counting" in confirm
        assert not AnnotatorExclusion.objects.exists()

    def test_exclude_and_reinstate_through_the_page(self, world) -> None:
        study, c = world["study"], world["c"]
        client = login(study.owner)
        item = world["real"][0]
        assert ConsensusLabel.objects.get(item=item, question_key="gender").value == "female"
        refused = client.post(f"/studies/{study.pk}/annotators/{c.pk}/exclude/", {"reason": ""})
        assert refused.status_code == 400
        assert "a reason is required" in refused.content.decode() and not AnnotatorExclusion.objects.exists()
        response = client.post(
            f"/studies/{study.pk}/annotators/{c.pk}/exclude/", {"reason": "failed the check"}, follow=True
        )
        assert "is excluded" in response.content.decode()
        row = AnnotatorExclusion.objects.get()
        assert (row.annotator, row.excluded_by, row.reason) == (c, study.owner, "failed the check")
        html = client.get(f"/studies/{study.pk}/progress/").content.decode()
        assert "Reinstate c" in html and "excluded by owner" in html
        client.post(f"/studies/{study.pk}/annotators/{c.pk}/reinstate/", {"note": "ok after all"})
        row.refresh_from_db()
        assert row.reinstated_by == study.owner and row.reinstate_note == "ok after all"
        quality_page = client.get(f"/studies/{study.pk}/quality/").content.decode()
        assert "failed the check" in quality_page and "ok after all" in quality_page

    @pytest.mark.parametrize("role", ROLES)
    def test_who_may_exclude(self, world, role, other_researcher, annotator_user) -> None:
        study, c = world["study"], world["c"]
        user = _user(role, study, other_researcher, annotator_user)
        response = login(user).post(f"/studies/{study.pk}/annotators/{c.pk}/exclude/", {"reason": "x"})
        expected = {"owner": 302, "other": 404, "annotator": 403, "anonymous": 302}[role]
        assert response.status_code == expected
        assert AnnotatorExclusion.objects.exists() == (role == "owner")
        if role == "anonymous":
            assert "/accounts/login/" in response["Location"]

    @pytest.mark.parametrize("role", ROLES)
    def test_who_sees_the_quality_pages(self, world, role, other_researcher, annotator_user) -> None:
        study = world["study"]
        user = _user(role, study, other_researcher, annotator_user)
        client = login(user)
        for url in (
            f"/studies/{study.pk}/quality/",
            f"/studies/{study.pk}/quality.json",
            f"/studies/{study.pk}/items/{world['check'].pk}/control/",
        ):
            status = client.get(url).status_code
            assert status == {"owner": 200, "other": 404, "annotator": 403, "anonymous": 302}[role], url

    def test_mark_and_unmark_on_the_item_control_page(self, world) -> None:
        study = world["study"]
        item = world["real"][1]
        client = login(study.owner)
        page = client.get(f"/studies/{study.pk}/items/{item.pk}/control/")
        assert page.status_code == 200 and 'name="q-gender"' in page.content.decode()
        assert 'name="q-boxes"' not in page.content.decode()
        bad = client.post(
            f"/studies/{study.pk}/items/{item.pk}/control/", {"kind": "gold", "q-colour": "plaid"}
        )
        assert bad.status_code == 400 and "is not a colour" in bad.content.decode()
        item.refresh_from_db()
        assert item.control_kind == ""
        client.post(
            f"/studies/{study.pk}/items/{item.pk}/control/",
            {"kind": "gold", "q-gender": "female", "q-smiling": "1", "note": ""},
        )
        item.refresh_from_db()
        assert item.control_kind == "gold" and item.control_answers == {"gender": "female", "smiling": 1}
        items_page = client.get(f"/studies/{study.pk}/items/").content.decode()
        assert "edit control" in items_page and "mark as control" in items_page
        client.post(f"/studies/{study.pk}/items/{item.pk}/control/remove/", {"next": "items"})
        item.refresh_from_db()
        assert item.control_kind == "" and item.control_answers == {}

    def test_settings_and_import_on_the_quality_page(self, world) -> None:
        study = world["study"]
        client = login(study.owner)
        data = {
            "control_rate": "0.2",
            "qualification_items": "2",
            "qualification_min_accuracy": "0.8",
            "min_gold_accuracy": "0.7",
            "max_attention_failures": "0",
            "loo_margin": "0.2",
            "loo_min_n": "10",
            "min_median_seconds": "3",
            "max_straight_run": "10",
            "straight_margin": "0.3",
            "straight_dominant_share": "0.9",
        }
        client.post(f"/studies/{study.pk}/quality/", data)
        study.refresh_from_db()
        assert (
            quality_settings(study).control_rate == 0.2 and quality_settings(study).qualification_items == 2
        )
        bad = client.post(f"/studies/{study.pk}/quality/", {**data, "control_rate": "0.9"})
        assert bad.status_code == 200 and "Settings not saved" in bad.content.decode()
        study.refresh_from_db()
        assert quality_settings(study).control_rate == 0.2
        upload = SimpleUploadedFile(
            "gold.csv", b"external_id,gender\nreal-0,female\n", content_type="text/csv"
        )
        client.post(f"/studies/{study.pk}/controls/import/", {"file": upload})
        assert Item.objects.get(external_id="real-0").control_kind == "gold"


class TestApi:
    def test_report_exclusion_and_settings(self, world) -> None:
        study, c = world["study"], world["c"]
        api = client_for(study.owner)
        report = api.get(f"/api/studies/{study.pk}/quality/").json()
        row = next(r for r in report["annotators"] if r["annotator"] == "c")
        assert row["attention"] == {"passed": 0, "failed": 1} and row["flags"][0]["code"] == "attention"
        created = api.post(
            f"/api/studies/{study.pk}/exclusions/", {"annotator": c.pk, "reason": "spam"}, format="json"
        )
        assert created.status_code == 201 and created.json()["active"] is True
        again = api.post(
            f"/api/studies/{study.pk}/exclusions/", {"annotator": c.pk, "reason": "spam"}, format="json"
        )
        assert again.status_code == 409
        reinstated = api.post(
            f"/api/studies/{study.pk}/exclusions/{c.pk}/reinstate/", {"note": "fine"}, format="json"
        )
        assert reinstated.status_code == 200 and reinstated.json()["reinstated_by"] == "owner"
        history = api.get(f"/api/studies/{study.pk}/exclusions/").json()
        assert len(history) == 1 and history[0]["active"] is False and history[0]["excluded_by"] == "owner"
        settings = api.patch(
            f"/api/studies/{study.pk}/quality/settings/", {"control_rate": 0.25}, format="json"
        )
        assert settings.status_code == 200 and settings.json()["control_rate"] == 0.25
        assert (
            api.patch(
                f"/api/studies/{study.pk}/quality/settings/", {"control_rate": 2}, format="json"
            ).status_code
            == 400
        )

    def test_item_control_and_import(self, world) -> None:
        study = world["study"]
        item = world["real"][0]
        api = client_for(study.owner)
        bad = api.put(
            f"/api/items/{item.pk}/control/", {"kind": "gold", "answers": {"gender": "robot"}}, format="json"
        )
        assert bad.status_code == 400 and "gender" in bad.json()["errors"]
        done = api.put(
            f"/api/items/{item.pk}/control/", {"kind": "gold", "answers": {"gender": "male"}}, format="json"
        )
        assert done.status_code == 200 and done.json()["control_answers"] == {"gender": "male"}
        listed = api.get(f"/api/items/?study={study.pk}&control_kind=gold").json()
        assert [entry["id"] for entry in listed["results"]] == [item.pk]
        assert api.delete(f"/api/items/{item.pk}/control/").json()["control_kind"] == ""
        upload = SimpleUploadedFile(
            "gold.jsonl", json.dumps({"external_id": "real-1", "gender": "female"}).encode()
        )
        imported = api.post(f"/api/studies/{study.pk}/controls/import/", {"file": upload}, format="multipart")
        assert imported.status_code == 201 and imported.json()["marked"] == 1

    @pytest.mark.parametrize("role", ROLES)
    def test_permission_matrix(self, world, role, other_researcher, annotator_user) -> None:
        study, c, item = world["study"], world["c"], world["real"][0]
        api = client_for(_user(role, study, other_researcher, annotator_user))
        calls = [
            api.get(f"/api/studies/{study.pk}/quality/"),
            api.get(f"/api/studies/{study.pk}/quality/settings/"),
            api.patch(f"/api/studies/{study.pk}/quality/settings/", {"control_rate": 0.3}, format="json"),
            api.post(
                f"/api/studies/{study.pk}/exclusions/", {"annotator": c.pk, "reason": "x"}, format="json"
            ),
            api.put(
                f"/api/items/{item.pk}/control/",
                {"kind": "gold", "answers": {"gender": "male"}},
                format="json",
            ),
        ]
        codes = [call.status_code for call in calls]
        expected = {
            "owner": [200, 200, 200, 201, 200],
            "other": [404] * 5,
            "annotator": [403, 403, 403, 403, 404],
            "anonymous": [401] * 5,
        }[role]
        assert codes == expected
        if role != "owner":
            item.refresh_from_db()
            assert item.control_kind == "" and not AnnotatorExclusion.objects.exists()
            study.refresh_from_db()
            assert quality_settings(study).control_rate == 0.1


class TestCommands:
    def test_mark_gold_and_quality(self, world, tmp_path) -> None:
        study = world["study"]
        gold_file = tmp_path / "gold.csv"
        gold_file.write_text("external_id,gender,smiling\nreal-0,female,1\n")
        out = io.StringIO()
        call_command("mark_gold", str(study.pk), str(gold_file), stdout=out)
        assert json.loads(out.getvalue())["marked"] == 1
        assert Item.objects.get(external_id="real-0").control_answers == {"gender": "female", "smiling": 1}
        bad = tmp_path / "bad.csv"
        bad.write_text("external_id,gender\nreal-1,robot\n")
        with pytest.raises(CommandError, match="row 2"):
            call_command("mark_gold", str(study.pk), str(bad))
        out = io.StringIO()
        call_command("quality", str(study.pk), "--json", stdout=out)
        report = json.loads(out.getvalue())
        assert {row["annotator"] for row in report["annotators"]} == {"a", "b", "c"}
        assert report["controls"] == {"gold": 1, "attention": 1}
        out = io.StringIO()
        call_command(
            "quality", str(study.pk), "--exclude", "c", "--reason", "spam", "--as", "owner", stdout=out
        )
        assert "c [excluded]" in out.getvalue() and "failed 1 attention check" in out.getvalue()
        with pytest.raises(CommandError, match="already excluded"):
            call_command("quality", str(study.pk), "--exclude", "c", "--reason", "spam", "--as", "owner")
        call_command("quality", str(study.pk), "--reinstate", "c", "--as", "owner", stdout=io.StringIO())
        assert AnnotatorExclusion.objects.get().reinstated_at is not None
