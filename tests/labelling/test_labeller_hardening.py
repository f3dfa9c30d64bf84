"""Issue 24, M1: a staff account that is not an admin re-targeted a machine labeller (base_url to a
listener, ``api_key_env: DATABASE_URL``), and the next job sent the database URL as a bearer token
and the study's images there. Now: labellers are changed by app admins only; ``base_url`` passes the
outbound policy (common/outbound.py) on every save and again on the worker; ``api_key_env`` names a
``WORKBENCH_LABELLER_KEY_`` variable; a masked secret is never re-attached to a new target."""

from __future__ import annotations

import html
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotations.models import Annotator, User
from labelling.models import LabelAttempt, LabellingJob
from labelling.services import labeller_register, labelling_job_create, labelling_job_run
from tests.factories import StudyFactory, UserFactory
from tests.fixtures.chat_server import ChatServer, json_reply

pytestmark = pytest.mark.django_db

SECRET = "sk-live-0123456789abcdefWXYZ"
PROTOCOL = {
    "name": "Cups",
    "unit": "image",
    "questions": [{"key": "shape", "kind": "single", "prompt": "Shape?", "options": ["mug", "tumbler"]}],
}


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def app_admin(db: None) -> User:
    return UserFactory.create(username="root", role="admin")


@pytest.fixture
def vlm(settings) -> Annotator:
    return labeller_register(
        name="vlm-audit",
        kind="vlm",
        config={"base_url": "http://127.0.0.1:8001/v1", "model": "m", "api_key": SECRET},
        version="1",
    )


@pytest.mark.parametrize("role", ["annotator", "researcher"])
def test_a_staff_account_that_is_not_an_admin_cannot_change_a_labeller(role: str, vlm: Annotator) -> None:
    staff = UserFactory.create(username="staffer", role=role, is_staff=True)
    client = _client(staff)
    hostile = "base_url: http://127.0.0.1:9/v1\nmodel: m\napi_key_env: DATABASE_URL\n"
    for url in ("/labellers/", f"/labellers/{vlm.pk}/"):
        assert client.get(url).status_code == 403
        posted = client.post(url, {"name": "vlm-audit", "kind": "vlm", "config": hostile, "version": "2"})
        assert posted.status_code == 403
    assert client.post(f"/labellers/{vlm.pk}/state/", {"disabled": "1"}).status_code == 403
    assert list(Annotator.objects.filter(kind="machine").values_list("version", "disabled")) == [("1", False)]


def test_the_admin_site_changes_machine_labellers_for_app_admins_only(vlm: Annotator) -> None:
    from django.contrib.auth.models import Permission

    staff = UserFactory.create(username="staffer", role="researcher", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__endswith="_annotator"))
    client = _client(staff)
    change = f"/admin/annotations/annotator/{vlm.pk}/change/"
    posted = client.post(
        change, {"kind": "machine", "name": "renamed", "version": "9", "study_pool": "crowd"}
    )
    assert posted.status_code == 403, posted.status_code
    assert client.post(f"/admin/annotations/annotator/{vlm.pk}/delete/", {"post": "yes"}).status_code == 403
    vlm.refresh_from_db()
    assert (vlm.name, vlm.version) == ("vlm-audit", "1")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("base_url: http://10.0.0.5/v1\nmodel: m\n", "10.0.0.5, a loopback, private"),
        ("base_url: http://169.254.169.254/latest\nmodel: m\n", "169.254.169.254, a loopback"),
        ("base_url: http://[::1]:8000/v1\nmodel: m\n", "::1, a loopback"),
        ("base_url: file:///etc/passwd\nmodel: m\n", "must be https:// or http://"),
        ("base_url: http://127.0.0.1:9/v1\nmodel: m\napi_key_env: DATABASE_URL\n", "api_key_env must name"),
        ("base_url: http://127.0.0.1:9/v1\nmodel: m\napi_key_env: WORKBENCH_LABELLER_KEY_\n", "api_key_env"),
    ],
)
def test_an_admin_cannot_point_a_labeller_at_a_private_host_or_another_secret(
    app_admin: User, config: str, message: str
) -> None:
    page = _client(app_admin).post("/labellers/", {"name": "x", "kind": "vlm", "config": config})
    assert page.status_code == 200 and message in html.unescape(page.content.decode())
    path = io.StringIO(config)
    with pytest.raises(CommandError, match=message.split(",")[0].replace("[", r"\[")):
        from pathlib import Path
        from tempfile import TemporaryDirectory

        with TemporaryDirectory() as folder:
            file = Path(folder) / "c.yaml"
            file.write_text(path.getvalue())
            call_command("register_labeller", name="x", kind="vlm", config=file, stdout=io.StringIO())
    assert not Annotator.objects.filter(kind="machine").exists()


def test_a_host_name_is_resolved_and_its_private_address_refused_unless_allowed(settings, app_admin) -> None:
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = []
    page = _client(app_admin).post(
        "/labellers/", {"name": "x", "kind": "vlm", "config": "base_url: http://localhost:8000/v1\nmodel: m"}
    )
    assert "the host &#x27;localhost&#x27; is 127.0.0.1" in page.content.decode()
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = ["localhost"]
    _client(app_admin).post(
        "/labellers/", {"name": "x", "kind": "vlm", "config": "base_url: http://localhost:8000/v1\nmodel: m"}
    )
    assert Annotator.objects.filter(kind="machine", name="x").exists()


def test_a_masked_secret_is_not_kept_when_the_base_url_changes(app_admin: User, vlm: Annotator) -> None:
    client = _client(app_admin)
    edit = client.get(f"/labellers/{vlm.pk}/").content.decode()
    shown = html.unescape(edit[edit.index("<textarea") : edit.index("</textarea>")].split(">", 1)[1])
    assert SECRET not in shown and "WXYZ" in shown
    moved = shown.replace("127.0.0.1:8001", "127.0.0.1:9")
    refused = client.post(
        f"/labellers/{vlm.pk}/", {"name": "vlm-audit", "kind": "vlm", "config": moved, "version": "2"}
    )
    text = html.unescape(refused.content.decode())
    assert "stored secrets are not kept: type again api_key" in text
    assert not Annotator.objects.filter(name="vlm-audit", version="2").exists()
    retyped = "\n".join(
        "api_key: sk-new-key" if line.startswith("api_key:") else line for line in moved.splitlines()
    )
    client.post(
        f"/labellers/{vlm.pk}/", {"name": "vlm-audit", "kind": "vlm", "config": retyped, "version": "2"}
    )
    assert Annotator.objects.get(name="vlm-audit", version="2").config["api_key"] == "sk-new-key"
    # the same target keeps the masked secret, as before
    client.post(
        f"/labellers/{vlm.pk}/",
        {
            "name": "vlm-audit",
            "kind": "vlm",
            "config": shown.replace("model: m", "model: m2"),
            "version": "3",
        },
    )
    assert Annotator.objects.get(name="vlm-audit", version="3").config["api_key"] == SECRET


def _cups_study(owner: User):
    from annotations.interchange.item_import import item_add_files
    from tests.annotations.imagefiles import png_bytes

    study = StudyFactory.create(owner=owner, protocol=PROTOCOL)
    item_add_files(study=study, record={"external_id": "a", "file": "a.png"}, files={"a.png": png_bytes()})
    return study


def test_the_worker_checks_the_target_and_the_key_again_before_sending(
    settings, owner: User, monkeypatch
) -> None:
    """Rows stored before these rules (or a setting narrowed since): the job sends nothing."""
    monkeypatch.setenv("DATABASE_URL", "postgres://workbench:db-password@db/workbench")
    study = _cups_study(owner)
    with ChatServer() as server:
        server.responder = lambda body: json_reply({"shape": "mug"})
        stolen = Annotator.objects.create(
            kind="machine",
            name="old-row",
            version="1",
            config={"kind": "vlm", "base_url": server.base_url, "model": "m", "api_key_env": "DATABASE_URL"},
        )
        job = labelling_job_create(study=study, annotator=stolen, user=None, enqueue=False)
        done = labelling_job_run(job_id=job.pk, sleep=lambda s: None)
        assert done.status == LabellingJob.Status.FAILED and "api_key_env must name" in done.error
        good = labeller_register(
            name="vlm", kind="vlm", config={"base_url": server.base_url, "model": "m", "api_key_env": None}
        )
        settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = []  # the admin narrowed the policy since
        job = labelling_job_create(study=study, annotator=good, user=None, enqueue=False)
        done = labelling_job_run(job_id=job.pk, sleep=lambda s: None)
        assert done.status == LabellingJob.Status.FAILED and "127.0.0.1, a loopback" in done.error
        assert server.requests == []  # nothing reached the listener, no key, no image
        settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1"]
        job = labelling_job_create(study=study, annotator=good, user=None, enqueue=False)
        assert labelling_job_run(job_id=job.pk, sleep=lambda s: None).answered == 1
        assert len(server.requests) == 1 and not LabelAttempt.objects.filter(job=job).exists()


def test_the_chat_client_checks_the_host_before_each_request(settings) -> None:
    from common.chat_client import ChatClient, ChatError, ChatSettings

    with ChatServer() as server:
        client = ChatClient(ChatSettings(base_url=server.base_url, model="m", api_key_env=None))
        assert client.complete([{"role": "user", "content": "hi"}]).text == "{}"
        settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = []  # e.g. a DNS answer that changed since
        with pytest.raises(ChatError, match="refused: the host '127.0.0.1'"):
            client.complete([{"role": "user", "content": "hi"}])
        client.close()
        assert len(server.requests) == 1


def test_a_masked_url_password_is_not_stored_for_a_new_host(app_admin: User) -> None:
    labeller_register(
        name="vlm-url",
        kind="vlm",
        config={"base_url": "http://bot:hunter2-password@127.0.0.1:8001/v1", "model": "m"},
        version="1",
    )
    first = Annotator.objects.get(name="vlm-url")
    client = _client(app_admin)
    edit = client.get(f"/labellers/{first.pk}/").content.decode()
    shown = html.unescape(edit[edit.index("<textarea") : edit.index("</textarea>")].split(">", 1)[1])
    assert "hunter2" not in shown
    moved = shown.replace("127.0.0.1:8001", "127.0.0.1:9")
    refused = client.post(
        f"/labellers/{first.pk}/", {"name": "vlm-url", "kind": "vlm", "config": moved, "version": "2"}
    )
    assert "still holds the mask" in html.unescape(refused.content.decode())
    assert not Annotator.objects.filter(name="vlm-url", version="2").exists()
