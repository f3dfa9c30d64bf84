"""The labellers page (Issue 16, point 4): admins register, re-configure (a new version) and disable
machine labellers with the checks of ``manage.py register_labeller``; secrets never come back."""

from __future__ import annotations

import html

import pytest
from django.test import Client

from annotations.models import Annotator, Study, User
from common.errors import ValidationFailed
from labelling.services import labelling_job_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SECRET = "sk-live-0123456789abcdefWXYZ"


@pytest.fixture
def admin_user(db: None) -> User:
    return UserFactory.create(username="root", role="admin")


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_only_admins_may_open_or_post(owner: User, annotator_user: User) -> None:
    for user in (owner, annotator_user):
        client = _client(user)
        assert client.get("/labellers/").status_code == 403
        posted = client.post("/labellers/", {"name": "x", "kind": "colour", "config": ""})
        assert posted.status_code == 403
    assert not Annotator.objects.filter(kind="machine").exists()
    assert Client().get("/labellers/").status_code == 302  # to the sign-in page


def test_register_with_the_commands_checks(admin_user: User) -> None:
    client = _client(admin_user)
    done = client.post(
        "/labellers/", {"name": "colour-rule", "kind": "colour", "config": "max_side: 64"}, follow=True
    )
    annotator = Annotator.objects.get(name="colour-rule")
    assert annotator.config == {"max_side": 64, "kind": "colour"} and annotator.version
    page = done.content.decode()
    assert f"Registered colour-rule version {annotator.version}." in page and "<td>colour-rule</td>" in page
    for config, message in [
        ("- a\n- b", "must hold a mapping of settings"),
        ("key: [unclosed", "is not YAML or JSON"),
    ]:
        refused = client.post("/labellers/", {"name": "other", "kind": "colour", "config": config})
        assert refused.status_code == 200 and message in refused.content.decode()
    unknown = client.post("/labellers/", {"name": "other", "kind": "os.system", "config": ""})
    assert "Select a valid choice" in unknown.content.decode()
    clash = client.post(
        "/labellers/",
        {"name": "colour-rule", "kind": "colour", "config": "max_side: 32", "version": annotator.version},
    )
    assert "exists with another configuration; give a new version" in clash.content.decode()
    assert list(Annotator.objects.filter(kind="machine").values_list("name", flat=True)) == ["colour-rule"]


def test_a_new_version_keeps_secrets_left_masked_and_never_shows_them(admin_user: User) -> None:
    client = _client(admin_user)
    config = f"model: qwen2-vl\nbase_url: http://127.0.0.1:8001/v1\napi_key: {SECRET}\ntemperature: 0\n"
    client.post("/labellers/", {"name": "vlm-audit", "kind": "vlm", "config": config, "version": "1"})
    first = Annotator.objects.get(name="vlm-audit", version="1")
    assert first.config["api_key"] == SECRET
    listing = client.get("/labellers/").content.decode()
    edit = client.get(f"/labellers/{first.pk}/").content.decode()
    assert SECRET not in listing and SECRET not in edit and "WXYZ" in edit  # masked, last four shown
    shown = edit[edit.index("<textarea") : edit.index("</textarea>")].split(">", 1)[1]
    changed = html.unescape(shown).replace("temperature: 0", "temperature: 0.5")
    saved = client.post(
        f"/labellers/{first.pk}/",
        {"name": "vlm-audit", "kind": "vlm", "config": changed, "version": "2"},
        follow=True,
    )
    assert (
        "Registered vlm-audit version 2." in saved.content.decode() and SECRET not in saved.content.decode()
    )
    second = Annotator.objects.get(name="vlm-audit", version="2")
    assert second.config["api_key"] == SECRET and second.config["temperature"] == 0.5
    first.refresh_from_db()
    assert first.config["temperature"] == 0  # the old version is untouched
    replaced = changed.replace(
        next(line for line in changed.splitlines() if "api_key" in line), "api_key: new"
    )
    client.post(
        f"/labellers/{first.pk}/", {"name": "vlm-audit", "kind": "vlm", "config": replaced, "version": "3"}
    )
    assert Annotator.objects.get(name="vlm-audit", version="3").config["api_key"] == "new"


def test_a_disabled_labeller_is_offered_for_no_new_job(admin_user: User, owner: User, study: Study) -> None:
    client = _client(admin_user)
    client.post("/labellers/", {"name": "colour-rule", "kind": "colour", "config": ""})
    annotator = Annotator.objects.get(name="colour-rule")
    done = client.post(f"/labellers/{annotator.pk}/state/", {"disabled": "1"}, follow=True)
    annotator.refresh_from_db()
    assert annotator.disabled and "disabled: it is offered for no new job" in done.content.decode()
    labelling = _client(owner).get(f"/studies/{study.pk}/labelling/").content.decode()
    assert f'<option value="{annotator.pk}"' not in labelling
    with pytest.raises(ValidationFailed, match="is disabled"):
        labelling_job_create(study=study, annotator=annotator, user=owner, enqueue=False)
    refused = _client(owner).post(f"/studies/{study.pk}/labelling/", {"annotator": annotator.pk, "seed": 0})
    assert "Select a valid choice" in refused.content.decode()
    client.post(f"/labellers/{annotator.pk}/state/", {"disabled": "0"})
    annotator.refresh_from_db()
    assert not annotator.disabled
    assert (
        f'<option value="{annotator.pk}"'
        in _client(owner).get(f"/studies/{study.pk}/labelling/").content.decode()
    )
