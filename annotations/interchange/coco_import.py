"""Importing boxes from a COCO object-detection file (``instances.json``) into one boxes question.

- ``images`` are matched to items: by the ``item`` field the workbench's COCO export writes, else by
  ``file_name`` equal to an item's external id, to an image's original name, to the export's
  ``files/<sha256>.<ext>`` path, or to the base name of one image's original name (when only one has
  it). An image that matches no item is refused by its index and file name when it has annotations,
  and left out (counted) when it has none.
- ``categories`` are matched to the options of the question's linked multi question by key, label
  or the slug of the name; a category that annotations use and no option matches is refused by name.
- ``bbox`` ``[x, y, width, height]`` in pixels becomes a box; every box of one image by one annotator
  is one answer. The image's size in the file must be the item's (boxes are not rescaled).
- The annotator: ``--annotator`` (and ``--kind``) when given; else the ``annotator``,
  ``annotator_kind`` and ``annotator_version`` fields the workbench's export writes; else ``coco``.
  Without a kind, an
  annotation with a ``score`` is a machine's, one without a person's.

All or nothing: the first bad image, category or annotation stops the import with its index and id,
and the study is left as it was. Answers go through ``foreign_answers.py`` (the linked multi question's
answer, when none exists, is the categories drawn).
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Any

from django.db import transaction

from annotations.interchange.foreign_answers import (
    AnswersReport,
    ForeignAnswer,
    ItemFacts,
    Who,
    foreign_answers_save,
)
from annotations.interchange.sources import Address, address_name, file_read
from annotations.models import Annotator, Item, ItemImage, Study
from common.checked_input import InputRefused, json_loads
from common.errors import ImportRefused
from protocols.schema import Question, slugify_option

DEFAULT_ANNOTATOR = "coco"
MAX_ANNOTATIONS = 2_000_000


def _load(address: Address) -> dict[str, Any]:
    name, raw = file_read(address)
    try:
        data = json_loads(raw.decode("utf-8-sig"), where=name)
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc
    except InputRefused as exc:  # not JSON, nested too deep, NaN, 1e400, a huge integer, \u0000
        raise ImportRefused(exc.message) from exc
    if not isinstance(data, dict):
        raise ImportRefused(
            f"{name}: a COCO file is an object with images, categories and annotations "
            "(a bare list of detections names no images: add them)"
        )
    for key in ("images", "categories", "annotations"):
        if not isinstance(data.get(key), list):
            raise ImportRefused(f"{name}: '{key}' must be a list")
    if len(data["annotations"]) > MAX_ANNOTATIONS:
        raise ImportRefused(f"{name}: more than {MAX_ANNOTATIONS} annotations; split the file")
    return data


def _boxes_question(study: Study, key: str) -> tuple[Question, Question]:
    protocol = study.protocol_obj
    if not protocol.has_question(key):
        boxes = [q.key for q in protocol.questions if q.kind == "boxes"]
        raise ImportRefused(
            f"question {key!r} is not in the protocol (boxes questions: {', '.join(boxes) or 'none'})"
        )
    question = protocol.question(key)
    if question.kind == "multi":
        linked = [q for q in protocol.questions if q.kind == "boxes" and q.linked_question == key]
        if len(linked) != 1:
            raise ImportRefused(f"question {key!r} is a multi question; name its boxes question")
        question = linked[0]
    if question.kind != "boxes" or question.linked_question is None:
        raise ImportRefused(f"question {key!r} is {question.kind}; COCO boxes go into a boxes question")
    return question, protocol.question(question.linked_question)


class _ItemIndex:
    """Ways a COCO image may name an item of the study."""

    def __init__(self, study: Study) -> None:
        self.by_external: dict[str, int] = {}
        self.by_name: dict[str, tuple[int, int]] = {}
        self.by_sha: dict[str, tuple[int, int]] = {}
        self.by_base: dict[str, list[tuple[int, int]]] = {}
        self.facts: dict[int, tuple[str, dict[str, Any]]] = {}
        self.sizes: dict[int, list[tuple[int, int] | None]] = {}
        for pk, external_id, metadata in Item.objects.filter(study=study).values_list(
            "id", "external_id", "metadata"
        ):
            self.by_external[external_id] = pk
            self.facts[pk] = (external_id, metadata or {})
        images = ItemImage.objects.filter(item__study=study).order_by("item_id", "position")
        for item_id, position, name, sha, width, height in images.values_list(
            "item_id", "position", "original_name", "sha256", "width", "height"
        ):
            self.sizes.setdefault(item_id, []).append((width, height) if width and height else None)
            if name:
                self.by_name.setdefault(name, (item_id, position))
                self.by_base.setdefault(PurePosixPath(name).name, []).append((item_id, position))
            if sha:
                self.by_sha.setdefault(sha, (item_id, position))

    def find(self, image: dict[str, Any]) -> tuple[int, int] | None:
        external = image.get("item")
        if isinstance(external, str | int) and str(external) in self.by_external:
            return self.by_external[str(external)], int(image.get("position", 0) or 0)
        name = image.get("file_name")
        if not isinstance(name, str) or not name:
            return None
        if name in self.by_external:
            return self.by_external[name], 0
        if name in self.by_name:
            return self.by_name[name]
        stem = PurePosixPath(name).stem
        if name.startswith("files/") and stem in self.by_sha:
            return self.by_sha[stem]
        base = self.by_base.get(PurePosixPath(name).name, [])
        if len(base) == 1:
            return base[0]
        if stem in self.by_external:
            return self.by_external[stem], 0
        return None


def _category_keys(
    categories: list[Any], linked: Question, used: set[Any], metadata_options: list[str]
) -> dict[Any, str]:
    lookup: dict[str, str] = {}
    for option in linked.options:
        lookup.setdefault(slugify_option(option.label), option.key)
        lookup.setdefault(option.label, option.key)
        lookup[option.key] = option.key
    for key in metadata_options:
        lookup.setdefault(key, key)
    found: dict[Any, str] = {}
    for index, category in enumerate(categories):
        if not isinstance(category, dict) or "id" not in category:
            raise ImportRefused(f"categories[{index}]: must be an object with an id and a name")
        name = str(category.get("name", ""))
        found_key = lookup.get(name) or lookup.get(slugify_option(name))
        if found_key is None:
            if category["id"] in used:
                options = ", ".join(o.key for o in linked.options) or "the items' own options"
                raise ImportRefused(
                    f"categories[{index}] {name!r} (id {category['id']}) is not an option of "
                    f"{linked.key!r} ({options})"
                )
            continue
        found[category["id"]] = found_key
    return found


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


@transaction.atomic
def coco_import(
    *, study: Study, address: Address, question: str, annotator: str | None = None, kind: str | None = None
) -> dict[str, Any]:
    """Import a COCO file's boxes into ``question`` of ``study`` (see the module docstring)."""
    if kind is not None and kind not in Annotator.Kind.values:
        raise ImportRefused("the annotator kind must be human or machine")
    data = _load(address)
    boxes_question, linked = _boxes_question(study, question)
    index = _ItemIndex(study)
    used_images = {a.get("image_id") for a in data["annotations"] if isinstance(a, dict)}
    used_categories = {a.get("category_id") for a in data["annotations"] if isinstance(a, dict)}
    images: dict[Any, tuple[int, int, dict[str, Any], str]] = {}
    unmatched = 0
    for number, image in enumerate(data["images"]):
        if not isinstance(image, dict) or "id" not in image:
            raise ImportRefused(f"images[{number}]: must be an object with an id")
        found = index.find(image)
        where = f"images[{number}] (id {image['id']}, file_name {str(image.get('file_name', ''))[:120]!r})"
        if found is None:
            if image["id"] in used_images:
                raise ImportRefused(f"{where}: matches no item of the study (by external id or file name)")
            unmatched += 1
            continue
        item_id, position = found
        sizes = index.sizes.get(item_id, [])
        size = sizes[position] if position < len(sizes) else None
        width, height = image.get("width"), image.get("height")
        if size is not None and isinstance(width, int | float) and isinstance(height, int | float):
            if _number(width) and _number(height) and (int(width), int(height)) != size:
                raise ImportRefused(
                    f"{where}: is {int(width)}x{int(height)} in the file but {size[0]}x{size[1]} in the study"
                )
        images[image["id"]] = (item_id, position, image, where)
    metadata_options = sorted(
        {
            option.key
            for _external, metadata in index.facts.values()
            for option in (linked.options_for(metadata) if linked.options_from else ())
        }
    )
    categories = _category_keys(data["categories"], linked, used_categories, metadata_options)
    grouped: dict[tuple[int, Who], tuple[str, list[dict[str, Any]]]] = {}
    for number, entry in enumerate(data["annotations"]):
        if not isinstance(entry, dict):
            raise ImportRefused(f"annotations[{number}]: must be an object")
        where = f"annotations[{number}] (id {entry.get('id')})"
        if entry.get("image_id") not in images:
            raise ImportRefused(f"{where}: image_id {entry.get('image_id')!r} is not in images")
        if entry.get("category_id") not in categories:
            raise ImportRefused(f"{where}: category_id {entry.get('category_id')!r} is not in categories")
        bbox = entry.get("bbox")
        if not isinstance(bbox, list) or len(bbox) != 4 or not all(_number(v) for v in bbox):
            raise ImportRefused(f"{where}: bbox must be [x, y, width, height] in pixels")
        if "score" in entry and entry["score"] is not None and not _number(entry["score"]):
            raise ImportRefused(f"{where}: score must be a number")
        who_kind = kind or (
            entry["annotator_kind"]
            if annotator is None and entry.get("annotator_kind") in Annotator.Kind.values
            else (Annotator.Kind.MACHINE if entry.get("score") is not None else Annotator.Kind.HUMAN)
        )
        name = annotator or (str(entry["annotator"]).strip() if entry.get("annotator") else DEFAULT_ANNOTATOR)
        if not name or len(name) > 150:
            raise ImportRefused(f"{where}: the annotator must be a name of 1 to 150 characters")
        item_id, position, _image, _where = images[entry["image_id"]]
        box = {
            "option": categories[entry["category_id"]],
            "x": bbox[0],
            "y": bbox[1],
            "w": bbox[2],
            "h": bbox[3],
        }
        if position:
            box["image"] = position
        version = str(entry.get("annotator_version") or "") if annotator is None else ""
        if who_kind == Annotator.Kind.HUMAN or len(version) > 64:
            version = ""
        key = (item_id, Who(kind=who_kind, name=name, version=version))
        grouped.setdefault(key, (where, []))[1].append(box)
    answers = []
    for (item_id, who), (where, boxes) in grouped.items():
        external_id, metadata = index.facts[item_id]
        facts = ItemFacts(item_id, external_id, metadata, tuple(index.sizes.get(item_id, [])))
        answers.append(
            ForeignAnswer(where=where, item=facts, who=who, question_key=boxes_question.key, value=boxes)
        )
    if not answers:
        raise ImportRefused(f"{address_name(address)}: has no annotations to import")
    report: AnswersReport = foreign_answers_save(study=study, answers=answers)
    return report.as_dict() | {
        "boxes": sum(len(boxes) for _where, boxes in grouped.values()),
        "images_left_out": unmatched,
        "question": boxes_question.key,
    }
