"""Masking secrets in configurations (common/redaction.py; docs/security.md)."""

from __future__ import annotations

from typing import Any

import pytest

from common.redaction import MASK, is_secret_key, mask, redact


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("X-Api-Key", True),
        ("apiKey", True),
        ("accessToken", True),
        ("Authorization", True),
        ("client_secret", True),
        ("password", True),
        ("OPENAI_API_KEY", True),
        ("api_key_env", False),  # names an environment variable, not a secret
        ("max_tokens", False),
        ("price_per_1k_prompt_tokens", False),
        ("keywords", False),
        ("base_url", False),
        ("model", False),
    ],
)
def test_which_keys_name_secrets(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


def test_mask_shows_at_most_the_last_four_of_a_long_secret() -> None:
    assert mask("sk-0123456789abcdef") == f"{MASK}cdef"
    assert mask("short-secret") == MASK
    assert mask(None) == MASK


def test_redact_masks_headers_keys_and_url_passwords_and_leaves_the_input() -> None:
    config: dict[str, Any] = {
        "base_url": "https://bot:pw-123@llm.internal/v1?api_key=k-999&x=1",
        "extra_headers": {"Cookie": "session=abc", "X-Anything": "sk-0123456789abcdef"},
        "nested": [{"token": "t"}, {"temperature": 0.2}],
        "max_tokens": 10,
    }
    shown = redact(config)
    assert shown == {
        "base_url": f"https://bot:{MASK}@llm.internal/v1?api_key={MASK}&x=1",
        "extra_headers": {"Cookie": MASK, "X-Anything": f"{MASK}cdef"},
        "nested": [{"token": MASK}, {"temperature": 0.2}],
        "max_tokens": 10,
    }
    assert config["extra_headers"]["Cookie"] == "session=abc"
