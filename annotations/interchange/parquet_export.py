"""Exporting a study for analysis: a zip holding two Parquet tables, written with pyarrow.

- ``annotations.parquet``: one row per answer, with the item's provenance (external id, kind,
  condition, model, prompt, seed, text, reference or not), the annotator (name, kind, version,
  pool), the question (key, kind) and the answer: ``value`` as JSON text (every kind, lossless), and
  typed columns beside it: ``label`` (likert, single and text answers; binary as ``"0"``/``"1"``),
  ``labels`` (multi: the option keys) and ``boxes`` (a list of ``{option, x, y, w, h, image}`` in
  original pixels);
- ``items.parquet``: one row per item: provenance, ``metadata`` and ``settings`` as JSON text, and
  ``images`` (a list of ``{name, sha256, width, height}``).

The members are stored uncompressed in the zip (Parquet compresses its own columns), so pandas can
read them straight from the archive. docs/import-export.md ("Parquet") gives the lines that load them
in pandas and in Hugging Face ``datasets``.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db.models import Prefetch

from annotations.models import Annotation, Item, ItemImage, Pool, Study
from annotations.selectors.pools import pools_in_study

CHUNK = 5000
ANNOTATIONS_NAME = "annotations.parquet"
ITEMS_NAME = "items.parquet"


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    box = pa.struct(
        [
            ("option", pa.string()),
            ("x", pa.int64()),
            ("y", pa.int64()),
            ("w", pa.int64()),
            ("h", pa.int64()),
            ("image", pa.int64()),
        ]
    )
    # The item's provenance leads both tables, in the same order (``_provenance``).
    provenance = [
        ("study_id", pa.int64()),
        ("study", pa.string()),
        ("item", pa.string()),
        ("item_kind", pa.string()),
        ("condition", pa.string()),
        ("model", pa.string()),
        ("prompt", pa.string()),
        ("seed", pa.int64()),
        ("text", pa.string()),
        ("is_reference", pa.bool_()),
    ]
    annotations = pa.schema(
        [
            *provenance,
            ("control_kind", pa.string()),
            ("annotator", pa.string()),
            ("annotator_kind", pa.string()),
            ("annotator_version", pa.string()),
            ("pool", pa.string()),
            ("question", pa.string()),
            ("question_kind", pa.string()),
            ("value", pa.string()),
            ("label", pa.string()),
            ("labels", pa.list_(pa.string())),
            ("boxes", pa.list_(box)),
            ("reason", pa.string()),
            ("shown", pa.list_(pa.string())),
            ("time_spent_ms", pa.int64()),
            ("source", pa.string()),
            ("created_at", pa.timestamp("us", tz="UTC")),
            ("updated_at", pa.timestamp("us", tz="UTC")),
        ]
    )
    image = pa.struct(
        [("name", pa.string()), ("sha256", pa.string()), ("width", pa.int64()), ("height", pa.int64())]
    )
    items = pa.schema(
        [
            *provenance,
            ("expert_only", pa.bool_()),
            ("control_kind", pa.string()),
            ("sha256", pa.string()),
            ("metadata", pa.string()),
            ("settings", pa.string()),
            ("images", pa.list_(image)),
        ]
    )
    return annotations, items


def _answer_columns(
    kind: str, value: Any
) -> tuple[str | None, list[str] | None, list[dict[str, Any]] | None]:
    if kind == "multi" and isinstance(value, list):
        return None, [str(v) for v in value], None
    if kind == "boxes" and isinstance(value, list):
        boxes = [
            {
                "option": str(box.get("option")),
                "x": int(box.get("x", 0)),
                "y": int(box.get("y", 0)),
                "w": int(box.get("w", 0)),
                "h": int(box.get("h", 0)),
                "image": int(box.get("image", 0)),
            }
            for box in value
            if isinstance(box, dict)
        ]
        return None, None, boxes
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value), None, None
    return None, None, None


def _provenance(study: Study, item: Item) -> dict[str, Any]:
    """The columns that lead both tables: the study and the item's provenance."""
    return {
        "study_id": study.pk,
        "study": study.name,
        "item": item.external_id,
        "item_kind": item.kind,
        "condition": item.condition,
        "model": item.model_name,
        "prompt": item.prompt,
        "seed": item.seed,
        "text": item.text,
        "is_reference": item.is_reference,
    }


def _annotation_rows(study: Study) -> Iterator[dict[str, Any]]:
    protocol = study.protocol_obj
    kinds = {question.key: question.kind for question in protocol.questions}
    pools = pools_in_study(study.pk)  # a person's pool in this study (docs/security.md, "Tenancy")
    rows = (
        Annotation.objects.filter(study=study)
        .order_by("id")
        .select_related("item", "annotator")
        .iterator(chunk_size=CHUNK)
    )
    for annotation in rows:
        item, annotator = annotation.item, annotation.annotator
        kind = kinds.get(annotation.question_key, "")
        label, labels, boxes = _answer_columns(kind, annotation.value)
        yield {
            **_provenance(study, item),
            "control_kind": item.control_kind,
            "annotator": annotator.name,
            "annotator_kind": annotator.kind,
            "annotator_version": annotator.version,
            "pool": pools.get(annotator.pk, Pool.CROWD),
            "question": annotation.question_key,
            "question_kind": kind,
            "value": json.dumps(annotation.value, ensure_ascii=False),
            "label": label,
            "labels": labels,
            "boxes": boxes,
            "reason": annotation.reason,
            "shown": annotation.shown if isinstance(annotation.shown, list) else None,
            "time_spent_ms": annotation.time_spent_ms,
            "source": annotation.source,
            "created_at": annotation.created_at,
            "updated_at": annotation.updated_at,
        }


def _item_rows(study: Study) -> Iterator[dict[str, Any]]:
    items = (
        Item.objects.filter(study=study)
        .order_by("id")
        .prefetch_related(Prefetch("images", queryset=ItemImage.objects.order_by("position")))
    )
    for item in items.iterator(chunk_size=CHUNK):
        yield {
            **_provenance(study, item),
            "expert_only": item.expert_only,
            "control_kind": item.control_kind,
            "sha256": item.sha256,
            "metadata": json.dumps(item.metadata, ensure_ascii=False),
            "settings": json.dumps(item.generation_settings, ensure_ascii=False),
            "images": [
                {
                    "name": image.original_name,
                    "sha256": image.sha256,
                    "width": image.width,
                    "height": image.height,
                }
                for image in item.images.all()
            ],
        }


def _write_table(rows: Iterator[dict[str, Any]], schema: Any, path: Path) -> None:
    """Rows to a Parquet file in row groups of ``CHUNK``, in bounded memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= CHUNK:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))


def export_parquet(study: Study, out: Path) -> None:
    """Write the zip of ``annotations.parquet`` and ``items.parquet`` (see the module docstring)."""
    annotations_schema, items_schema = _schemas()
    with tempfile.TemporaryDirectory() as folder:
        annotations_path = Path(folder) / ANNOTATIONS_NAME
        items_path = Path(folder) / ITEMS_NAME
        _write_table(_annotation_rows(study), annotations_schema, annotations_path)
        _write_table(_item_rows(study), items_schema, items_path)
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.write(annotations_path, ANNOTATIONS_NAME)
            archive.write(items_path, ITEMS_NAME)
