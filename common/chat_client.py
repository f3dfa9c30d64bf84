"""A small client for OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama, LM Studio).

``POST {base_url}/chat/completions`` with ``{"model", "messages", "temperature"[, "max_tokens",
"response_format"]}``; the answer text is ``choices[0].message.content``, token counts are
``usage.prompt_tokens`` / ``usage.completion_tokens``.

Behaviour a long labelling run depends on:

- explicit connect/read/write/pool timeouts on every request;
- retries only for transient failures: HTTP 429, HTTP 5xx, timeouts and dropped connections
  (``NetworkError``); never for other 4xx or a malformed body. Attempt ``n`` (from 0) waits
  ``min(backoff_max_s, backoff_base_s * 2**n)`` plus up to ``jitter`` of that at random, or the
  server's ``Retry-After`` (seconds or HTTP date) when given, capped at ``retry_after_max_s``;
- at most ``max_concurrency`` requests in flight and at most ``requests_per_minute`` request
  starts per minute, shared by every thread using the client (starts are spaced 60/rpm seconds
  apart, so a burst never exceeds the limit in any window);
- the API key is read from the environment variable named in the settings when the client is
  built (never at import time); a local server without a key uses ``api_key_env=None``. The name
  must start with one of ``WORKBENCH_LABELLER_KEY_ENV_PREFIXES`` (``api_key_env_check``), so a
  configuration can never send the worker's other secrets (``DATABASE_URL``) anywhere;
- every request's URL passes ``common.outbound.outbound_url_check`` right before it is sent (the
  host resolved again: docs/security.md).

The HTTP library is ``httpx``.
"""

from __future__ import annotations

import base64
import email.utils
import io
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from django.conf import settings as django_settings
from PIL import Image

from common.errors import ValidationFailed
from common.outbound import outbound_url_check
from common.redaction import redact

Message = Mapping[str, Any]
KEY_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def api_key_env_check(name: str) -> str:
    """``name`` if an API key may be read from that environment variable: letters, digits and ``_``,
    starting with one of ``WORKBENCH_LABELLER_KEY_ENV_PREFIXES`` and longer than it; else
    ``ValidationFailed`` (docs/security.md)."""
    prefixes = [p for p in getattr(django_settings, "WORKBENCH_LABELLER_KEY_ENV_PREFIXES", []) if p]
    if not (
        isinstance(name, str)
        and KEY_ENV_NAME.match(name)
        and any(name.startswith(prefix) and len(name) > len(prefix) for prefix in prefixes)
    ):
        allowed = " or ".join(prefixes) or "(none: WORKBENCH_LABELLER_KEY_ENV_PREFIXES is empty)"
        raise ValidationFailed(
            f"api_key_env must name an environment variable starting with {allowed}, got {str(name)[:130]!r}",
            {"config": "api_key_env"},
        )
    return name


class ChatError(RuntimeError):
    """A chat request failed for good. ``retryable`` says whether the last failure was transient."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        attempts: int = 0,
        body: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.body = body


class ChatConfigError(ValueError):
    """The client settings cannot work (missing key variable, bad URL, bad limits)."""


@dataclass(frozen=True, repr=False)
class ChatSettings:
    """How the client reaches the server. Its repr (logs, tracebacks) masks secrets: the headers
    (they carry API keys) and a password in ``base_url`` (``common.redaction``; docs/security.md)."""

    base_url: str
    model: str
    api_key_env: str | None = "WORKBENCH_LABELLER_KEY_OPENAI"
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    write_timeout_s: float = 30.0
    pool_timeout_s: float = 60.0
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 60.0
    jitter: float = 0.1
    max_concurrency: int = 4
    requests_per_minute: float | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = redact({name: getattr(self, name) for name in self.__dataclass_fields__})
        return f"ChatSettings({', '.join(f'{name}={value!r}' for name, value in shown.items())})"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ChatSettings:
        """Build from a labeller's config dict, ignoring keys that are not settings."""
        names = set(cls.__dataclass_fields__)
        return cls(**{key: value for key, value in config.items() if key in names})


@dataclass(frozen=True)
class ChatResponse:
    """``text`` of the first choice; ``usage`` token counts; ``latency_s`` from first try to answer."""

    text: str
    usage: dict[str, int]
    model: str
    latency_s: float
    attempts: int
    body: dict[str, Any]


class RequestPacer:
    """Spaces request starts ``60 / requests_per_minute`` seconds apart, across threads.

    Each caller reserves the next free start time under a lock, then sleeps until it: the limit
    holds in every 60 s window without a burst at the start of each.
    """

    def __init__(
        self,
        requests_per_minute: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if requests_per_minute is not None and requests_per_minute <= 0:
            raise ChatConfigError("requests_per_minute must be positive (or None for no limit)")
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()
        self._clock = clock
        self._sleep = sleep

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self._sleep(start - now)


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date); None if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def image_data_url(image: Image.Image, *, image_format: str = "png", max_side: int | None = None) -> str:
    """``data:image/<fmt>;base64,...`` of the image (RGB; shrunk so its longer side is ``max_side``)."""
    picture = image.convert("RGB")
    if max_side and max(picture.size) > max_side:
        picture.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    fmt = image_format.lower()
    picture.save(buffer, format="JPEG" if fmt in ("jpg", "jpeg") else fmt.upper())
    mime = "jpeg" if fmt in ("jpg", "jpeg") else fmt
    return f"data:image/{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def _content_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        ]
        return "".join(parts) if parts else None
    return None


class ChatClient:
    """Thread-safe chat-completions client; one per labeller run (it holds a connection pool)."""

    def __init__(
        self,
        settings: ChatSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not settings.base_url.startswith(("http://", "https://")):
            raise ChatConfigError(
                f"base_url must start with http:// or https://, got {redact(settings.base_url)!r}"
            )
        if settings.max_concurrency < 1 or settings.max_retries < 0:
            raise ChatConfigError("max_concurrency must be >= 1 and max_retries >= 0")
        headers = {"Content-Type": "application/json", **settings.extra_headers}
        try:
            outbound_url_check(settings.base_url)
            if settings.api_key_env:
                api_key_env_check(settings.api_key_env)
        except ValidationFailed as exc:
            raise ChatConfigError(exc.message) from exc
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if not key:
                raise ChatConfigError(f"environment variable {settings.api_key_env} (the API key) is not set")
            headers["Authorization"] = f"Bearer {key}"
        self.settings = settings
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        self._pacer = RequestPacer(settings.requests_per_minute, sleep=sleep)
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(
                connect=settings.connect_timeout_s,
                read=settings.read_timeout_s,
                write=settings.write_timeout_s,
                pool=settings.pool_timeout_s,
            ),
            limits=httpx.Limits(
                max_connections=settings.max_concurrency, max_keepalive_connections=settings.max_concurrency
            ),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def backoff_s(self, attempt: int, retry_after: float | None) -> float:
        """Wait before retry number ``attempt + 1`` (see the module docstring)."""
        if retry_after is not None:
            return min(retry_after, self.settings.retry_after_max_s)
        delay = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2.0**attempt)
        return delay + delay * self.settings.jitter * self._rng.random()

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Send one chat request (retrying transient failures); raise :class:`ChatError` when it fails."""
        payload: dict[str, Any] = {"model": self.settings.model, "messages": list(messages)}
        if temperature is not None:
            payload["temperature"] = temperature
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if response_format is not None:
            payload["response_format"] = dict(response_format)
        payload.update(extra_body or {})
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            retry_after: float | None = None
            with self._slots:
                self._pacer.wait()
                try:
                    outbound_url_check(self.url)  # the host resolved again, right before sending
                except ValidationFailed as exc:
                    raise ChatError(f"refused: {exc.message}", attempts=attempts) from exc
                try:
                    response = self._http.post(self.url, json=payload)
                except httpx.TimeoutException as error:
                    failure = ChatError(
                        f"timed out: {type(error).__name__}", retryable=True, attempts=attempts
                    )
                except httpx.NetworkError as error:
                    failure = ChatError(f"network error: {error}", retryable=True, attempts=attempts)
                else:
                    if response.status_code == 200:
                        return self._parse(response, started, attempts)
                    transient = response.status_code == 429 or response.status_code >= 500
                    failure = ChatError(
                        f"HTTP {response.status_code} from {self.url}: {response.text[:300]}",
                        status=response.status_code,
                        retryable=transient,
                        attempts=attempts,
                        body=response.text,
                    )
                    retry_after = (
                        retry_after_seconds(response.headers.get("retry-after")) if transient else None
                    )
            if not failure.retryable or attempts > self.settings.max_retries:
                if failure.retryable:
                    failure.args = (f"{failure.args[0]} (gave up after {attempts} attempts)",)
                raise failure
            self._sleep(self.backoff_s(attempts - 1, retry_after))

    def _parse(self, response: httpx.Response, started: float, attempts: int) -> ChatResponse:
        try:
            body = response.json()
            text = _content_text(body["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise ChatError(
                f"malformed chat response ({type(error).__name__}: {error}): {response.text[:300]}",
                status=200,
                attempts=attempts,
                body=response.text,
            ) from error
        if text is None:
            raise ChatError(
                f"chat response has no text content: {response.text[:300]}",
                status=200,
                attempts=attempts,
                body=response.text,
            )
        raw_usage = body.get("usage") or {}
        usage = {
            name: int(raw_usage[name])
            for name in ("prompt_tokens", "completion_tokens", "total_tokens")
            if isinstance(raw_usage.get(name), int)
        }
        return ChatResponse(
            text=text,
            usage=usage,
            model=str(body.get("model", self.settings.model)),
            latency_s=time.monotonic() - started,
            attempts=attempts,
            body=body,
        )
