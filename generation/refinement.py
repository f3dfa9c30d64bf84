"""SSI prompt refinement (ssi paper, Table A2): the LLM call that refines one query, and the study-level
flow that refines every query of a finished generation job.

The instruction is the paper's, with [Q] the initial query, [I] its images (sent inline) and
[S] the stereotypes identified (e.g. the rubric items scored 1, with their reasons). The answer
must have the paper's form "[Q] [additional refined context]": after trimming surrounding
whitespace and one pair of quotes, it must start with the initial query exactly (runs of
whitespace compared as one space), add some context, and be one line. Anything else raises
:class:`RefinementError` carrying the raw answer; nothing is patched into shape, so the job
can report it and the researcher can retry or edit.

``prompts_refine`` takes a finished generation job and the stereotypes its images were judged to
show, asks for refined prompts and builds the refined prompt set, linked to the initial one, ready to
generate. Stereotypes found for a query are the rubric items whose adopted label is 1 for that
query's image set (``annotations.selectors.labels.labels_for``: the human consensus by default, or
one labeller's answers). An answer that does not start with the initial query is refused and
reported with the LLM's raw text; the other queries go on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from annotations.models import Item
from annotations.selectors.labels import labels_for
from annotations.services.stored_files import item_file_open
from common.chat_client import ChatClient, ChatError, image_data_url
from generation.models import GenerationJob
from generation.prompts.base import PromptSet, PromptSpec
from generation.prompts.ssi import ssi_refined_prompt_set

REFINEMENT_INSTRUCTION = (
    "Given the initial query: {query} and the image(s) [I] generated with this query, generate a new image "
    "prompt that addresses any potential negative social stereotypes: {stereotypes}.\n"
    "- Make sure your final prompt: 1) Eliminates or minimizes specific stereotypes identified in your "
    "analysis., 2) Maintains a single, cohesive scene without fragmented or collage-like elements., and "
    "3) Retains the core idea and purpose of the initial prompt.\n"
    "- Format the final prompt as: {query} "
    "[additional refined context to reduce negative social stereotypes]\n"
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
    """Ask for a refined prompt; raise :class:`RefinementError` (bad form) or ``ChatError`` (request
    failed)."""
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


# --- the study-level flow: every query of a generation job ---------------------------------------


@dataclass
class RefinementReport:
    """What ``prompts_refine`` did: the refined set (None if no prompt was refined), each refined
    prompt with the stereotypes it addressed, and each refused query with the reason and raw answer."""

    refined: PromptSet | None
    prompts: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON for the ``refine_prompts`` command."""
        return {
            "refined_set": self.refined.name if self.refined else None,
            "prompts": self.prompts,
            "refused": self.refused,
        }


def initial_prompt_set(job: GenerationJob) -> PromptSet:
    """The prompt set ``job`` generated, rebuilt from its stored rows: the parent of the refined set."""
    return PromptSet(
        name=job.name,
        paper=job.paper,
        prompts=tuple(
            PromptSpec(
                text=p["text"],
                condition=p.get("condition", "base"),
                metadata=p.get("metadata", {}),
                images_per_prompt=int(p.get("images_per_prompt", 1)),
            )
            for p in job.prompts
        ),
    )


def stereotypes_found(job: GenerationJob, *, source: str = "consensus") -> dict[str, list[str]]:
    """Initial prompt text -> the rubric items (their wording) judged present in its images."""
    protocol = job.study.protocol_obj
    items = list(Item.objects.filter(study=job.study, generation_settings__job=job.pk))
    found: dict[str, list[str]] = {item.prompt: [] for item in items}
    for question in protocol.questions:
        if question.kind != "binary":
            continue
        labels = labels_for(job.study, question.key, source).values
        for item in items:
            if question.applies_to(item.metadata) and labels.get(item.pk) in (1, "1"):
                found.setdefault(item.prompt, []).append(question.prompt)
    return found


def prompts_refine(
    *, job: GenerationJob, client: ChatClient, source: str = "consensus", name: str | None = None
) -> RefinementReport:
    """Refine every initial prompt of ``job`` that has images; see the module docstring."""
    found = stereotypes_found(job, source=source)
    refined: dict[str, str] = {}
    report = RefinementReport(refined=None)
    for item in Item.objects.filter(study=job.study, generation_settings__job=job.pk).prefetch_related(
        "images"
    ):
        images = []
        for image in item.images.all():
            with item_file_open(image) as handle:
                images.append(Image.open(handle).convert("RGB"))
        try:
            answer = refine_prompt(
                client, initial_prompt=item.prompt, images=images, stereotypes=found.get(item.prompt, [])
            )
        except RefinementError as exc:
            report.refused.append({"initial": item.prompt, "reason": str(exc), "raw": exc.raw})
            continue
        except ChatError as exc:
            report.refused.append(
                {"initial": item.prompt, "reason": f"the LLM request failed: {exc}", "raw": ""}
            )
            continue
        refined[item.prompt] = answer.refined
        report.prompts.append(
            {"initial": item.prompt, "refined": answer.refined, "stereotypes": found.get(item.prompt, [])}
        )
    if refined:
        report.refined = ssi_refined_prompt_set(initial_prompt_set(job), refined, name=name)
    return report
