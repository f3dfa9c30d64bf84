"""An API token ends with the account's recovery (third hardening round, M1; docs/api.md,
"Authentication"): a password change or reset, deactivation or a role change deletes the account's
tokens at once (every process, through the token's ``post_delete``), and a token expires
``WORKBENCH_API_TOKEN_DAYS`` after it was made. Every step goes through the routes a person takes, with
Django's test client; a sign-in's ``last_login`` stamp keeps the token and costs no query more."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.hashers import make_password
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotations.access import token_signs_in
from annotations.models import User
from tests.factories import UserFactory
from tests.shared_cache import web_node

pytestmark = pytest.mark.django_db

PASSWORD = "a long passphrase 42"
NEW_PASSWORD = "another long passphrase 77"
EXPIRED = "Token expired: make a new one on the API token page"


@pytest.fixture
def person() -> User:
    user = UserFactory.create(username="victim", email="victim@example.org", role="annotator")
    user.set_password(PASSWORD)
    user.save()
    return user


def token_for(username: str, password: str = PASSWORD) -> str:
    """A token as a script gets one: ``POST /api/auth/token/`` with the account's name and password."""
    answer = Client().post("/api/auth/token/", {"username": username, "password": password})
    assert answer.status_code == 200, answer.content
    return str(answer.json()["token"])


def me(key: str) -> int:
    return int(Client().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}").status_code)


def test_a_changed_password_ends_the_token_but_not_the_new_session(person) -> None:
    key = token_for("victim")
    assert me(key) == 200  # the token is in this process's lookup cache now
    person.set_password(NEW_PASSWORD)
    person.save()
    refused = Client().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}")
    assert refused.status_code == 401 and not Token.objects.filter(key=key).exists()
    browser = Client()  # the owner signs in with the new password: the session works
    signed = browser.post("/accounts/login/", {"username": "victim", "password": NEW_PASSWORD})
    assert signed.status_code == 302 and browser.get("/api/me/").status_code == 200
    assert me(token_for("victim", NEW_PASSWORD)) == 200  # the owner makes a new one


def test_an_unusable_password_ends_the_token_too(person) -> None:
    key = token_for("victim")
    person.set_unusable_password()
    person.save()
    assert me(key) == 401


def test_the_password_reset_flow_ends_the_token(
    person, django_capture_on_commit_callbacks, mailoutbox
) -> None:
    key = token_for("victim")
    assert me(key) == 200
    client = Client()
    with django_capture_on_commit_callbacks(execute=True):  # the mail task runs after the answer
        asked = client.post("/accounts/password_reset/", {"email": "victim@example.org"})
    assert asked.status_code == 302 and len(mailoutbox) == 1
    found = re.search(r"http://testserver(/accounts/reset/\S+/)", str(mailoutbox[0].body))
    assert found is not None
    form = client.get(found.group(1), follow=True)  # Django swaps the token for a session-held one
    assert form.status_code == 200 and "new_password1" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert done.status_code == 302 and done["Location"] == "/accounts/reset/done/"
    assert me(key) == 401
    assert me(token_for("victim", NEW_PASSWORD)) == 200


def test_the_admins_password_pages_end_the_token(admin_user, person) -> None:
    # The admin's own "Change password" page (staff change their own password there).
    admin_user.set_password(PASSWORD)
    admin_user.save()
    admin_key = token_for("boss")
    staff = Client()
    staff.force_login(admin_user)
    changed = staff.post(
        "/admin/password_change/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert changed.status_code == 302, changed.content.decode()
    assert me(admin_key) == 401
    # An admin setting another account's password (the user admin's password form).
    key = token_for("victim")
    staff.force_login(User.objects.get(pk=admin_user.pk))
    reset = staff.post(
        f"/admin/annotations/user/{person.pk}/password/",
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )
    assert reset.status_code == 302, reset.content.decode()
    assert me(key) == 401


def _admin_change_form(user: User, **changes: object) -> dict[str, object]:
    """The user admin's change form as the page posts it, with ``changes``."""
    joined = timezone.localtime(user.date_joined)
    data: dict[str, object] = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "role": user.role,
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        "initial-date_joined_0": joined.strftime("%Y-%m-%d"),
        "initial-date_joined_1": joined.strftime("%H:%M:%S"),
    }
    for flag in ("is_active", "is_staff", "is_superuser"):
        if getattr(user, flag):
            data[flag] = "on"
    data.update(changes)
    return {name: value for name, value in data.items() if value is not None}


def test_deactivation_in_the_admin_ends_the_token(admin_client, person) -> None:
    key = token_for("victim")
    assert me(key) == 200
    saved = admin_client.post(
        f"/admin/annotations/user/{person.pk}/change/", _admin_change_form(person, is_active=None)
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert not User.objects.get(pk=person.pk).is_active
    assert me(key) == 401 and not Token.objects.filter(user=person).exists()
    # Active again: the old token stays gone (the owner makes a new one).
    person.refresh_from_db()
    person.is_active = True
    person.save()
    assert me(key) == 401


def test_deactivation_by_a_save_ends_the_token(person) -> None:
    key = token_for("victim")
    assert me(key) == 200
    person.is_active = False
    person.save(update_fields=["is_active"])
    assert not Token.objects.filter(key=key).exists()
    person.is_active = True
    person.save()
    assert me(key) == 401


def test_a_role_change_in_the_admin_ends_the_token(admin_client, person) -> None:
    key = token_for("victim")
    saved = admin_client.post(
        f"/admin/annotations/user/{person.pk}/change/", _admin_change_form(person, role="researcher")
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert User.objects.get(pk=person.pk).role == "researcher"
    assert me(key) == 401


@pytest.mark.parametrize(
    ("field", "value"), [("role", "researcher"), ("is_staff", True), ("is_superuser", True)]
)
def test_a_role_change_by_a_save_ends_the_token(person, field: str, value: object) -> None:
    key = token_for("victim")
    assert me(key) == 200
    setattr(person, field, value)
    person.save()
    assert me(key) == 401


def test_a_sign_in_stamp_or_another_change_keeps_the_token(person) -> None:
    key = token_for("victim")
    assert me(key) == 200
    person.last_login = timezone.now()
    with CaptureQueriesContext(connection) as stamp:
        person.save(update_fields=["last_login"])
    # No read: a sign-in costs nothing more.
    assert [q["sql"].split()[0] for q in stamp.captured_queries] == ["UPDATE"]
    assert me(key) == 200
    browser = Client()  # a real sign-in (the stamp, the session) keeps it too
    signed = browser.post("/accounts/login/", {"username": "victim", "password": PASSWORD})
    assert signed.status_code == 302
    assert me(key) == 200
    person.refresh_from_db()
    person.email = "new@example.org"
    with CaptureQueriesContext(connection) as other:
        person.save()
    reads = [q["sql"] for q in other.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1  # the stored row, compared
    assert me(key) == 200 and Token.objects.filter(key=key).exists()


def test_a_password_hash_upgraded_at_sign_in_keeps_the_token(person, settings) -> None:
    """Django re-hashes an older hash at sign-in (``check_password``): no change of password."""
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
    person.password = make_password(PASSWORD, hasher="md5")
    person.save(update_fields=["password"])  # a hash set directly (an import): not a password change
    key = token_for("victim")  # the sign-in upgrades the hash
    assert User.objects.get(pk=person.pk).password.startswith("pbkdf2_sha256$")
    assert me(key) == 200


def test_a_token_expires_after_its_lifetime_and_a_new_one_replaces_it(person, settings) -> None:
    settings.WORKBENCH_API_TOKEN_DAYS = 30
    key = token_for("victim")
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(days=29, hours=23))
    assert me(key) == 200
    Token.objects.filter(key=key).update(created=timezone.now() - timedelta(days=30, seconds=1))
    old = Token.objects.get(key=key)
    from annotations.token_cache import token_cache_clear

    token_cache_clear()  # the 10 s a process keeps its lookup: as if they had passed
    refused = Client().get("/api/me/", HTTP_AUTHORIZATION=f"Token {key}")
    assert refused.status_code == 401 and EXPIRED in refused.json()["detail"]
    assert token_signs_in(f"Token {key}") is False  # nor does it count as signed in for upload limits
    # The API token page says when it was made and that it has expired, and makes a new one.
    browser = Client()
    browser.force_login(person)
    page = browser.get("/accounts/api-token/").content.decode()
    expired = old.created + timedelta(days=30)
    made, ended = f"{old.created:%Y-%m-%d %H:%M}", f"{expired:%Y-%m-%d %H:%M}"
    assert f"Made {made} UTC; <strong>expired {ended} UTC</strong>" in page
    assert "Make a new token" in page
    assert "password (changed or reset), deactivation of your account or a change of its role" in page
    made = browser.post("/accounts/api-token/", {"action": "create"}, follow=True).content.decode()
    new = Token.objects.get(user=person)
    assert new.key != key and new.key in made and "expires" in made and "Make a new token" not in made
    assert me(key) == 401 and me(new.key) == 200
    # The token endpoint does the same for a script.
    Token.objects.filter(key=new.key).update(created=timezone.now() - timedelta(days=31))
    token_cache_clear()
    assert me(new.key) == 401
    newest = token_for("victim")
    assert newest != new.key and me(newest) == 200


def test_the_token_page_shows_when_a_live_token_expires(person, settings) -> None:
    settings.WORKBENCH_API_TOKEN_DAYS = 7
    browser = Client()
    browser.force_login(person)
    page = browser.post("/accounts/api-token/", {"action": "create"}, follow=True).content.decode()
    token = Token.objects.get(user=person)
    expires = token.created + timedelta(days=7)
    assert f"Made {token.created:%Y-%m-%d %H:%M} UTC; expires {expires:%Y-%m-%d %H:%M} UTC." in page
    assert "A token lives 7 days after it is made" in page


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_another_process_refuses_the_token_at_once_after_a_password_change(shared_cache: str) -> None:
    """A web node (its own process) holds the token in its lookup cache; the password is changed in
    this process: the node refuses the token at its next call (the shared generation), as it does a
    role change's."""
    import urllib.error
    import urllib.request

    def call(node: str, key: str) -> int:
        request = urllib.request.Request(f"{node}/api/me/", headers={"Authorization": f"Token {key}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    user = UserFactory.create(username="victim", role="annotator")
    other = UserFactory.create(username="promoted", role="annotator")
    key, other_key = Token.objects.create(user=user).key, Token.objects.create(user=other).key
    with web_node({"WORKBENCH_CACHE_URL": shared_cache}) as node:
        assert call(node, key) == 200 and call(node, other_key) == 200  # both cached on the node
        user.set_password(NEW_PASSWORD)
        user.save()
        assert call(node, key) == 401
        other.role = "researcher"
        other.save()
        assert call(node, other_key) == 401
