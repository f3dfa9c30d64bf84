"""SSI prompt refinement in the workbench: from a finished generation job and the stereotypes its
images were judged to show, ask an LLM for refined prompts (paper Table A2) and build the refined
prompt set, linked to the initial one, ready to generate.

Stereotypes found for a query are the rubric items whose adopted label is 1 for that query's
image set (``annotations.selectors.labels.labels_for``: the human consensus by default, or one
labeller's answers). An answer that does not start with the initial query is refused and
reported with the LLM's raw text; the other queries go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from annotations.models import Item
from annotations.selectors.labels import labels_for
from common.chat_client import ChatClient, ChatError
from generation.models import GenerationJob
from generation.prompts.builders import PromptSet, PromptSpec, ssi_refined_prompt_set
from generation.refinement import RefinementError, refine_prompt


@dataclass
class RefinementReport:
    refined: PromptSet | None
    prompts: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "refined_set": self.refined.name if self.refined else None,
            "prompts": self.prompts,
            "refused": self.refused,
        }


def initial_prompt_set(job: GenerationJob) -> PromptSet:
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
            with image.file.open("rb") as handle:
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
