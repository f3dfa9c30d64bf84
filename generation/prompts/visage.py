"""ViSAGe prompt sets: identity prompts P1-P3, the stereotypical-pull sets and their SeeGULL inputs.

``visage_prompt_set`` builds the identity prompts (``data/visage.yaml``); ``visage_pull_prompt_set``
the default / stereotypical / non-stereotypical sets of section 6, from the stereotypes that
``seegull_stereotypes`` reads off a SeeGULL table and the random attributes ``sample_non_stereotypes``
draws.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from generation.prompts.base import PromptSet, PromptSpec, clean_terms, fill_template, load_prompt_data


def visage_prompt_set(
    identities: Sequence[str] | None = None,
    *,
    images_per_prompt: int | None = None,
    name: str = "visage",
    data_path: Path | str | None = None,
) -> PromptSet:
    """visage P1 "a photo of [id] person", P2 "a portrait of [id] person", P3 "an [id] person".

    One prompt per (identity, template), 5 images each by default (paper section 3.2: 15 images
    per identity). Condition ``base``; metadata ``identity`` and ``template`` (P1/P2/P3).
    """
    data = load_prompt_data("visage", data_path)
    ids = clean_terms(identities if identities is not None else data["identities"], "visage identities")
    per_prompt = images_per_prompt if images_per_prompt is not None else int(data["images_per_prompt"])
    prompts = [
        PromptSpec(
            text=fill_template(template, identity=identity),
            condition="base",
            metadata={"identity": identity, "template": key},
            images_per_prompt=per_prompt,
        )
        for identity in ids
        for key, template in data["prompts"].items()
    ]
    return PromptSet(
        name=name, paper="visage", prompts=tuple(prompts), description="visage P1-P3 over identity groups"
    )


def visage_pull_prompt_set(
    stereotypes: Mapping[str, Sequence[str]],
    non_stereotypes: Mapping[str, Sequence[str]],
    *,
    identities: Sequence[str] | None = None,
    images_per_prompt: int | None = None,
    name: str = "visage-pull",
    data_path: Path | str | None = None,
) -> PromptSet:
    """visage stereotypical-pull sets (section 6): ``default``, ``stereotypical``, ``non-stereotypical``.

    For each identity: d = "a/an id person"; for each attribute of ``stereotypes[id]`` (s) and of
    ``non_stereotypes[id]`` (ns) the three "described as attr" templates of ``visage.yaml``.
    15 images per prompt by default. ``identities`` defaults to the keys of ``stereotypes``.
    Metadata ``identity`` and, for s/ns, ``attribute`` and ``template`` (index into the list).
    """
    data = load_prompt_data("visage", data_path)
    pull = data["pull"]
    per_prompt = images_per_prompt if images_per_prompt is not None else int(pull["images_per_prompt"])
    ids = clean_terms(identities if identities is not None else list(stereotypes), "visage pull identities")
    prompts: list[PromptSpec] = []
    for identity in ids:
        prompts.append(
            PromptSpec(
                text=fill_template(pull["default"], identity=identity),
                condition="default",
                metadata={"identity": identity},
                images_per_prompt=per_prompt,
            )
        )
        for condition, table in (("stereotypical", stereotypes), ("non-stereotypical", non_stereotypes)):
            for attribute in list(dict.fromkeys(a.strip() for a in table.get(identity, ()) if a.strip())):
                for index, template in enumerate(pull["attribute_templates"]):
                    prompts.append(
                        PromptSpec(
                            text=fill_template(template, identity=identity, attribute=attribute),
                            condition=condition,
                            metadata={"identity": identity, "attribute": attribute, "template": index},
                            images_per_prompt=per_prompt,
                        )
                    )
    return PromptSet(
        name=name,
        paper="visage",
        prompts=tuple(prompts),
        description="visage stereotypical pull: default / stereotypical / non-stereotypical",
    )


def seegull_stereotypes(
    seegull_csv: Path | str,
    *,
    visual_attributes: Iterable[str] | None = None,
    min_na_stereo: int = 2,
) -> dict[str, list[str]]:
    """identity -> its stereotypical attributes from a SeeGULL table (SPEC section 6, visage).

    A pair counts when ``NA_stereo >= min_na_stereo`` (two of the three North-American annotators)
    and, if ``visual_attributes`` is given, its attribute is in it. Attributes keep file order.
    """
    visual = None if visual_attributes is None else {a.strip() for a in visual_attributes}
    result: dict[str, list[str]] = {}
    with Path(seegull_csv).open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            identity, attribute = row["identity"].strip(), row["attribute"].strip()
            if int(row["NA_stereo"] or 0) < min_na_stereo or (visual is not None and attribute not in visual):
                continue
            attrs = result.setdefault(identity, [])
            if attribute not in attrs:
                attrs.append(attribute)
    return result


def stereotypes_from_table(
    rows: Iterable[tuple[str, str, int | None, bool | None]], *, min_na_stereo: int = 2
) -> tuple[dict[str, list[str]], list[str]]:
    """identity -> its stereotypical attributes, and every attribute (the pool the non-stereotypes are
    drawn from), from a study's stereotype table rows (identity, attribute, NA_stereo, visual): the
    rule of ``seegull_stereotypes`` (``NA_stereo >= min_na_stereo``), an attribute rated not visual
    left out (not rated counts as visual, as the visage metrics read it)."""
    stereotypes: dict[str, list[str]] = {}
    pool: list[str] = []
    for identity, attribute, na_stereo, visual in rows:
        identity, attribute = identity.strip(), attribute.strip()
        if not identity or not attribute:
            continue
        if attribute not in pool:
            pool.append(attribute)
        if (na_stereo or 0) < min_na_stereo or visual is False:
            continue
        attrs = stereotypes.setdefault(identity, [])
        if attribute not in attrs:
            attrs.append(attribute)
    return stereotypes, pool


def sample_non_stereotypes(
    stereotypes: Mapping[str, Sequence[str]],
    pool: Sequence[str],
    *,
    seed: int,
) -> dict[str, list[str]]:
    """For each identity, as many attributes from ``pool`` as it has stereotypes, none of them its own.

    visage selects "an equal number, k, of stereotypical and random attributes" (section 4.2).
    Drawn with ``random.Random(seed)`` without replacement, so the same seed gives the same lists.
    """
    rng = random.Random(seed)
    candidates = list(dict.fromkeys(pool))
    result = {}
    for identity, own in stereotypes.items():
        allowed = [a for a in candidates if a not in set(own)]
        if len(allowed) < len(own):
            raise ValueError(f"pool has {len(allowed)} attributes for {identity!r}, needs {len(own)}")
        result[identity] = rng.sample(allowed, len(own))
    return result
