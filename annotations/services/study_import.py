"""Rebuilding a study from its export (``study.jsonl``, or a zip holding it and the image files)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from django.db import transaction

from annotations.errors import ImportRefused
from annotations.files import FileSource, ZipSource
from annotations.models import Annotation, AnnotationRevision, Annotator, Study, User
from annotations.services.annotation_writes import annotations_import_records
from annotations.services.item_import import items_import_records
from annotations.services.studies import protocol_resolve, study_create

ITEM_FIELDS = ("external_id", "text", "prompt", "model", "condition", "seed", "settings", "metadata")


def _records(data: bytes, name: str) -> list[tuple[int, dict[str, Any]]]:
    records = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportRefused(f"{name} line {number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict) or "type" not in record:
            raise ImportRefused(f"{name} line {number}: not a workbench export record")
        records.append((number, record))
    if not records or records[0][1]["type"] != "study":
        raise ImportRefused(f"{name}: does not start with a study record (is it a workbench export?)")
    return records


def study_import(*, owner: User, path: Path, name: str | None = None) -> Study:
    """Create a new study from an export; all or nothing. Returns the new study."""
    source: FileSource | None = None
    if path.suffix.lower() == ".zip":
        source = ZipSource(path)
        try:
            data = source.read("study.jsonl", limit=1 << 40)
        except ImportRefused as exc:
            source.close()
            raise ImportRefused(f"{path.name}: has no study.jsonl") from exc
    elif path.is_file():
        data = path.read_bytes()
    else:
        raise ImportRefused(f"{path}: no such file")
    try:
        return _study_import(owner=owner, records=_records(data, path.name), source=source, name=name)
    except (zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise ImportRefused(f"{path.name}: unreadable ({exc})") from exc
    finally:
        if source is not None:
            source.close()


@transaction.atomic
def _study_import(*, owner: User, records: list[tuple[int, dict[str, Any]]], source: FileSource | None,
                  name: str | None) -> Study:
    head = records[0][1]
    protocol = protocol_resolve(protocol=head.get("protocol"), source="export")
    study = study_create(
        owner=owner, name=name or str(head.get("name", "Imported study")), protocol=protocol,
        preset=str(head.get("preset", "")), overlap=int(head.get("overlap", 3)),
        lease_minutes=int(head.get("lease_minutes", 30)), description=str(head.get("description", "")),
        options=head.get("options") or {},
    )
    item_records: list[tuple[str, dict[str, Any]]] = []
    annotation_records: list[tuple[int, dict[str, Any]]] = []
    revisions: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}
    annotator_info: dict[tuple[str, str, str], dict[str, Any]] = {}
    for number, record in records[1:]:
        kind = record["type"]
        if kind == "annotator":
            annotator_info[(record.get("kind", "human"), record.get("name", ""), record.get("version", ""))] = record
        elif kind == "item":
            row = {key: record[key] for key in ITEM_FIELDS if key in record and record[key] not in (None, "")}
            files = record.get("files") or []
            if files and source is not None:
                row["files"] = [entry["path"] for entry in files]
                row["original_names"] = [entry.get("name") or entry["path"] for entry in files]
            elif files:
                row.setdefault("metadata", {})
                row["metadata"] = {**row["metadata"], "exported_files": [entry.get("name") for entry in files]}
            item_records.append((f"line {number}", row))
        elif kind == "annotation":
            line = {key: record[key] for key in ("item", "annotator", "annotator_kind", "question", "value",
                                                 "reason", "shown", "time_spent_ms") if record.get(key) is not None}
            if record.get("annotator_version"):
                line["annotator_version"] = record["annotator_version"]
            info = annotator_info.get((record.get("annotator_kind", "human"), record["annotator"],
                                       record.get("annotator_version", "")))
            if info and info.get("kind") == "human":
                line["pool"] = info.get("pool") or "crowd"
                if info.get("attributes"):
                    line["annotator_attributes"] = info["attributes"]
            annotation_records.append((number, line))
            if record.get("revisions"):
                revisions[(record["item"], record["annotator"], record.get("annotator_kind", "human"),
                           record.get("annotator_version", ""), record["question"])] = record["revisions"]
        else:
            raise ImportRefused(f"line {number}: unknown record type {kind!r}")
    if item_records:
        items_import_records(study=study, records=item_records, source=source)
    if annotation_records:
        annotations_import_records(study=study, records=annotation_records)
    _restore_revisions(study, revisions)
    return study


def _restore_revisions(study: Study, revisions: dict[tuple[str, str, str, str, str], list[dict[str, Any]]]) -> None:
    if not revisions:
        return
    annotations = Annotation.objects.filter(study=study).select_related("item", "annotator")
    rows = []
    for annotation in annotations.iterator(chunk_size=2000):
        annotator: Annotator = annotation.annotator
        key = (annotation.item.external_id, annotator.name, annotator.kind, annotator.version, annotation.question_key)
        for revision in revisions.get(key, []):
            rows.append(AnnotationRevision(annotation=annotation, value=revision.get("value"),
                                           shown=revision.get("shown"), reason=revision.get("reason") or ""))
    AnnotationRevision.objects.bulk_create(rows, batch_size=2000)
