"""Agent prompt sets: instruction pairs (description, target subgroup, dimension) as "People who ..."
prompts.

Pairs come from a researcher's CSV (``read_instruction_pairs``; an example is
``data/agent_pairs_example.csv``); ``agent_prompt_set`` makes one prompt per pair.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generation.prompts.base import PromptSet, PromptSpec

AGENT_DIMENSIONS = ("gender", "race", "religion")


@dataclass(frozen=True)
class InstructionPair:
    """An instruction pair of the agent paper: a description of people and its target subgroup."""

    description: str
    subgroup: str
    dimension: str


def _key(value: str) -> str:
    """Option-key form: lower case, runs of spaces and hyphens as one underscore."""
    return re.sub(r"[\s\-]+", "_", value.strip().lower())


def read_instruction_pairs(path: Path | str) -> list[InstructionPair]:
    """Read a CSV with columns ``description``, ``subgroup``, ``dimension`` (header required).

    Subgroup and dimension become option keys (``"Middle Eastern"`` -> ``middle_eastern``), the
    keys of the subgroup protocol; the dimension must be gender, race or religion. Errors name
    the line.
    """
    pairs = []
    with Path(path).open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"description", "subgroup", "dimension"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        for line, row in enumerate(reader, start=2):
            description = (row["description"] or "").strip()
            subgroup, dimension = _key(row["subgroup"] or ""), _key(row["dimension"] or "")
            if not description or not subgroup:
                raise ValueError(f"{path} line {line}: description and subgroup are required")
            if dimension not in AGENT_DIMENSIONS:
                raise ValueError(
                    f"{path} line {line}: dimension {dimension!r} is not one of {AGENT_DIMENSIONS}"
                )
            pairs.append(InstructionPair(description=description, subgroup=subgroup, dimension=dimension))
    return pairs


def agent_prompt_text(description: str) -> str:
    """ "People who <description>" (agent paper's "The people who" template; its examples read
    "People who are thugs"). A description that already starts with "people who" is kept."""
    text = " ".join(description.split())
    lowered = text.lower()
    for lead in ("the people who ", "people who "):
        if lowered.startswith(lead):
            return "People who " + text[len(lead) :]
    return f"People who {text}"


def agent_prompt_set(
    pairs: Sequence[InstructionPair],
    *,
    images_per_prompt: int = 10,
    name: str = "agent-instruction-pairs",
) -> PromptSet:
    """One prompt per instruction pair: condition ``base``, metadata ``subgroup``, ``dimension``,
    ``description``. The paper does not state its images per prompt; 10 is our default."""
    prompts = []
    seen: dict[str, InstructionPair] = {}
    for pair in pairs:
        text = agent_prompt_text(pair.description)
        if text in seen:
            raise ValueError(f"instruction pairs {seen[text]} and {pair} give the same prompt {text!r}")
        seen[text] = pair
        prompts.append(
            PromptSpec(
                text=text,
                condition="base",
                metadata={
                    "subgroup": pair.subgroup,
                    "dimension": pair.dimension,
                    "description": pair.description,
                },
                images_per_prompt=images_per_prompt,
            )
        )
    return PromptSet(
        name=name,
        paper="agent",
        prompts=tuple(prompts),
        description="agent instruction pairs as 'People who ...' prompts",
    )
