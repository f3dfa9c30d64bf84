"""Choosing a prompt set by name (the papers' designs) or from a researcher's file, and storing it.

Builders live in one module per paper beside this one (``ssi.py``, ``visage.py``, ``biasconnect.py``,
``agent.py``, ``soda.py``; shared shapes in ``base.py``); this module turns a user's choice into a
``PromptSet`` and a ``PromptSet`` into the JSON a generation job keeps.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from generation.prompts.agent import agent_prompt_set, read_instruction_pairs
from generation.prompts.base import PromptSet, PromptSpec
from generation.prompts.biasconnect import biasconnect_mitigation_set, biasconnect_prompt_set
from generation.prompts.soda import soda_prompt_set
from generation.prompts.ssi import ssi_prompt_set
from generation.prompts.visage import (
    sample_non_stereotypes,
    seegull_stereotypes,
    stereotypes_from_table,
    visage_prompt_set,
    visage_pull_prompt_set,
)

DESIGNS = ("ssi", "visage", "visage-pull", "biasconnect", "biasconnect-mitigation", "soda", "agent", "file")


class PromptSetError(ValueError):
    """A prompt set that cannot be built; the message says why."""


def visage_pull_from_table(
    rows: list[tuple[str, str, int | None, bool | None]],
    *,
    seed: int = 0,
    images_per_prompt: int | None = None,
    limit: int | None = None,
) -> PromptSet:
    """visage's stereotypical-pull sets from a study's stereotype table (the findings page's button):
    the same sets as ``visage-pull`` with a SeeGULL CSV, its non-stereotypes drawn with ``seed``."""
    if not rows:
        raise PromptSetError(
            "the study has no stereotype table: upload one (SeeGULL CSV) on the findings page first"
        )
    stereotypes, pool = stereotypes_from_table(rows)
    if not stereotypes:
        raise PromptSetError(
            "the stereotype table has no pair with NA_stereo >= 2 and a visual attribute: no stereotype "
            "to prompt with"
        )
    try:
        non_stereotypes = sample_non_stereotypes(stereotypes, pool, seed=seed)
    except ValueError as exc:
        raise PromptSetError(f"the stereotype table has too few attributes: {exc}") from exc
    try:
        built = visage_pull_prompt_set(stereotypes, non_stereotypes, images_per_prompt=images_per_prompt)
    except (ValueError, KeyError) as exc:
        raise PromptSetError(str(exc)) from exc
    if limit is not None:
        built = PromptSet(
            name=built.name,
            paper=built.paper,
            prompts=built.prompts[:limit],
            description=built.description,
            parent=built.parent,
        )
    return built


def prompt_set_build(
    design: str,
    *,
    path: Path | None = None,
    images_per_prompt: int | None = None,
    limit: int | None = None,
    name: str | None = None,
    subject: str | None = None,
    mitigate: list[str] | None = None,
    total_images: int = 48,
    seed: int = 0,
) -> PromptSet:
    """The prompt set of a paper's design (``ssi``, ``visage``, ``biasconnect``, ``soda``), of an
    agent instruction-pair CSV (``agent`` with ``path``), or of a prompt file (``file``: CSV or
    JSONL with ``text`` and optional ``condition``, ``images_per_prompt`` and metadata columns),
    or BiasConnect's prompt-modification mitigation of ``subject`` along the ``mitigate`` axes
    (``biasconnect-mitigation``, A.7: every combination of their phrases, ``total_images`` split
    equally, plus the other axes' counterfactuals so the next IS matrix can be measured), or
    visage's stereotypical-pull sets (``visage-pull`` with ``path`` = a SeeGULL CSV: each identity's
    pairs with NA_stereo >= 2 are its stereotypes, and as many other attributes of the file, drawn
    with ``seed``, its non-stereotypes). ``limit`` keeps the first N prompts (for trying a design on a
    few prompts first)."""
    try:
        if design == "ssi":
            built = ssi_prompt_set(images_per_prompt=images_per_prompt)
        elif design == "visage":
            built = visage_prompt_set(images_per_prompt=images_per_prompt)
        elif design == "visage-pull":
            if path is None:
                raise PromptSetError(
                    "the visage pull sets need a SeeGULL CSV (identity, attribute, NA_stereo columns)"
                )
            stereotypes = seegull_stereotypes(path)
            if not stereotypes:
                raise PromptSetError(
                    f"{path.name}: no pair with NA_stereo >= 2 (no stereotype to prompt with)"
                )
            pool = [a for attrs in seegull_stereotypes(path, min_na_stereo=0).values() for a in attrs]
            built = visage_pull_prompt_set(
                stereotypes,
                sample_non_stereotypes(stereotypes, pool, seed=seed),
                images_per_prompt=images_per_prompt,
            )
        elif design == "biasconnect":
            built = biasconnect_prompt_set(images_per_prompt=images_per_prompt)
        elif design == "biasconnect-mitigation":
            if not subject or not mitigate:
                raise PromptSetError("a mitigation set needs a subject (e.g. nurse) and the axes to mitigate")
            built = biasconnect_mitigation_set(
                subject, mitigate, total_images=total_images, with_counterfactuals=True, name=name
            )
        elif design == "soda":
            built = soda_prompt_set(images_per_prompt=images_per_prompt)
        elif design == "agent":
            if path is None:
                raise PromptSetError(
                    "the agent design needs a CSV of instruction pairs (description, subgroup, dimension)"
                )
            pairs = read_instruction_pairs(path)
            built = (
                agent_prompt_set(pairs, images_per_prompt=images_per_prompt)
                if images_per_prompt
                else agent_prompt_set(pairs)
            )
        elif design == "file":
            if path is None:
                raise PromptSetError("a prompt file is needed (CSV or JSONL with a 'text' column)")
            built = prompt_set_from_file(path, images_per_prompt=images_per_prompt)
        else:
            raise PromptSetError(f"unknown prompt set {design!r}; choose one of {', '.join(DESIGNS)}")
    except (ValueError, KeyError, OSError) as exc:
        if isinstance(exc, PromptSetError):
            raise
        raise PromptSetError(str(exc)) from exc
    prompts = built.prompts[:limit] if limit else built.prompts
    return PromptSet(
        name=name or built.name,
        paper=built.paper,
        prompts=tuple(prompts),
        parent=built.parent,
        description=built.description,
    )


def prompt_set_from_file(path: Path, *, images_per_prompt: int | None = None) -> PromptSet:
    """Prompts from CSV or JSONL: ``text`` (required), ``condition``, ``images_per_prompt``; other
    fields become metadata. Errors name the row."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".csv":
        rows = [
            (f"row {number}", dict(row))
            for number, row in enumerate(csv.DictReader(io.StringIO(text)), start=2)
        ]
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"line {number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise PromptSetError(f"{path.name} line {number}: not valid JSON ({exc.msg})") from exc
    prompts = []
    for where, row in rows:
        if not isinstance(row, dict) or not str(row.get("text") or "").strip():
            raise PromptSetError(f"{path.name} {where}: needs a 'text'")
        per = row.pop("images_per_prompt", None) or images_per_prompt or 1
        try:
            prompts.append(
                PromptSpec(
                    text=str(row.pop("text")).strip(),
                    condition=str(row.pop("condition", "") or "base").strip(),
                    metadata={key: value for key, value in row.items() if value not in (None, "")},
                    images_per_prompt=int(per),
                )
            )
        except ValueError as exc:
            raise PromptSetError(f"{path.name} {where}: {exc}") from exc
    if not prompts:
        raise PromptSetError(f"{path.name}: has no prompts")
    try:
        return PromptSet(name=path.stem, paper="", prompts=tuple(prompts))
    except ValueError as exc:
        raise PromptSetError(f"{path.name}: {exc}") from exc


def prompt_set_to_json(prompt_set: PromptSet) -> list[dict[str, Any]]:
    return [
        {
            "text": p.text,
            "condition": p.condition,
            "metadata": dict(p.metadata),
            "images_per_prompt": p.images_per_prompt,
        }
        for p in prompt_set.prompts
    ]
