"""Bodies that are too large, or sent by someone who is not signed in, are refused from their headers,
before the server reads them: raw HTTP against a live server, declaring a body of a gigabyte and
sending only its first bytes. Were the body read (as Django's CSRF check did, parsing an anonymous
upload to a temporary file before the view could redirect to the sign-in page), no answer would come
before the socket's timeout."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.factories import StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db(transaction=True)

GIGABYTE = 1024**3
CSRF = "a" * 32


def _raw_post(
    url: str, path: str, *, length: int, headers: dict[str, str]
) -> tuple[int, dict[str, str], str]:
    """POST ``path`` declaring ``length`` bytes of a multipart body but sending only 1 KB; the status,
    headers and start of the body of the answer, which must come before the socket times out (60 s:
    generous for a busy machine; a server reading the body would wait for ever)."""
    parts = urlsplit(url)
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {parts.hostname}:{parts.port}",
        "Content-Type: multipart/form-data; boundary=xyz",
        f"Content-Length: {length}",
        *(f"{name}: {value}" for name, value in headers.items()),
        "",
        "",
    ]
    start = '--xyz\r\nContent-Disposition: form-data; name="file"; filename="m.csv"\r\n\r\n'
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall("\r\n".join(lines).encode() + start.encode() + b"x" * 1024)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)  # socket.timeout here means the server was reading the body
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        found = dict(line.split(": ", 1) for line in header_lines if ": " in line)
        while len(body) < int(found.get("Content-Length", 0)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(status_line.split()[1]), found, body.decode("utf-8", "replace")


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def test_an_anonymous_gigabyte_upload_is_refused_before_it_is_read(live_server) -> None:
    study = StudyFactory.create()
    cookie = {"Cookie": f"csrftoken={CSRF}", "X-CSRFToken": CSRF}
    status, headers, _body = _raw_post(
        live_server.url, f"/studies/{study.pk}/import/items/", length=GIGABYTE, headers=cookie
    )
    assert status == 302 and headers["Location"].startswith("/accounts/login/?next=")
    # credentials do not make a page's upload signed in: its CSRF check would parse the body
    status, headers, _body = _raw_post(
        live_server.url,
        f"/studies/{study.pk}/import/items/",
        length=100 * 1024 * 1024,
        headers={**cookie, "Authorization": "Token made-up"},
    )
    assert status == 302 and headers["Location"].startswith("/accounts/login/?next=")
    status, _headers, body = _raw_post(
        live_server.url, f"/api/studies/{study.pk}/items/import/", length=GIGABYTE, headers={}
    )
    assert status == 401 and "Sign in before uploading" in body
    # a made-up token is no sign-in either: refused from the headers like no header at all
    status, _headers, body = _raw_post(
        live_server.url,
        f"/api/studies/{study.pk}/items/import/",
        length=10 * 1024 * 1024,
        headers={"Authorization": "Token made-up"},
    )
    assert status == 401 and "Sign in before uploading" in body


@pytest.mark.parametrize(
    "authorization",
    ["Basic x", "Bearer abc", "Token made-up", "Token " + "f" * 40, "Token a%00b", "Digest", "Token"],
)
def test_an_authorization_header_that_signs_no_one_in_keeps_the_anonymous_limit(
    live_server, authorization: str
) -> None:
    """Issue 24, M2: any ``Authorization`` header used to count as signed in under /api/, so a 150 MB
    multipart to the token endpoint with ``Authorization: Basic x`` was read whole (then a 400). The
    header is now checked against the tokens, from the headers alone: the refusal comes unread."""
    status, _headers, body = _raw_post(
        live_server.url,
        "/api/auth/token/",
        length=150 * 1024 * 1024,
        headers={"Authorization": authorization},
    )
    assert status == 401 and "Sign in before uploading" in body


def test_a_valid_token_still_signs_in_for_the_body_limit(live_server) -> None:
    from rest_framework.authtoken.models import Token

    owner = UserFactory.create(username="owner", role="researcher")
    study = StudyFactory.create(owner=owner)
    token = Token.objects.create(user=owner)
    status, _headers, body = _raw_post(
        live_server.url,
        f"/api/studies/{study.pk}/items/import/",
        length=GIGABYTE,
        headers={"Authorization": f"Token {token.key}"},
    )
    assert status == 413 and "may be at most 201 MB" in body  # signed in: the upload limit, not 401
    inactive = UserFactory.create(username="gone", role="researcher", is_active=False)
    gone = Token.objects.create(user=inactive)
    status, _headers, body = _raw_post(
        live_server.url,
        "/api/auth/token/",
        length=150 * 1024 * 1024,
        headers={"Authorization": f"Token {gone.key}"},
    )
    assert status == 401 and "Sign in before uploading" in body


def test_a_signed_in_upload_over_the_limit_is_refused_with_413_before_it_is_read(live_server) -> None:
    owner = UserFactory.create(username="owner", role="researcher")
    study = StudyFactory.create(owner=owner)
    headers = {"Cookie": f"{_session_cookie(owner)}; csrftoken={CSRF}", "X-CSRFToken": CSRF}
    status, _headers, body = _raw_post(
        live_server.url, f"/studies/{study.pk}/import/items/", length=GIGABYTE, headers=headers
    )
    assert status == 413 and "may be at most 201 MB" in body


def test_the_limits_come_from_the_settings(settings) -> None:
    settings.WORKBENCH_MAX_UPLOAD_BYTES = 1024
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    owner = UserFactory.create(username="owner", role="researcher")
    study = StudyFactory.create(owner=owner)
    api = client_for(owner)
    big = SimpleUploadedFile("m.csv", b"x" * 2 * 1024 * 1024)
    upload = api.post(f"/api/studies/{study.pk}/items/import/", {"file": big}, format="multipart")
    assert upload.status_code == 413 and "An upload may be at most" in upload.json()["detail"]
    body = api.post("/api/studies/", {"name": "x" * 4096}, format="json")
    assert body.status_code == 413 and "A request body may be at most 2 KB" in body.json()["detail"]
    anonymous = Client().post("/accounts/login/", {"username": "u" * 70_000, "password": "x"})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/?next=")
