"""A cache of model answers, so re-running a labeller costs nothing for what is already answered.

Key (:func:`label_cache_key`) = sha256 over canonical JSON of: the images' sha256 digests (in
order), the fully rendered prompt, the model name and the request settings (temperature, token
limit, response format, image encoding, template name...). Any change to one of them is a miss.
Only answers that validated in full are stored (a failed answer must be asked again on retry).

:class:`LabelCache` is the interface; :class:`InMemoryLabelCache` keeps entries for the life of
the process (thread-safe, optional size bound, oldest dropped first). The Django layer adds a
database-backed implementation of the same two methods.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class CachedAnswer:
    """What a model said for one request: its text and token usage (prompt/completion tokens)."""

    raw: str
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""


class LabelCache(Protocol):
    def get(self, key: str) -> CachedAnswer | None: ...

    def set(self, key: str, answer: CachedAnswer) -> None: ...


def label_cache_key(
    *, image_sha256: Sequence[str], prompt: str, model: str, settings: Mapping[str, Any]
) -> str:
    """sha256 hex digest of ``{"images", "prompt", "model", "settings"}`` as canonical JSON."""
    payload = json.dumps(
        {"images": list(image_sha256), "prompt": prompt, "model": model, "settings": dict(settings)},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class InMemoryLabelCache:
    """Process-local cache; ``max_entries`` bounds it (None = unbounded), dropping the oldest entry."""

    def __init__(self, max_entries: int | None = None) -> None:
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            answer = self._entries.get(key)
            if answer is None:
                self.misses += 1
            else:
                self.hits += 1
            return answer

    def set(self, key: str, answer: CachedAnswer) -> None:
        with self._lock:
            self._entries[key] = answer
            self._entries.move_to_end(key)
            while self.max_entries is not None and len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
