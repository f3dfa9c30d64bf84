"""Usernames cannot pass for someone else's (docs/security.md, "Usernames"): NFKC-normalised, and a name
that mixes scripts with look-alike letters, or looks like an existing name, is refused wherever accounts
are made: the admin's add and change forms, the admin's CSV import, ``createsuperuser``/``create_user``
and the demo."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotations.models import User
from common.usernames import username_skeleton
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CYRILLIC_A = "\u0430"
LOOKALIKES = [
    f"{CYRILLIC_A}dmin",  # Cyrillic a + Latin "dmin": mixed scripts
    "\u0430\u0440\u0440",  # "арр", all Cyrillic: looks like the existing "app"
    "ADMIN",  # the same name in another case
    "\uff41\uff44\uff4d\uff49\uff4e",  # full-width "ａｄｍｉｎ": NFKC makes it "admin"
]


@pytest.fixture
def admin_client(db: None) -> Client:
    boss = UserFactory.create(username="admin", role="admin", is_staff=True, is_superuser=True)
    UserFactory.create(username="app", role="researcher")
    client = Client()
    client.force_login(boss)
    return client


def _add(client: Client, username: str) -> str:
    response = client.post(
        "/admin/annotations/user/add/",
        {
            "username": username,
            "password1": "a long passphrase 42",
            "password2": "a long passphrase 42",
            "usable_password": "true",
            "role": "annotator",
        },
    )
    return response.content.decode() if response.status_code == 200 else ""


def test_skeletons() -> None:
    assert username_skeleton("\u0440\u0430\u0443\u0440\u0430l") == username_skeleton("PayPal") == "paypal"
    assert username_skeleton("\uff41\uff44\uff4d\uff49\uff4e") == "admin"


@pytest.mark.parametrize("username", LOOKALIKES)
def test_the_admin_refuses_a_look_alike(admin_client, username) -> None:
    page = _add(admin_client, username)
    # Django's form says itself that a name differing only in case exists
    assert any(why in page for why in ("look-alike letters", "looks like an existing", "already exists"))
    assert User.objects.count() == 2


def test_the_admin_still_makes_ordinary_and_single_script_names(admin_client) -> None:
    assert _add(admin_client, "grace") == ""
    assert _add(admin_client, "\u0395\u03bb\u03b5\u03bd\u03b7") == ""  # "Ελενη", Greek only
    assert set(User.objects.values_list("username", flat=True)) == {
        "admin",
        "app",
        "grace",
        "\u0395\u03bb\u03b5\u03bd\u03b7",
    }


def test_renaming_into_a_look_alike_is_refused(admin_client) -> None:
    grace = UserFactory.create(username="grace", role="annotator")
    page = admin_client.post(
        f"/admin/annotations/user/{grace.pk}/change/",
        {
            "username": f"{CYRILLIC_A}pp",
            "role": "annotator",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00",
        },
    ).content.decode()
    assert "look-alike letters" in page or "looks like an existing username" in page
    grace.refresh_from_db()
    assert grace.username == "grace"


def test_the_csv_import_refuses_look_alikes_row_by_row(admin_client) -> None:
    text = "username,email,name\n" + "".join(
        f"{name},p{n}@example.org,Person {n}\n" for n, name in enumerate([*LOOKALIKES, "newbie", "NEWBIE"])
    )
    report = admin_client.post(
        "/admin/annotations/user/import-csv/", {"file": SimpleUploadedFile("people.csv", text.encode())}
    ).content.decode()
    assert "1 created, 5 refused" in report
    assert set(User.objects.values_list("username", flat=True)) == {"admin", "app", "newbie"}


def test_create_user_and_createsuperuser_refuse_look_alikes(admin_client, monkeypatch) -> None:
    with pytest.raises(ValidationError, match="look-alike letters"):
        User.objects.create_user(f"{CYRILLIC_A}pp2")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a long passphrase 42")
    with pytest.raises(CommandError, match="looks like an existing username"):
        call_command(
            "createsuperuser",
            "--noinput",
            "--username",
            "\uff41\uff50\uff50",
            "--email",
            "x@example.org",
            stdout=io.StringIO(),
        )
    assert User.objects.count() == 2
