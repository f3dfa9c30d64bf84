"""Machine labeller secrets (issue 15, point 2; docs/security.md, "Machine labeller secrets").

A labeller's configuration may hold API keys (``extra_headers``, ``api_key``) and internal base URLs.
Researchers see its name, kind, version and model only; admins see the rest with every secret masked;
no API answer, page, export or command output carries a secret; the labeller itself still reads them.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from annotations.models import Annotation, Annotator, User
from common.chat_client import ChatSettings
from common.redaction import MASK
from labelling.services import labeller_build
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.helpers import client_for, streamed

pytestmark = pytest.mark.django_db

HEADER_KEY = "sk-live-header-0123456789abcdefWXYZ"
API_KEY = "sk-live-apikey-9876543210fedcbaQRST"
URL_PASSWORD = "hunter2-url-password"
INTERNAL = "10.20.30.40:8000"
CONFIG = {
    "kind": "vlm",
    "base_url": f"http://bot:{URL_PASSWORD}@{INTERNAL}/v1",
    "model": "qwen2-vl-7b",
    "api_key_env": "WORKBENCH_LABELLER_KEY_VLM",
    "api_key": API_KEY,
    "extra_headers": {"X-Api-Key": HEADER_KEY, "X-Team": "audit"},
    "max_tokens": 512,
    "temperature": 0.0,
}
SECRETS = (HEADER_KEY, API_KEY, URL_PASSWORD)


@pytest.fixture(autouse=True)
def _internal_host_allowed(settings) -> None:
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1", INTERNAL.split(":")[0]]


@pytest.fixture
def labeller() -> Annotator:
    return Annotator.objects.create(kind=Annotator.Kind.MACHINE, name="vlm-audit", version="3", config=CONFIG)


@pytest.fixture
def admin() -> User:
    return UserFactory.create(username="root", role=User.Role.ADMIN, is_superuser=True, is_staff=True)


def assert_no_secret(body: bytes | str) -> None:
    text = body.decode() if isinstance(body, bytes) else body
    for secret in SECRETS:
        assert secret not in text


def test_researchers_see_name_kind_version_and_model_only(labeller) -> None:
    researcher = client_for(UserFactory.create(username="res"))
    listed = researcher.get("/api/annotators/", {"kind": "machine"})
    one = researcher.get(f"/api/annotators/{labeller.pk}/")
    for response in (listed, one):
        assert response.status_code == 200
        assert_no_secret(response.content)
        assert (
            INTERNAL not in response.content.decode()
            and "WORKBENCH_LABELLER_KEY_VLM" not in response.content.decode()
        )
    body = one.json()
    assert "config" not in body
    assert {key: body[key] for key in ("name", "kind", "version", "labeller_kind", "model")} == {
        "name": "vlm-audit",
        "kind": "machine",
        "version": "3",
        "labeller_kind": "vlm",
        "model": "qwen2-vl-7b",
    }


def test_admins_see_the_configuration_with_secrets_masked(labeller, admin) -> None:
    response = client_for(admin).get(f"/api/annotators/{labeller.pk}/")
    assert_no_secret(response.content)
    config = response.json()["config"]
    assert config["api_key"] == f"{MASK}QRST"
    assert config["extra_headers"] == {"X-Api-Key": f"{MASK}WXYZ", "X-Team": MASK}
    assert config["base_url"] == f"http://bot:{MASK}@{INTERNAL}/v1"
    # What is not secret stays readable, including the name of the key's environment variable.
    assert (config["api_key_env"], config["max_tokens"], config["model"]) == (
        "WORKBENCH_LABELLER_KEY_VLM",
        512,
        "qwen2-vl-7b",
    )


def test_the_admin_site_masks_secrets(labeller, admin) -> None:
    client = Client()
    client.force_login(admin)
    listing = client.get("/admin/annotations/annotator/")
    change = client.get(f"/admin/annotations/annotator/{labeller.pk}/change/")
    assert listing.status_code == change.status_code == 200
    assert_no_secret(listing.content)
    assert_no_secret(change.content)
    assert f"{MASK}WXYZ" in change.content.decode()


def test_exports_carry_kind_and_model_only(labeller) -> None:
    owner = UserFactory.create(username="owner")
    study = StudyFactory.create(owner=owner)
    item = ItemFactory.create(study=study, external_id="i1")
    Annotation.objects.create(study=study, item=item, annotator=labeller, question_key="gender", value="male")
    api = client_for(owner)
    body = b"".join(streamed(api.get(f"/api/studies/{study.pk}/export/jsonl/"))).decode()
    assert_no_secret(body)
    assert INTERNAL not in body
    record = next(
        json.loads(line) for line in body.splitlines() if '"annotator"' in line and "vlm-audit" in line
    )
    assert record["config"] == {"kind": "vlm", "model": "qwen2-vl-7b"}
    csv_body = b"".join(streamed(api.get(f"/api/studies/{study.pk}/export/csv/"))).decode()
    assert_no_secret(csv_body)


def test_register_labeller_prints_no_secret_and_the_labeller_reads_them(tmp_path) -> None:
    path = tmp_path / "vlm.json"
    path.write_text(json.dumps({key: value for key, value in CONFIG.items() if key != "kind"}))
    out = io.StringIO()
    call_command("register_labeller", "--name", "vlm-cli", "--kind", "vlm", "--config", str(path), stdout=out)
    assert_no_secret(out.getvalue())
    assert f"{MASK}WXYZ" in out.getvalue()
    annotator = Annotator.objects.get(name="vlm-cli")
    labeller = labeller_build(annotator)
    assert labeller.settings.extra_headers["X-Api-Key"] == HEADER_KEY  # type: ignore[attr-defined]
    assert labeller.settings.base_url == CONFIG["base_url"]  # type: ignore[attr-defined]


def test_chat_settings_keep_headers_out_of_logs() -> None:
    settings = ChatSettings.from_config(CONFIG)
    assert settings.extra_headers["X-Api-Key"] == HEADER_KEY
    assert_no_secret(repr(settings))
    assert f"{MASK}WXYZ" in repr(settings) and "qwen2-vl-7b" in repr(settings)
