"""Helpers any test may use (no test module imports another test module)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rest_framework.test import APIClient

    from annotations.models import User


T = TypeVar("T")


def run_at_once(work: Callable[[T], Any], args: Sequence[T], *, timeout: float = 120) -> list[Any]:
    """``work(arg)`` for every ``arg``, each in its own thread, all let go together by a barrier
    (the concurrency tests); each thread closes its database connections. Returns the results in the
    order the threads finished and fails the test if any thread raised."""
    import threading

    from django.db import connections

    barrier = threading.Barrier(len(args))
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(arg: T) -> None:
        try:
            barrier.wait()
            results.append(work(arg))
        except BaseException as exc:  # noqa: BLE001 - collected and re-raised in the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(arg,)) for arg in args]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not errors, errors
    return results


def client_for(user: User | None) -> APIClient:
    """An API client signed in as ``user`` (None: anonymous).

    DRF takes the forced user and ignores credentials. The client still sends the user's real token,
    as every real API client does: the request limits (``workbench.middleware``), which run before
    DRF, refuse uploads from a client without a session or a valid token.
    """
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None:
        from rest_framework.authtoken.models import Token

        client.force_authenticate(user)
        token, _created = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def streamed(response: Any) -> Iterator[bytes]:
    """The body of a streaming response, chunk by chunk (the test client's stubs do not declare it)."""
    chunks: Iterator[bytes] = response.streaming_content
    return chunks


def metrics_json(**kwargs: Any) -> dict[str, Any]:
    """``findings_report(**kwargs)`` as the metrics API gives it (its JSON)."""
    from findings.report import findings_report

    return findings_report(**kwargs).to_json()
