"""Sign-in throttling on every login path (the sign-in page, the admin's, the API's token endpoint), by
account and by client address, and Argon2 password hashing with the upgrade of older hashes on sign-in.

Each test runs in its own transaction, so the failed attempts django-axes records never lock another
test out."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.hashers import Argon2PasswordHasher, make_password
from django.test import Client
from rest_framework.test import APIClient

from annotations.models import User
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
LIMIT = 10  # the documented default of WORKBENCH_LOGIN_FAILURE_LIMIT


def _page_login(client: Client, path: str, username: str, password: str, address: str = "10.0.0.1") -> int:
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address).status_code


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_a_sign_in_page_locks_an_account_out_after_repeated_failures(path) -> None:
    UserFactory.create(username="victim", role="admin", is_staff=True, is_superuser=True)
    client = Client()
    statuses = [_page_login(client, path, "victim", f"guess-{n}") for n in range(LIMIT - 1)]
    assert statuses == [200] * (LIMIT - 1)  # the form again, with its error
    locked = client.post(path, {"username": "victim", "password": "guess-last"}, REMOTE_ADDR="10.0.0.1")
    assert locked.status_code == 429
    # now even the right password is refused, from another address too (the account is locked)
    right = client.post(path, {"username": "victim", "password": PASSWORD}, REMOTE_ADDR="10.9.9.9")
    assert right.status_code == 429
    page = right.content.decode()
    assert "Too many failed sign-ins" in page and "15 minutes" in page
    assert right["Retry-After"] == "900"
    assert "_auth_user_id" not in client.session


def test_a_client_address_is_locked_out_whatever_account_it_tries() -> None:
    UserFactory.create(username="someone")
    client = Client()
    for n in range(LIMIT):
        _page_login(client, "/accounts/login/", f"name-{n}", "wrong", address="10.0.0.7")
    assert _page_login(client, "/accounts/login/", "someone", PASSWORD, address="10.0.0.7") == 429
    # another address signs in to the same account at once: only the address was locked
    assert _page_login(Client(), "/accounts/login/", "someone", PASSWORD, address="10.0.0.8") == 302


def test_the_api_token_endpoint_is_throttled_like_the_pages() -> None:
    UserFactory.create(username="owner")
    api = APIClient()
    for n in range(LIMIT - 1):
        response = api.post(
            "/api/auth/token/", {"username": "owner", "password": f"x{n}"}, REMOTE_ADDR="10.1.1.1"
        )
        assert response.status_code == 400
    locked = api.post("/api/auth/token/", {"username": "owner", "password": "x"}, REMOTE_ADDR="10.1.1.1")
    assert locked.status_code == 429 and "Too many failed sign-ins" in locked.json()["detail"]
    right = api.post("/api/auth/token/", {"username": "owner", "password": PASSWORD}, REMOTE_ADDR="10.1.1.2")
    assert right.status_code == 429 and "token" not in right.json()


def test_a_successful_sign_in_clears_earlier_failures() -> None:
    UserFactory.create(username="forgetful")
    client = Client()
    for _ in range(LIMIT - 1):
        _page_login(client, "/accounts/login/", "forgetful", "nope")
    assert _page_login(client, "/accounts/login/", "forgetful", PASSWORD) == 302
    client.post("/accounts/logout/")
    for _ in range(LIMIT - 1):
        assert _page_login(client, "/accounts/login/", "forgetful", "nope") == 200


def test_behind_a_trusted_proxy_the_forwarded_address_is_the_client(settings) -> None:
    settings.WORKBENCH_TRUSTED_PROXIES = 1
    UserFactory.create(username="someone")
    client = Client()
    for n in range(LIMIT):
        client.post(
            "/accounts/login/",
            {"username": f"n{n}", "password": "x"},
            REMOTE_ADDR="127.0.0.1",  # the proxy
            HTTP_X_FORWARDED_FOR=f"6.6.6.{n}, 203.0.113.5",  # left part forged by the client
        )
    same: dict[str, Any] = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.5"}
    other: dict[str, Any] = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.9"}
    form = {"username": "someone", "password": PASSWORD}
    assert client.post("/accounts/login/", form, **same).status_code == 429
    assert Client().post("/accounts/login/", form, **other).status_code == 302


def test_passwords_are_hashed_with_argon2_and_older_hashes_upgrade_on_sign_in(settings) -> None:
    from workbench import settings as production

    assert production.PASSWORD_HASHERS[0] == "common.sign_in.WorkbenchArgon2PasswordHasher"
    assert "django.contrib.auth.hashers.PBKDF2PasswordHasher" in production.PASSWORD_HASHERS
    settings.PASSWORD_HASHERS = production.PASSWORD_HASHERS  # the test suite's fast hasher, undone here
    old = UserFactory.create(username="veteran")
    old.password = str(make_password(PASSWORD, hasher="pbkdf2_sha256"))
    old.save(update_fields=["password"])
    assert _page_login(Client(), "/accounts/login/", "veteran", PASSWORD) == 302
    assert User.objects.get(username="veteran").password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$")
    new = User.objects.create_user(username="newcomer", password=PASSWORD)
    assert new.password.startswith("argon2$argon2id$")
    # an Argon2 hash made with Django's heavier default parameters verifies, and takes ours at sign-in
    heavy = UserFactory.create(username="heavy")
    django_argon2 = Argon2PasswordHasher()
    heavy.password = str(django_argon2.encode(PASSWORD, django_argon2.salt()))
    heavy.save(update_fields=["password"])
    assert "m=102400" in str(heavy.password)
    assert _page_login(Client(), "/accounts/login/", "heavy", PASSWORD) == 302
    assert "m=19456,t=2,p=1" in User.objects.get(username="heavy").password
