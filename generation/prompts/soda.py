"""SODA prompt sets: each object under the base prompt and the 8 demographic conditions (Table 1).

Objects, the base template and the conditions' templates live in ``data/soda.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from generation.prompts.base import PromptSet, PromptSpec, clean_terms, load_prompt_data


def soda_prompt_set(
    objects: Sequence[str] | None = None,
    *,
    images_per_prompt: int | None = None,
    name: str = "soda",
    data_path: Path | str | None = None,
) -> PromptSet:
    """soda (Table 1): per object the base prompt "{object}, one product only, no people" and the
    8 demographic variants; 5 objects x 9 conditions = 45 prompts, 20 images each (900 per model).
    Metadata ``object``."""
    data = load_prompt_data("soda", data_path)
    per_prompt = images_per_prompt if images_per_prompt is not None else int(data["images_per_prompt"])
    prompts = []
    for obj in clean_terms(objects if objects is not None else data["objects"], "soda objects"):
        prompts.append(
            PromptSpec(
                text=data["base_template"].format(object=obj),
                condition="base",
                metadata={"object": obj},
                images_per_prompt=per_prompt,
            )
        )
        for row in data["conditions"]:
            prompts.append(
                PromptSpec(
                    text=row["template"].format(object=obj),
                    condition=row["condition"],
                    metadata={"object": obj},
                    images_per_prompt=per_prompt,
                )
            )
    return PromptSet(
        name=name,
        paper="soda",
        prompts=tuple(prompts),
        description="soda objects under the base prompt and 8 demographic conditions",
    )
