"""Prompt sets: what to generate for each paper's design (SPEC section 3); the pieces every paper shares.

Every builder (one module per paper beside this one: ``ssi``, ``visage``, ``biasconnect``, ``agent``,
``soda``) returns a :class:`PromptSet` of :class:`PromptSpec` rows. A spec carries the exact prompt
text, its SPEC condition string (``base``, ``DIMENSION:GROUP``, ``initial``/``refined``,
``default``/``stereotypical``/``non-stereotypical``), free metadata (identity, occupation, object,
query category, subgroup...) and how many images to generate for it. Templates and term lists live
in ``generation/prompts/data/`` (YAML and CSV) so a researcher can edit or replace them; every
builder also accepts its lists as arguments. No Django here: the job layer stores these rows.
``generation/prompts/sets.py`` picks a builder by design name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROMPT_DATA_DIR = Path(__file__).resolve().parent / "data"

# The same shape the item importer accepts (annotations/interchange/item_import.py).
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


def fill_template(template: str, **values: str) -> str:
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


def clean_terms(terms: Iterable[str], what: str) -> list[str]:
    """The non-blank terms, stripped, first occurrence kept; ValueError naming ``what`` if none is left."""
    cleaned = [str(t).strip() for t in terms if str(t).strip()]
    if not cleaned:
        raise ValueError(f"{what}: the list is empty")
    return list(dict.fromkeys(cleaned))
