"""Password reset (docs/security.md, "Password reset"): throttled per client address and per email
address like sign-in, and answering a known and an unknown address alike, with the same work in the
request: the mail is sent by a Celery task after the answer."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/accounts/password_reset/"


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    cache.clear()


def _ask(client: Client, email: str, capture: Any, **extra: Any) -> tuple[Any, int, list[Any]]:
    with CaptureQueriesContext(connection) as queries, capture(execute=False) as callbacks:
        response = client.post(URL, {"email": email}, **extra)
    return response, len(queries), list(callbacks)


def test_known_and_unknown_addresses_answer_alike_and_the_mail_arrives(
    django_capture_on_commit_callbacks, mailoutbox
) -> None:
    user = UserFactory.create(username="known", email="known@example.org")
    user.set_password("a long passphrase 42")
    user.save()
    client = Client()
    known, known_queries, known_tasks = _ask(client, "Known@Example.org", django_capture_on_commit_callbacks)
    unknown, unknown_queries, unknown_tasks = _ask(
        client, "nobody@example.org", django_capture_on_commit_callbacks
    )
    assert known.status_code == unknown.status_code == 302
    assert known["Location"] == unknown["Location"] == "/accounts/password_reset/done/"
    assert known.content == unknown.content
    # the same work in the request: no account looked up, one task queued after the commit
    assert known_queries == unknown_queries and len(known_tasks) == len(unknown_tasks) == 1
    assert mailoutbox == []  # nothing was sent while the request ran
    for callback in known_tasks + unknown_tasks:
        callback()  # what the worker does (eager Celery in tests)
    assert [m.to for m in mailoutbox] == [["known@example.org"]]
    assert "/accounts/reset/" in mailoutbox[0].body


def test_the_16th_request_from_one_client_is_refused(django_capture_on_commit_callbacks, mailoutbox) -> None:
    UserFactory.create(username="known", email="known@example.org").set_password("x")
    client = Client()
    for n in range(15):
        response, _q, _t = _ask(client, f"someone{n}@example.org", django_capture_on_commit_callbacks)
        assert response.status_code == 302, n
    refused, _q, tasks = _ask(client, "known@example.org", django_capture_on_commit_callbacks)
    assert refused.status_code == 429 and tasks == []
    assert "Too many password-reset requests" in refused.content.decode()
    assert int(refused["Retry-After"]) == 15 * 60
    # another client is not held back by this one
    other, _q, _t = _ask(
        Client(REMOTE_ADDR="10.0.0.9"), "third@example.org", django_capture_on_commit_callbacks
    )
    assert other.status_code == 302


def test_the_16th_request_for_one_address_is_refused_from_any_client(
    django_capture_on_commit_callbacks,
) -> None:
    for n in range(15):
        response, _q, _t = _ask(
            Client(REMOTE_ADDR=f"10.0.1.{n}"), "victim@example.org", django_capture_on_commit_callbacks
        )
        assert response.status_code == 302, n
    refused, _q, tasks = _ask(
        Client(REMOTE_ADDR="10.0.2.1"), "VICTIM@example.org", django_capture_on_commit_callbacks
    )
    assert refused.status_code == 429 and tasks == []


def test_the_reset_mail_task_runs_through_celery(mailoutbox) -> None:
    """The task the page queues, run as a worker runs it (eager): the link works."""
    from annotations.tasks import send_password_reset_mail_task

    user = UserFactory.create(username="known", email="known@example.org")
    user.set_password("old passphrase 42")
    user.save()
    assert send_password_reset_mail_task.apply_async(("known@example.org", "http://testserver/")).get() == 1
    link = next(line for line in mailoutbox[0].body.splitlines() if "/accounts/reset/" in line).strip()
    client = Client()
    form = client.get(link.removeprefix("http://testserver"), follow=True)
    assert form.status_code == 200 and "new_password1" in form.content.decode()
