"""The labeller contract: items in, one outcome per (item, supported question) out.

A question is a plain dict in the protocol schema's shape, already resolved for the item::

    {"key", "kind", "prompt" (placeholders filled), "options": [{"key", "label"}, ...],
     "unsure": {"key", "label"} | None, "none_option": {"key", "label"} | None,
     "reason": "none|optional|required", "normaliser": ..., "linked_question": ...}

``LabelOutcome.value`` is in the answer format humans use (docs/protocols.md): an option key for
likert/single, a list of keys for multi, 0/1 for binary, a normalised string for text, a list of
``{"option", "x", "y", "w", "h"[, "image"]}`` for boxes. A failed answer has ``value=None`` and
``error`` set, with the model's raw output kept in ``raw``; nothing is coerced into a valid answer.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from PIL import Image

Question = Mapping[str, Any]


@dataclass(frozen=True)
class LabelItem:
    """One thing to judge: an image, an image set (several images) or a text term (no image).

    ``image_sha256`` holds one hex digest per image (of the stored file); caches key on it.
    """

    item_id: Any
    images: list[Image.Image] = field(default_factory=list)
    text: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    image_sha256: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LabelOutcome:
    """The labeller's answer to one question on one item, or the reason it has none.

    ``value`` is None exactly when ``error`` is set. ``latency_s`` is the wall time spent on the
    call that produced it (shared by every question answered by that call); ``cost_usd`` is None
    when the labeller has no price (local models, rules) and 0.0 for a cache hit of a priced one.
    """

    item_id: Any
    question_key: str
    value: Any
    reason: str | None
    raw: str
    error: str | None
    latency_s: float
    cost_usd: float | None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class LabellerError(RuntimeError):
    """A labeller cannot work at all (bad configuration, model folder missing)."""


class Labeller(ABC):
    """A machine annotator: ``name`` and ``version`` identify it, ``config`` says how it works.

    A change of prompt template, model or settings is a new version; :meth:`config_fingerprint`
    gives a stable digest of the configuration so the Django layer can detect such a change.
    Subclasses set ``kind`` (the registry key) and implement :meth:`supports` and :meth:`label`.
    """

    kind: ClassVar[str] = ""

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.version = version
        self.config: dict[str, Any] = dict(config or {})

    def config_fingerprint(self) -> str:
        """sha256 of the configuration as canonical JSON (sorted keys)."""
        payload = json.dumps({"kind": self.kind, "config": self.config}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @abstractmethod
    def supports(self, question: Question) -> bool:
        """Whether this labeller can answer the question (by kind, and by key where configured)."""

    @abstractmethod
    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        """One outcome per (item, supported question), items in order, questions in order.

        Unsupported questions are skipped (no outcome). A failure on one item never aborts the
        others: it becomes outcomes with ``error`` set.
        """

    def supported(self, questions: Sequence[Question]) -> list[Question]:
        return [question for question in questions if self.supports(question)]


def failed_outcomes(
    item: LabelItem,
    questions: Sequence[Question],
    error: str,
    *,
    raw: str = "",
    latency_s: float = 0.0,
    cost_usd: float | None = None,
) -> list[LabelOutcome]:
    """The same error for every question of an item (the call that would answer them all failed)."""
    return [
        LabelOutcome(item.item_id, question["key"], None, None, raw, error, latency_s, cost_usd)
        for question in questions
    ]
