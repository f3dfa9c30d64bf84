"""BiasConnect prompt sets: occupations with counterfactuals over bias axes, and mitigation sets.

The axes and their counterfactual phrases (paper Table 2) live in ``data/biasconnect.yaml``;
``biasconnect_prompt_set`` builds the occupation set (A.1) and ``biasconnect_mitigation_set`` the
prompt-modification mitigation of one subject (A.7).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generation.prompts.base import PromptSet, PromptSpec, clean_terms, fill_template, load_prompt_data


@dataclass(frozen=True)
class Counterfactual:
    """One counterfactual of a bias axis: the group key and the words it adds to the prompt."""

    axis: str
    group: str
    prefix: str = ""
    suffix: str = ""


def biasconnect_axes(data_path: Path | str | None = None) -> dict[str, list[Counterfactual]]:
    """axis -> its counterfactuals, from ``biasconnect.yaml`` (paper Table 2), in file order."""
    data = load_prompt_data("biasconnect", data_path)
    return {
        axis: [
            Counterfactual(
                axis=axis,
                group=str(row["group"]),
                prefix=str(row.get("prefix", "")),
                suffix=str(row.get("suffix", "")),
            )
            for row in rows
        ]
        for axis, rows in data["axes"].items()
    }


def _biasconnect_text(template: str, subject: str, modifiers: Sequence[Counterfactual]) -> str:
    """The base template with ``subject`` between the modifiers' prefixes and suffixes."""
    words = [m.prefix for m in modifiers if m.prefix] + [subject] + [m.suffix for m in modifiers if m.suffix]
    return fill_template(template, phrase=" ".join(words))


def biasconnect_prompt_set(
    occupations: Sequence[str] | None = None,
    *,
    axes: Sequence[str] | None = None,
    images_per_prompt: int | None = None,
    name: str = "biasconnect-occupations",
    data_path: Path | str | None = None,
) -> PromptSet:
    """biasconnect occupation set (A.1, Table 2): per occupation a ``base`` prompt and its counterfactuals.

    With the shipped data: 26 occupations x (1 + 26 counterfactuals over 8 axes) = 702 prompts,
    48 images each. Conditions ``base`` and ``AXIS:GROUP`` (``gender:female``); metadata
    ``occupation`` and, for counterfactuals, ``axis`` and ``group``.
    """
    data = load_prompt_data("biasconnect", data_path)
    table = biasconnect_axes(data_path)
    chosen_axes = list(table) if axes is None else list(axes)
    unknown = sorted(set(chosen_axes) - set(table))
    if unknown:
        raise ValueError(f"unknown biasconnect axes {unknown}; use {list(table)}")
    per_prompt = images_per_prompt if images_per_prompt is not None else int(data["images_per_prompt"])
    prompts = []
    template = data["base_template"]
    for occupation in clean_terms(
        occupations if occupations is not None else data["occupations"], "biasconnect occupations"
    ):
        prompts.append(
            PromptSpec(
                text=_biasconnect_text(template, occupation, ()),
                condition="base",
                metadata={"occupation": occupation},
                images_per_prompt=per_prompt,
            )
        )
        for axis in chosen_axes:
            for cf in table[axis]:
                prompts.append(
                    PromptSpec(
                        text=_biasconnect_text(template, occupation, (cf,)),
                        condition=f"{axis}:{cf.group}",
                        metadata={"occupation": occupation, "axis": axis, "group": cf.group},
                        images_per_prompt=per_prompt,
                    )
                )
    return PromptSet(
        name=name,
        paper="biasconnect",
        prompts=tuple(prompts),
        description="biasconnect occupations with counterfactuals over bias axes",
    )


def biasconnect_mitigation_set(
    subject: str,
    mitigate: Sequence[str],
    *,
    total_images: int = 48,
    with_counterfactuals: bool = False,
    counterfactual_axes: Sequence[str] | None = None,
    name: str | None = None,
    parent: str | None = None,
    data_path: Path | str | None = None,
) -> PromptSet:
    """Prompt-modification mitigation (biasconnect A.7) of ``subject`` along the ``mitigate`` axes.

    The mitigated prompt set is every combination (Cartesian product) of the counterfactual phrases
    of the mitigated axes, the first axis varying fastest, as in A.7: environment then clothing for
    "nurse" gives "A photo of a nurse working indoors in formal attire", "... working outdoors in
    formal attire", "... indoors in informal attire", "... outdoors in informal attire" (condition
    ``base``: it is the mitigated model's initial set). Each prompt gets
    ``ceil(total_images / n)`` images for n combinations, so the set holds ``total_images`` or a
    few more, equally split ("such that the total is 48 (or more)").

    ``with_counterfactuals`` also adds, for every axis not mitigated and each of its groups, the
    same n combinations with that group's phrase after the mitigated ones (condition
    ``AXIS:GROUP``), each prompt with the same image count, which is what BiasConnect measures
    next (A.7: "[A photo of a male nurse working indoors, ... outdoors]"); ``counterfactual_axes``
    narrows them to the axes a study measures (default: every axis). Metadata: ``subject``,
    ``mitigation`` (axis -> group) and, for counterfactuals, ``axis`` and ``group``.
    """
    data = load_prompt_data("biasconnect", data_path)
    table = biasconnect_axes(data_path)
    axes = list(dict.fromkeys(mitigate))
    if not axes:
        raise ValueError("name at least one axis to mitigate")
    unknown = sorted(set(axes) - set(table))
    if unknown:
        raise ValueError(f"unknown biasconnect axes {unknown}; use {list(table)}")
    if total_images < 1:
        raise ValueError(f"total_images must be at least 1, got {total_images}")
    subject = subject.strip()
    if not subject:
        raise ValueError("subject is empty")
    template = data["base_template"]
    # product() varies its last argument fastest; reversing makes the first mitigated axis fastest.
    combos = [tuple(reversed(c)) for c in itertools.product(*(table[a] for a in reversed(axes)))]
    per_prompt = math.ceil(total_images / len(combos))
    prompts = []
    for combo in combos:
        prompts.append(
            PromptSpec(
                text=_biasconnect_text(template, subject, combo),
                condition="base",
                metadata={"subject": subject, "mitigation": {cf.axis: cf.group for cf in combo}},
                images_per_prompt=per_prompt,
            )
        )
    if counterfactual_axes is not None:
        unknown = sorted(set(counterfactual_axes) - set(table))
        if unknown:
            raise ValueError(f"unknown biasconnect axes {unknown}; use {list(table)}")
    measured = set(table if counterfactual_axes is None else counterfactual_axes)
    if with_counterfactuals:
        for axis in (a for a in table if a not in axes and a in measured):
            for cf in table[axis]:
                for combo in combos:
                    prompts.append(
                        PromptSpec(
                            text=_biasconnect_text(template, subject, (*combo, cf)),
                            condition=f"{axis}:{cf.group}",
                            metadata={
                                "subject": subject,
                                "mitigation": {m.axis: m.group for m in combo},
                                "axis": axis,
                                "group": cf.group,
                            },
                            images_per_prompt=per_prompt,
                        )
                    )
    return PromptSet(
        name=name or f"biasconnect-mitigation-{subject.replace(' ', '_')}-{'+'.join(axes)}",
        paper="biasconnect",
        prompts=tuple(prompts),
        parent=parent,
        description=f"prompt-modification mitigation of {subject!r} along {', '.join(axes)}",
    )
