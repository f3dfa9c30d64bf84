"""SSI prompt sets (Stereotype Score Index): the initial queries and their refined set.

The initial queries are "a photo of a [G] person", "a photo of a [O]" and "photo of a [A] person"
over geocultural, occupational and adjectival terms (``data/ssi.yaml``); the refined set holds one
LLM-refined prompt per initial query (see ``generation/refinement.py``), linked to the initial set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from generation.prompts.base import PromptSet, PromptSpec, clean_terms, fill_template, load_prompt_data

SSI_CATEGORIES = ("geocultural", "occupational", "adjectival")


def ssi_prompt_set(
    terms: Mapping[str, Sequence[str]] | None = None,
    *,
    images_per_prompt: int | None = None,
    name: str = "ssi-initial",
    data_path: Path | str | None = None,
) -> PromptSet:
    """ssi initial queries: "a photo of a [G] person", "a photo of a [O]", "photo of a [A] person".

    ``terms`` maps category (geocultural / occupational / adjectival) to its terms; by default the
    lists of ``prompt_data/ssi.yaml``. A category left out of ``terms`` gets no queries. Condition
    ``initial``; metadata ``category`` and ``term``; 4 images per query (paper section 3).
    """
    data = load_prompt_data("ssi", data_path)
    chosen = data["terms"] if terms is None else terms
    per_prompt = images_per_prompt if images_per_prompt is not None else int(data["images_per_prompt"])
    unknown = sorted(set(chosen) - set(SSI_CATEGORIES))
    if unknown:
        raise ValueError(f"unknown ssi categories {unknown}; use {list(SSI_CATEGORIES)}")
    prompts = []
    for category in SSI_CATEGORIES:
        if category not in chosen:
            continue
        for term in clean_terms(chosen[category], f"ssi {category} terms"):
            prompts.append(
                PromptSpec(
                    text=fill_template(data["templates"][category], term=term),
                    condition="initial",
                    metadata={"category": category, "term": term},
                    images_per_prompt=per_prompt,
                )
            )
    return PromptSet(
        name=name,
        paper="ssi",
        prompts=tuple(prompts),
        description="ssi initial queries (geocultural, occupational, adjectival)",
    )


def _normalised(text: str) -> str:
    """``text`` with runs of whitespace as one space, case-folded: how a refined prefix is compared."""
    return " ".join(text.split()).casefold()


def ssi_refined_prompt_set(
    initial: PromptSet,
    refined: Mapping[str, str],
    *,
    name: str | None = None,
    require_initial_prefix: bool = True,
) -> PromptSet:
    """The refined set linked to ``initial``: one ``refined`` prompt per refined initial query.

    ``refined`` maps an initial prompt text to its refined text. The paper's refinement
    instruction (Table A2) asks for "[Q] [additional refined context]", so by default a refined
    text must start with its initial query (compared ignoring case and repeated spaces). Initial
    queries without an entry are left out. Metadata: the initial's metadata plus
    ``initial_prompt``; images per prompt as the initial's; ``parent`` = ``initial.name``.
    """
    by_text = {p.text: p for p in initial.prompts}
    unknown = sorted(set(refined) - set(by_text))
    if unknown:
        raise ValueError(f"refined texts given for prompts not in {initial.name!r}: {unknown[:5]}")
    prompts = []
    for spec in initial.prompts:
        if spec.text not in refined:
            continue
        text = " ".join(refined[spec.text].split())
        if require_initial_prefix and not _normalised(text).startswith(_normalised(spec.text)):
            raise ValueError(f"refined prompt {text!r} does not start with its initial query {spec.text!r}")
        prompts.append(
            PromptSpec(
                text=text,
                condition="refined",
                metadata={**spec.metadata, "initial_prompt": spec.text},
                images_per_prompt=spec.images_per_prompt,
            )
        )
    return PromptSet(
        name=name or f"{initial.name}-refined",
        paper=initial.paper,
        prompts=tuple(prompts),
        parent=initial.name,
        description=f"refined prompts of {initial.name}",
    )
