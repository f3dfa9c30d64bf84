"""Prompt sets: what to generate for each paper's design (SPEC section 3).

Every builder returns a :class:`PromptSet` of :class:`PromptSpec` rows. A spec carries the exact
prompt text, its SPEC condition string (``base``, ``DIMENSION:GROUP``, ``initial``/``refined``,
``default``/``stereotypical``/``non-stereotypical``), free metadata (identity, occupation, object,
query category, subgroup...) and how many images to generate for it. Templates and term lists live
in ``generation/prompts/data/`` (YAML and CSV) so a researcher can edit or replace them; every
builder also accepts its lists as arguments. No Django here: the job layer stores these rows.
"""

from __future__ import annotations

import csv
import itertools
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROMPT_DATA_DIR = Path(__file__).resolve().parent / "data"

# The same shape the item importer accepts (annotations/services/item_import.py).
CONDITION_RE = re.compile(r"^[A-Za-z0-9_.\- ]{1,60}(:[A-Za-z0-9_.\- ]{1,60})?$")

# Words starting with a vowel letter but a consonant sound take "a" ("a Ugandan", "a European").
_A_BEFORE_VOWEL = ("uni", "uga", "ukr", "uru", "usa", "euro", "one")
_AN_BEFORE_CONSONANT = ("hour", "honest", "honour", "honor", "heir")


@dataclass(frozen=True)
class PromptSpec:
    """One prompt to generate ``images_per_prompt`` images for, with its condition and metadata."""

    text: str
    condition: str = "base"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    images_per_prompt: int = 1

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("prompt text is empty")
        if not CONDITION_RE.match(self.condition):
            raise ValueError(
                f"condition {self.condition!r} is not of the form 'base', 'DIMENSION:GROUP', 'initial', ..."
            )
        if self.images_per_prompt < 1:
            raise ValueError(f"images_per_prompt must be at least 1, got {self.images_per_prompt}")


@dataclass(frozen=True)
class PromptSet:
    """A named list of prompts from one paper's design; ``parent`` names the set it derives from."""

    name: str
    paper: str
    prompts: tuple[PromptSpec, ...]
    parent: str | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("prompt set name is empty")
        texts = [p.text for p in self.prompts]
        duplicates = sorted({t for t in texts if texts.count(t) > 1})
        if duplicates:
            # Seeds derive from the text, so two rows with one text would draw the same images.
            raise ValueError(f"prompt set {self.name!r} repeats prompt texts: {duplicates[:5]}")

    @property
    def total_images(self) -> int:
        """Sum of ``images_per_prompt`` over the prompts."""
        return sum(p.images_per_prompt for p in self.prompts)

    def conditions(self) -> list[str]:
        """The distinct conditions, in first-seen order."""
        return list(dict.fromkeys(p.condition for p in self.prompts))

    def by_condition(self, condition: str) -> list[PromptSpec]:
        """The prompts of one condition."""
        return [p for p in self.prompts if p.condition == condition]


def indefinite_article(word: str) -> str:
    """``"an"`` before a vowel sound, else ``"a"`` (first letter, with a few spelled exceptions)."""
    lower = word.strip().lower()
    if lower.startswith(_AN_BEFORE_CONSONANT):
        return "an"
    if lower.startswith(_A_BEFORE_VOWEL):
        return "a"
    return "an" if lower[:1] in {"a", "e", "i", "o", "u"} else "a"


def _fill(template: str, **values: str) -> str:
    """Fill ``template``; one ``{a}`` becomes the article for the word that follows it."""
    if "{a}" not in template:
        return template.format(**values)
    head, tail = template.split("{a}", 1)
    rest = tail.lstrip().format(**values)
    return f"{head.format(**values)}{indefinite_article(rest)} {rest}"


def load_prompt_data(name: str, path: Path | str | None = None) -> dict[str, Any]:
    """Read ``prompt_data/<name>.yaml`` (or the researcher's own file at ``path``) as a dict."""
    source = Path(path) if path is not None else PROMPT_DATA_DIR / f"{name}.yaml"
    with source.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a YAML mapping at the top level")
    return data


def _clean_terms(terms: Iterable[str], what: str) -> list[str]:
    cleaned = [str(t).strip() for t in terms if str(t).strip()]
    if not cleaned:
        raise ValueError(f"{what}: the list is empty")
    return list(dict.fromkeys(cleaned))


# --- ssi ----------------------------------------------------------------------------------------

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
        for term in _clean_terms(chosen[category], f"ssi {category} terms"):
            prompts.append(
                PromptSpec(
                    text=_fill(data["templates"][category], term=term),
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


# --- visage -------------------------------------------------------------------------------------


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
    ids = _clean_terms(identities if identities is not None else data["identities"], "visage identities")
    per_prompt = images_per_prompt if images_per_prompt is not None else int(data["images_per_prompt"])
    prompts = [
        PromptSpec(
            text=_fill(template, identity=identity),
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
    ids = _clean_terms(identities if identities is not None else list(stereotypes), "visage pull identities")
    prompts: list[PromptSpec] = []
    for identity in ids:
        prompts.append(
            PromptSpec(
                text=_fill(pull["default"], identity=identity),
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
                            text=_fill(template, identity=identity, attribute=attribute),
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


# --- biasconnect --------------------------------------------------------------------------------


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
    words = [m.prefix for m in modifiers if m.prefix] + [subject] + [m.suffix for m in modifiers if m.suffix]
    return _fill(template, phrase=" ".join(words))


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
    for occupation in _clean_terms(
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
    next (A.7: "[A photo of a male nurse working indoors, ... outdoors]"). Metadata: ``subject``,
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
    if with_counterfactuals:
        for axis in (a for a in table if a not in axes):
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


# --- agent --------------------------------------------------------------------------------------

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


# --- soda ---------------------------------------------------------------------------------------


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
    for obj in _clean_terms(objects if objects is not None else data["objects"], "soda objects"):
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
