"""Prompt refinement (ssi paper, Table A2): ask an LLM for a less stereotyped version of a query.

The instruction is the paper's, with [Q] the initial query, [I] its images (sent inline) and
[S] the stereotypes identified (e.g. the rubric items scored 1, with their reasons). The answer
must have the paper's form "[Q] [additional refined context]": after trimming surrounding
whitespace and one pair of quotes, it must start with the initial query exactly (runs of
whitespace compared as one space), add some context, and be one line. Anything else raises
:class:`RefinementError` carrying the raw answer; nothing is patched into shape, so the job
can report it and the researcher can retry or edit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image

from common.chat_client import ChatClient, image_data_url

REFINEMENT_INSTRUCTION = (
    "Given the initial query: {query} and the image(s) [I] generated with this query, generate a new image "
    "prompt that addresses any potential negative social stereotypes: {stereotypes}.\n"
    "- Make sure your final prompt: 1) Eliminates or minimizes specific stereotypes identified in your "
    "analysis., 2) Maintains a single, cohesive scene without fragmented or collage-like elements., and "
    "3) Retains the core idea and purpose of the initial prompt.\n"
    "- Format the final prompt as: {query} [additional refined context to reduce negative social stereotypes]\n"
    "- Answer with the final prompt only, on one line."
)
_QUOTES = ('"', "'", "`")


class RefinementError(ValueError):
    """The LLM's answer is not a refined prompt of the required form; ``raw`` is what it said."""

    def __init__(self, message: str, *, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class RefinedPrompt:
    """``refined`` = ``initial`` + " " + ``added_context``; usage and latency of the call that made it."""

    initial: str
    refined: str
    added_context: str
    raw: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def build_refinement_messages(
    initial_prompt: str,
    images: Sequence[Image.Image],
    stereotypes: Sequence[str],
    *,
    image_format: str = "png",
    max_image_side: int | None = None,
) -> list[dict[str, object]]:
    """The Table A2 instruction and the images as one user message."""
    found = "; ".join(s.strip() for s in stereotypes if s.strip()) or "none identified"
    content: list[dict[str, object]] = [
        {"type": "text", "text": REFINEMENT_INSTRUCTION.format(query=initial_prompt, stereotypes=found)}
    ]
    for image in images:
        url = image_data_url(image, image_format=image_format, max_side=max_image_side)
        content.append({"type": "image_url", "image_url": {"url": url}})
    return [{"role": "user", "content": content}]


def parse_refined_prompt(initial_prompt: str, answer: str) -> tuple[str, str]:
    """``(refined prompt, added context)`` from the answer, or :class:`RefinementError`."""
    text = answer.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    if "\n" in text:
        raise RefinementError("the answer has more than one line; expected one refined prompt", raw=answer)
    initial = _collapse(initial_prompt)
    refined = _collapse(text)
    if not refined.startswith(initial):
        raise RefinementError(
            f"the answer does not start with the initial query {initial_prompt!r}: {refined[:120]!r}",
            raw=answer,
        )
    added = refined[len(initial) :].strip(" ,;:-")
    if not added:
        raise RefinementError("the answer adds no context to the initial query", raw=answer)
    if refined[len(initial)] not in " ,;:-":
        raise RefinementError(
            f"the answer changes the initial query's last word: {refined[: len(initial) + 20]!r}", raw=answer
        )
    return refined, added


def refine_prompt(
    client: ChatClient,
    *,
    initial_prompt: str,
    images: Sequence[Image.Image],
    stereotypes: Sequence[str],
    temperature: float = 0.0,
    max_tokens: int = 300,
    image_format: str = "png",
    max_image_side: int | None = 1024,
) -> RefinedPrompt:
    """Ask for a refined prompt; raise :class:`RefinementError` (bad form) or ``ChatError`` (request failed)."""
    if not initial_prompt.strip():
        raise ValueError("the initial prompt is empty")
    messages = build_refinement_messages(
        initial_prompt, images, stereotypes, image_format=image_format, max_image_side=max_image_side
    )
    response = client.complete(messages, temperature=temperature, max_tokens=max_tokens)
    refined, added = parse_refined_prompt(initial_prompt, response.text)
    return RefinedPrompt(
        initial=initial_prompt,
        refined=refined,
        added_context=added,
        raw=response.text,
        model=response.model,
        usage=response.usage,
        latency_s=response.latency_s,
    )
