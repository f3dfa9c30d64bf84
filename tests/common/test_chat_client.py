"""The chat-completions client against a real HTTP server on 127.0.0.1 (tests/fixtures/chat_server.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from common.chat_client import (
    ChatClient,
    ChatConfigError,
    ChatError,
    ChatSettings,
    RequestPacer,
    retry_after_seconds,
)
from tests.fixtures.chat_server import ChatServer, Reply, status_reply


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


def make_client(server: ChatServer, sleeps: list[float] | None = None, **overrides: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "test-vlm",
        "api_key_env": None,
        "backoff_base_s": 0.5,
        "jitter": 0.0,
        "read_timeout_s": 5.0,
        "max_retries": 3,
        **overrides,
    }
    recorded = sleeps if sleeps is not None else []
    return ChatClient(ChatSettings(**settings), sleep=recorded.append)


def test_answer_text_usage_and_key_header(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_LABELLER_KEY_TEST", "sk-test-123")
    server.queue([Reply(content="hello", usage={"prompt_tokens": 7, "completion_tokens": 3})])
    with make_client(server, api_key_env="WORKBENCH_LABELLER_KEY_TEST") as client:
        response = client.complete(
            [{"role": "user", "content": "hi"}], max_tokens=5, response_format={"type": "json_object"}
        )
    assert response.text == "hello"
    assert response.usage == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert response.attempts == 1
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test-123"
    assert request.body["model"] == "test-vlm"
    assert request.body["temperature"] == 0.0 and request.body["max_tokens"] == 5
    assert request.body["response_format"] == {"type": "json_object"}


def test_missing_key_variable_is_refused_before_any_request(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORKBENCH_LABELLER_KEY_NO_SUCH", raising=False)
    with pytest.raises(ChatConfigError, match="WORKBENCH_LABELLER_KEY_NO_SUCH"):
        make_client(server, api_key_env="WORKBENCH_LABELLER_KEY_NO_SUCH")
    assert server.requests == []


def test_429_is_retried_honouring_retry_after(server: ChatServer) -> None:
    server.queue([status_reply(429, retry_after="2"), Reply(content="ok")])
    sleeps: list[float] = []
    with make_client(server, sleeps) as client:
        response = client.complete([{"role": "user", "content": "x"}])
    assert response.text == "ok" and response.attempts == 2
    assert len(server.requests) == 2
    assert sleeps == [2.0]  # the server's Retry-After, not the 0.5 s backoff


def test_retry_after_is_capped(server: ChatServer) -> None:
    server.queue([status_reply(503, retry_after="3600"), Reply(content="ok")])
    sleeps: list[float] = []
    with make_client(server, sleeps, retry_after_max_s=7.0) as client:
        client.complete([{"role": "user", "content": "x"}])
    assert sleeps == [7.0]


def test_5xx_backs_off_exponentially_then_gives_up(server: ChatServer) -> None:
    server.queue([status_reply(500), status_reply(502), status_reply(500)])
    sleeps: list[float] = []
    with make_client(server, sleeps, max_retries=2) as client, pytest.raises(ChatError) as caught:
        client.complete([{"role": "user", "content": "x"}])
    # base 0.5 s, no jitter: 0.5 * 2**0, 0.5 * 2**1; the third failure is final.
    assert sleeps == [0.5, 1.0]
    assert caught.value.status == 500 and caught.value.retryable and caught.value.attempts == 3
    assert "gave up after 3 attempts" in str(caught.value)
    assert len(server.requests) == 3


def test_backoff_is_bounded(server: ChatServer) -> None:
    with make_client(server, backoff_base_s=1.0, backoff_max_s=5.0) as client:
        assert [client.backoff_s(n, None) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_other_4xx_is_not_retried(server: ChatServer) -> None:
    server.queue([status_reply(400, body='{"error": "bad model"}'), Reply(content="never")])
    sleeps: list[float] = []
    with make_client(server, sleeps) as client, pytest.raises(ChatError, match="HTTP 400") as caught:
        client.complete([{"role": "user", "content": "x"}])
    assert not caught.value.retryable and sleeps == [] and len(server.requests) == 1


def test_slow_answer_times_out_and_is_retried(server: ChatServer) -> None:
    server.queue([Reply(content="late", delay_s=1.0), Reply(content="in time")])
    sleeps: list[float] = []
    with make_client(server, sleeps, read_timeout_s=0.2) as client:
        started = time.monotonic()
        response = client.complete([{"role": "user", "content": "x"}])
    assert response.text == "in time" and response.attempts == 2
    assert time.monotonic() - started < 1.0  # did not wait for the slow answer
    assert sleeps == [0.5]


def test_timeout_without_retries_fails(server: ChatServer) -> None:
    server.queue([Reply(content="late", delay_s=1.0)])
    with (
        make_client(server, read_timeout_s=0.2, max_retries=0) as client,
        pytest.raises(ChatError, match="timed out"),
    ):
        client.complete([{"role": "user", "content": "x"}])


def test_malformed_body_is_a_final_error(server: ChatServer) -> None:
    server.queue([Reply(body="<html>gateway</html>"), Reply(content="never")])
    with make_client(server) as client, pytest.raises(ChatError, match="malformed chat response"):
        client.complete([{"role": "user", "content": "x"}])
    assert len(server.requests) == 1


def test_concurrency_limit_holds_across_threads(server: ChatServer) -> None:
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(body: dict[str, object]) -> Reply:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.15)
        with lock:
            in_flight[0] -= 1
        return Reply(content="ok")

    server.responder = slow
    with make_client(server, max_concurrency=2) as client:
        threads = [
            threading.Thread(target=client.complete, args=([{"role": "user", "content": "x"}],))
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(server.requests) == 6
    assert peak[0] == 2


def test_pacer_spaces_request_starts() -> None:
    now = [100.0]
    sleeps: list[float] = []
    pacer = RequestPacer(120, clock=lambda: now[0], sleep=sleeps.append)  # 60/120 = 0.5 s apart
    for _ in range(3):
        pacer.wait()
    assert sleeps == [0.5, 1.0]  # starts at 100.0, 100.5, 101.0
    now[0] = 200.0
    pacer.wait()
    assert sleeps == [0.5, 1.0]  # long idle: no wait


def test_pacer_refuses_non_positive_rate() -> None:
    with pytest.raises(ChatConfigError):
        RequestPacer(0)


def test_retry_after_parsing() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds("Thu, 01 Jan 2026 12:00:30 GMT", now=now) == 30.0
    assert retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", now=now) == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
