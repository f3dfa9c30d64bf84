"""Importing image embeddings and captions made elsewhere (a GPU box, a hosted model); all or nothing.

A JSONL line (docs/import-export.md, "Embeddings and captions"):

- ``{"item": EXTERNAL_ID, "labeller": NAME, "version": VERSION, "embedding": [0.1, -0.3, ...]}``: one
  image embedding as a list of floats, or a list of such lists (one per image of an image-set item);
- ``{"item": EXTERNAL_ID, "labeller": NAME, "version": VERSION, "captions": ["a man in a hat", ...]}``.

Checks, each refusing the whole file with the line number: the item is in the study; exactly one of
``embedding`` / ``captions``; numbers are finite (and fit float32); one dimension per labeller version
(across the file and what that version already stored); an embedding has as many rows as its item has
images; sizes are bounded (``MAX_*``); no (item, labeller, version, kind) twice. The labeller is the
study's own machine annotator (name, version), created when new (as the annotation import does:
``machine_annotator_for_import``). A feature already
stored for the same (item, labeller, version, kind) is replaced.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Count

from annotations.interchange.records import jsonl_objects, utf8_text
from annotations.interchange.sources import Address, file_read
from annotations.models import Annotator, Item, ItemFeature, Study
from annotations.services.annotation_writes import (
    machine_annotator_for_import,
    machine_annotator_imported_find,
)
from common.errors import ImportRefused

MAX_DIMENSION = 8192
MAX_IMAGES_PER_ITEM = 64
MAX_CAPTIONS = 100
MAX_CAPTION_CHARS = 2000
MAX_LINES = 500_000
FLOAT32_MAX = float(np.finfo(np.float32).max)
FIELDS = {"item", "labeller", "version", "embedding", "captions"}


@dataclass
class FeatureImportReport:
    """What an import wrote: new rows, replaced rows, per kind, and the labellers it created."""

    created: int = 0
    replaced: int = 0
    embeddings: int = 0
    captions: int = 0
    labellers_created: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "replaced": self.replaced,
            "embeddings": self.embeddings,
            "captions": self.captions,
            "labellers_created": self.labellers_created,
        }


@dataclass(frozen=True)
class _Feature:
    line: int
    item_id: int
    labeller: tuple[str, str]
    kind: str
    matrix: np.ndarray | None
    captions: list[str] | None


def _parse(data: bytes, name: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        records = list(jsonl_objects(utf8_text(data, name), limit=MAX_LINES))
    except ImportRefused as exc:
        raise ImportRefused(
            f"{name}: {exc.message}" if exc.message.startswith("more than") else exc.message
        ) from exc
    if not records:
        raise ImportRefused(f"{name}: has no features")
    return records


def _number(value: Any, number: int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImportRefused(f"line {number}: the embedding holds {json.dumps(value)[:40]}, not a number")
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise ImportRefused(f"line {number}: the embedding holds {value!r}; numbers must be finite (float32)")
    return float(value)


def _embedding(value: Any, number: int) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise ImportRefused(f"line {number}: embedding must be a non-empty list of numbers (or of lists)")
    rows = value if isinstance(value[0], list) else [value]
    if len(rows) > MAX_IMAGES_PER_ITEM:
        raise ImportRefused(f"line {number}: more than {MAX_IMAGES_PER_ITEM} embedding rows")
    width = len(rows[0]) if isinstance(rows[0], list) else 0
    if not 1 <= width <= MAX_DIMENSION:
        raise ImportRefused(f"line {number}: an embedding needs 1 to {MAX_DIMENSION} numbers, not {width}")
    for row in rows:
        if not isinstance(row, list) or len(row) != width:
            raise ImportRefused(f"line {number}: every embedding row must be a list of {width} numbers")
    return np.asarray([[_number(v, number) for v in row] for row in rows], dtype="<f4")


def _captions(value: Any, number: int) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_CAPTIONS:
        raise ImportRefused(f"line {number}: captions must be a list of 1 to {MAX_CAPTIONS} strings")
    for caption in value:
        if not isinstance(caption, str) or len(caption) > MAX_CAPTION_CHARS:
            raise ImportRefused(
                f"line {number}: each caption must be a string of at most {MAX_CAPTION_CHARS} characters"
            )
    return [c.strip() for c in value]


def _labeller(record: dict[str, Any], number: int) -> tuple[str, str]:
    name, version = record.get("labeller"), record.get("version", "")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 150:
        raise ImportRefused(f"line {number}: labeller must be a name of 1 to 150 characters")
    if version is None:
        version = ""
    if not isinstance(version, str | int) or isinstance(version, bool) or len(str(version)) > 64:
        raise ImportRefused(f"line {number}: version must be a string of at most 64 characters")
    return name.strip(), str(version).strip()


def _stored_dimensions(
    study: Study, labellers: set[tuple[str, str]]
) -> dict[tuple[str, str], tuple[int, int]]:
    """(name, version) -> (dimension, annotator id) of the embeddings those labellers (this study's
    own, as the import finds them) already stored."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for name, version in labellers:
        annotator = machine_annotator_imported_find(study=study, name=name, version=version)
        if annotator is None:
            continue
        stored = ItemFeature.objects.filter(annotator=annotator, kind=ItemFeature.Kind.EMBEDDING).first()
        if stored is not None:
            shape = stored.data.get("shape") or [1, len(bytes(stored.vector or b"")) // 4]
            found[(name, version)] = (int(shape[-1]), annotator.pk)
    return found


def features_import_records(
    *, study: Study, records: list[tuple[int, dict[str, Any]]]
) -> FeatureImportReport:
    """Validate every record (see the module docstring), then store them all in one transaction."""
    wanted = {str(record.get("item")) for _n, record in records}
    items = dict(Item.objects.filter(study=study, external_id__in=wanted).values_list("external_id", "id"))
    image_counts = dict(
        Item.objects.filter(id__in=items.values()).annotate(n=Count("images")).values_list("id", "n")
    )
    features: list[_Feature] = []
    seen: dict[tuple[int, tuple[str, str], str], int] = {}
    dimensions: dict[tuple[str, str], tuple[int, int]] = {}
    for number, record in records:
        unknown = sorted(set(record) - FIELDS)
        if unknown:
            raise ImportRefused(
                f"line {number}: unknown field '{unknown[0]}' (fields: {', '.join(sorted(FIELDS))})"
            )
        if "item" not in record:
            raise ImportRefused(f"line {number}: 'item' is missing")
        item_id = items.get(str(record["item"]))
        if item_id is None:
            raise ImportRefused(f"line {number}: item {str(record['item'])[:100]!r} is not in this study")
        labeller = _labeller(record, number)
        if ("embedding" in record) == ("captions" in record):
            raise ImportRefused(f"line {number}: give exactly one of 'embedding' and 'captions'")
        if "embedding" in record:
            matrix = _embedding(record["embedding"], number)
            images = image_counts.get(item_id, 0)
            if images and matrix.shape[0] != images:
                raise ImportRefused(
                    f"line {number}: item {record['item']!r} has {images} image(s); "
                    f"the embedding has {matrix.shape[0]} row(s)"
                )
            width = int(matrix.shape[1])
            first = dimensions.setdefault(labeller, (width, number))
            if first[0] != width:
                raise ImportRefused(
                    f"line {number}: {labeller[0]} {labeller[1]} embeddings have {first[0]} dimensions "
                    f"(line {first[1]}); this one has {width}"
                )
            kind, captions = ItemFeature.Kind.EMBEDDING.value, None
        else:
            matrix, captions, kind = (
                None,
                _captions(record["captions"], number),
                ItemFeature.Kind.CAPTIONS.value,
            )
        key = (item_id, labeller, kind)
        if key in seen:
            raise ImportRefused(f"line {number}: repeats the {kind} of line {seen[key]}")
        seen[key] = number
        features.append(_Feature(number, item_id, labeller, kind, matrix, captions))
    for labeller, (width, _annotator) in _stored_dimensions(study, set(dimensions)).items():
        if dimensions[labeller][0] != width:
            raise ImportRefused(
                f"line {dimensions[labeller][1]}: {labeller[0]} {labeller[1]} already stored embeddings of "
                f"{width} dimensions; this file has {dimensions[labeller][0]} "
                "(a new dimension is a new version)"
            )
    return _write(study, features)


@transaction.atomic
def _write(study: Study, features: list[_Feature]) -> FeatureImportReport:
    report = FeatureImportReport()
    annotators: dict[tuple[str, str], Annotator] = {}
    for name, version in dict.fromkeys(f.labeller for f in features):
        annotator, created = machine_annotator_for_import(study=study, name=name, version=version)
        if created:
            report.labellers_created.append(f"{name} {version}".strip())
        annotators[(name, version)] = annotator
    rows = []
    for f in features:
        annotator = annotators[f.labeller]
        if f.matrix is not None:
            rows.append(
                ItemFeature(
                    item_id=f.item_id,
                    annotator=annotator,
                    kind=f.kind,
                    vector=f.matrix.tobytes(),
                    data={"shape": list(f.matrix.shape), "imported": True},
                )
            )
            report.embeddings += 1
        else:
            rows.append(
                ItemFeature(
                    item_id=f.item_id,
                    annotator=annotator,
                    kind=f.kind,
                    data={"captions": f.captions, "imported": True},
                )
            )
            report.captions += 1
    # Replaced rows are deleted and written anew (a new id tells the findings cache they changed).
    replaced: dict[tuple[int, str], list[int]] = defaultdict(list)
    for f in features:
        replaced[(annotators[f.labeller].pk, f.kind)].append(f.item_id)
    for (annotator_id, kind), item_ids in replaced.items():
        for start in range(0, len(item_ids), 1000):
            report.replaced += ItemFeature.objects.filter(
                annotator_id=annotator_id, kind=kind, item_id__in=item_ids[start : start + 1000]
            ).delete()[0]
    ItemFeature.objects.bulk_create(rows, batch_size=500)
    report.created = len(rows) - report.replaced
    return report


def features_import(*, study: Study, address: Address) -> FeatureImportReport:
    """Import a JSONL file of embeddings and captions into ``study``'s items; all or nothing.
    ``path``: a local file or a bucket object (``annotations.interchange.sources.file_read``)."""
    name, data = file_read(address, limit=settings.WORKBENCH_MAX_UPLOAD_BYTES)
    return features_import_records(study=study, records=_parse(data, name))
