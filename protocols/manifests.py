"""The item manifest a protocol needs: which columns (CSV) or keys (JSONL), which of them are
required, and one or two example rows (docs/import-export.md, "Manifest templates").

Derived from the protocol itself, so a researcher's own protocol gets a template too:

- the item itself: ``text`` (unit ``text``), ``file`` (``image``; empty = a reference item whose image
  was not released) or ``files`` (``image_set``);
- ``options_from`` fields: required, a non-empty list of texts (the options shown for that item);
- ``applies_if`` fields: required, they decide which questions an item gets;
- ``{placeholders}`` in prompts: required for the items whose questions show them;
- the fields the paper's findings read (``PAPER_FIELDS``), and the provenance columns.

Plain Python: the import refuses rows by the same rules (``annotations/interchange/item_import.py``),
and pages render the templates (``manifest_csv``, ``manifest_jsonl``) and the preset preview's
example items (``example_items``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

from protocols.schema import PLACEHOLDER_RE, Protocol

FORMATS = ("csv", "jsonl")

# Metadata the findings of a paper read (findings/): not needed to annotate,
# but without them a section of the findings stays empty. (name, meaning, two examples)
PAPER_FIELDS: dict[str, list[tuple[str, str, tuple[Any, Any]]]] = {
    "visage": [
        ("identity", "the identity group the image depicts (findings; never shown)", ("Mexican", "Nigerian"))
    ],
    "agent": [
        (
            "subgroup",
            "the instruction pair's target subgroup, an option key (findings; never shown)",
            ("female", "asian"),
        )
    ],
    "ssi": [
        (
            "query",
            "the query the image set was generated for (pairs initial and refined sets)",
            ("a Mexican person", "a nurse"),
        ),
        ("initial_prompt", "a refined set only: the prompt of its initial set", ("", "")),
    ],
    "biasconnect": [("occupation", "the occupation of the counterfactual prompt", ("doctor", "doctor"))],
}

# Example values by field name (else a generic one): what a researcher would write.
EXAMPLES: dict[str, tuple[Any, Any]] = {
    "attributes": (
        ["sombrero", "poncho", "mustache", "briefcase", "laptop", "umbrella"],
        ["dashiki", "drum", "tie", "glasses"],
    ),
    "text": ("sombrero", "talkative"),
    "prompt": ("a photo of a Mexican person", "a photo of a Nigerian person"),
    "condition": ("base", "base"),
    "model": ("stable-diffusion-xl", "stable-diffusion-xl"),
    "seed": (1, 2),
}


@dataclass(frozen=True)
class ManifestField:
    name: str
    required: bool
    meaning: str
    examples: tuple[Any, Any]
    is_list: bool = False


@dataclass
class _Fields:
    items: dict[str, ManifestField] = field(default_factory=dict)

    def add(self, entry: ManifestField) -> None:
        if entry.name not in self.items:
            self.items[entry.name] = entry


def _applies_if_values(protocol: Protocol) -> dict[str, list[str]]:
    """Each ``applies_if`` field and its values, in the order the protocol names them."""
    values: dict[str, list[str]] = {}
    for question in protocol.questions:
        if question.applies_if:
            known = values.setdefault(question.applies_if["field"], [])
            known.extend(str(v) for v in question.applies_if["in"] if str(v) not in known)
    return values


def manifest_fields(protocol: Protocol) -> list[ManifestField]:
    """The manifest's fields for items of ``protocol``, required ones first."""
    fields = _Fields()
    fields.add(
        ManifestField(
            "external_id",
            False,
            "the item's name in the study (default: its file or text)",
            ("item-001", "item-002"),
        )
    )
    if protocol.unit == "text":
        fields.add(ManifestField("text", True, "the term annotators judge", EXAMPLES["text"]))
    elif protocol.unit == "image_set":
        fields.add(
            ManifestField(
                "files",
                True,
                "the set's images, in order (CSV: separated by ';')",
                (
                    ["set-001/1.png", "set-001/2.png", "set-001/3.png", "set-001/4.png"],
                    ["set-002/1.png", "set-002/2.png", "set-002/3.png", "set-002/4.png"],
                ),
                is_list=True,
            )
        )
    else:
        fields.add(
            ManifestField(
                "file",
                True,
                "the image, its path in the zip or folder (empty: a reference item)",
                ("images/001.png", "images/002.png"),
            )
        )
    for field_name, values in _applies_if_values(protocol).items():
        second = values[1] if len(values) > 1 else values[0]
        fields.add(
            ManifestField(
                field_name,
                True,
                f"selects the questions asked; one of: {', '.join(values)}",
                (values[0], second),
            )
        )
    for question in protocol.questions:
        if question.options_from:
            fields.add(
                ManifestField(
                    question.options_from,
                    True,
                    f"the options of question '{question.key}': a non-empty list of texts (CSV: a JSON list)",
                    EXAMPLES.get(
                        question.options_from, (["option one", "option two"], ["option three", "option four"])
                    ),
                    is_list=True,
                )
            )
    for question in protocol.questions:
        for name in PLACEHOLDER_RE.findall(question.prompt):
            if name != "text":
                fields.add(
                    ManifestField(
                        name,
                        True,
                        f"shown in the prompt of question '{question.key}'",
                        ("example", "example"),
                    )
                )
    if protocol.unit == "text":  # terms, not generated images: no paper fields, no provenance
        fields.add(
            ManifestField(
                "condition", False, "base, or a group of terms (default base)", EXAMPLES["condition"]
            )
        )
        return _ordered(fields)
    for name, meaning, examples in PAPER_FIELDS.get(protocol.paper, []):
        fields.add(ManifestField(name, False, meaning, examples))
    fields.add(ManifestField("prompt", False, "the generation prompt (provenance)", EXAMPLES["prompt"]))
    fields.add(ManifestField("model", False, "the model that made the image (provenance)", EXAMPLES["model"]))
    fields.add(
        ManifestField(
            "condition",
            False,
            "base, DIMENSION:GROUP, initial, refined... (default base)",
            EXAMPLES["condition"],
        )
    )
    fields.add(ManifestField("seed", False, "the generation seed, an integer", EXAMPLES["seed"]))
    return _ordered(fields)


def _ordered(fields: _Fields) -> list[ManifestField]:
    """``external_id``, then the required fields, then the optional ones."""
    entries = list(fields.items.values())
    return (
        entries[:1]
        + [entry for entry in entries[1:] if entry.required]
        + [entry for entry in entries[1:] if not entry.required]
    )


def required_metadata(protocol: Protocol) -> list[str]:
    """The required fields other than the item itself (``text``, ``file``, ``files``)."""
    return [
        f.name for f in manifest_fields(protocol) if f.required and f.name not in ("text", "file", "files")
    ]


def example_rows(protocol: Protocol) -> list[dict[str, Any]]:
    """Two example manifest records (JSON values; empty values left out)."""
    fields = manifest_fields(protocol)
    rows = []
    for index in (0, 1):
        row = {f.name: f.examples[index] for f in fields if f.examples[index] not in ("", None)}
        rows.append(_fill_placeholders(protocol, row))
    return rows


def _fill_placeholders(protocol: Protocol, row: dict[str, Any]) -> dict[str, Any]:
    """Leave out placeholders of questions that do not apply to this row (their items need none)."""
    needed = {
        name for question in protocol.questions_for(row) for name in PLACEHOLDER_RE.findall(question.prompt)
    }
    unused = {name for q in protocol.questions for name in PLACEHOLDER_RE.findall(q.prompt)} - needed
    return {key: value for key, value in row.items() if key not in unused}


def example_items(protocol: Protocol) -> list[dict[str, Any]]:
    """The example rows as items for the preview: ``text`` and ``metadata`` (the non-item fields);
    the second only when it is asked other questions than the first."""
    items: list[dict[str, Any]] = []
    for row in example_rows(protocol):
        metadata = {k: v for k, v in row.items() if k not in ("external_id", "file", "files", "text")}
        items.append({"text": row.get("text"), "metadata": metadata})
    first, second = (protocol.questions_for(dict(item["metadata"])) for item in items)
    return items if [q.key for q in first] != [q.key for q in second] else items[:1]


def manifest_csv(protocol: Protocol) -> str:
    """The CSV template: a header of every field and the example rows (lists: JSON, ``files``: ``;``)."""
    fields = manifest_fields(protocol)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([f.name for f in fields])
    for row in example_rows(protocol):
        writer.writerow([_csv_value(f.name, row.get(f.name, "")) for f in fields])
    return out.getvalue()


def _csv_value(name: str, value: Any) -> str:
    if isinstance(value, list):
        return ";".join(str(v) for v in value) if name == "files" else json.dumps(value, ensure_ascii=False)
    return str(value)


def manifest_jsonl(protocol: Protocol) -> str:
    """The JSONL template: one example record per line."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in example_rows(protocol))


def manifest_template(protocol: Protocol, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown template format {fmt!r}")
    return manifest_csv(protocol) if fmt == "csv" else manifest_jsonl(protocol)
