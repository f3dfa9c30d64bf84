"""Prompt refinement (ssi Table A2) against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from common.chat_client import ChatClient, ChatError, ChatSettings
from generation.refinement import RefinementError, parse_refined_prompt, refine_prompt
from tests.fixtures.chat_server import ChatServer, Reply

QUERY = "a photo of a doctor"
IMAGES = [Image.new("RGB", (16, 16), (10, 20, 30)), Image.new("RGB", (16, 16), (200, 200, 200))]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


def client_for(server: ChatServer, **overrides: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "test-llm",
        "api_key_env": None,
        "max_retries": 0,
        "read_timeout_s": 5.0,
        **overrides,
    }
    return ChatClient(ChatSettings(**settings))


def test_refined_prompt_keeps_the_initial_query(server: ChatServer) -> None:
    answer = f'"{QUERY}, a woman of South Asian descent reviewing charts in a modern clinic"'
    server.queue([Reply(content=answer)])
    with client_for(server) as client:
        result = refine_prompt(
            client,
            initial_prompt=QUERY,
            images=IMAGES,
            stereotypes=["gender: all four doctors are older white men"],
        )
    assert result.refined == f"{QUERY}, a woman of South Asian descent reviewing charts in a modern clinic"
    assert result.added_context == "a woman of South Asian descent reviewing charts in a modern clinic"
    assert result.raw == answer and result.model == "test-llm"
    content = server.requests[0].body["messages"][0]["content"]
    assert f"Given the initial query: {QUERY}" in content[0]["text"]
    assert "gender: all four doctors are older white men" in content[0]["text"]
    assert "Format the final prompt as: a photo of a doctor [additional refined context" in content[0]["text"]
    assert [part["type"] for part in content[1:]] == ["image_url", "image_url"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("A diverse team of doctors in a hospital", "does not start with the initial query"),
        ("Final prompt: a photo of a doctor, in a clinic", "does not start with the initial query"),
        ("a photo of a doctor", "adds no context"),
        ("a photo of a doctors in a clinic", "changes the initial query's last word"),
        ("a photo of a doctor, smiling\nThis prompt removes the gender stereotype.", "more than one line"),
    ],
)
def test_answers_of_the_wrong_form_are_refused(server: ChatServer, answer: str, message: str) -> None:
    server.queue([Reply(content=answer)])
    with client_for(server) as client, pytest.raises(RefinementError, match=message) as caught:
        refine_prompt(client, initial_prompt=QUERY, images=IMAGES, stereotypes=[])
    assert caught.value.raw == answer


def test_whitespace_runs_compare_equal() -> None:
    assert parse_refined_prompt("a photo  of a doctor", "a photo of a doctor at work") == (
        "a photo of a doctor at work",
        "at work",
    )


def test_slow_answer_is_a_chat_error(server: ChatServer) -> None:
    server.queue([Reply(content=f"{QUERY} at work", delay_s=1.0)])
    with client_for(server, read_timeout_s=0.2) as client, pytest.raises(ChatError, match="timed out"):
        refine_prompt(client, initial_prompt=QUERY, images=IMAGES, stereotypes=[])


def test_malformed_server_answer_is_a_chat_error(server: ChatServer) -> None:
    server.queue([Reply(body='{"choices": []}')])
    with client_for(server) as client, pytest.raises(ChatError, match="malformed"):
        refine_prompt(client, initial_prompt=QUERY, images=IMAGES, stereotypes=[])
