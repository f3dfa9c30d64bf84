"""Exporting a study for Label Studio 1.x: a zip with ``tasks.json`` (tasks with ``annotations`` by
people and ``predictions`` by machine labellers, in the JSON Label Studio imports), ``labeling-config.xml``
(generated from the protocol by ``annotations/interchange/labelstudio/config.py``) and the images under
``files/`` (serve them to Label Studio as local files: ``/data/local-files/?d=files/...``). An image set's
images are the list ``data.images`` (``<Image valueList>``; a rectangle's ``item_index`` is its image);
a question whose options come from the item lists them in ``data.options_KEY`` (dynamic choices).

``import_labelstudio ZIP --create NAME`` reads the same zip back into the same items, annotations and
boxes (see docs/import-export.md "Label Studio": what travels and what does not).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from django.db.models import Prefetch

from annotations.interchange.labelstudio.config import (
    IMAGES_FIELD,
    ConfigError,
    likert_as_rating,
    options_field,
    protocol_to_config,
    task_options,
)
from annotations.interchange.labelstudio.importer import PLACEHOLDER_DOMAIN, SCORES_FIELD
from annotations.models import Annotation, Annotator, Assignment, Item, ItemImage, Study
from annotations.services.stored_files import item_file_open
from protocols.schema import Protocol

CHUNK = 1000
TASKS_NAME = "tasks.json"
CONFIG_NAME = "labeling-config.xml"


def _file_path(image: ItemImage) -> str:
    return f"files/{image.sha256}{PurePosixPath(image.original_name).suffix.lower()[:8]}"


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _person(annotator: Annotator) -> dict[str, Any]:
    """``completed_by`` as a snapshot export writes it; a person without an email address gets one at
    the reserved ``.invalid`` domain, which the import reads back as that person's name."""
    user = annotator.user
    email = user.email if user is not None and user.email else ""
    if not email:
        local = (
            re.sub(r"[^A-Za-z0-9._+-]+", "-", annotator.name).strip("-.")[:60] or f"annotator-{annotator.pk}"
        )
        email = f"{local}{PLACEHOLDER_DOMAIN}"
    return {"id": annotator.pk, "email": email, "first_name": annotator.name, "last_name": ""}


def _results(
    protocol: Protocol, answers: list[Annotation], obj: str, sizes: list[tuple[int, int] | None]
) -> tuple[list[dict[str, Any]], int]:
    """Label Studio results for one annotator's answers on one item, and boxes left out (no image size)."""
    results: list[dict[str, Any]] = []
    left_out = 0
    for annotation in answers:
        if not protocol.has_question(annotation.question_key):
            continue
        question = protocol.question(annotation.question_key)
        head = {"from_name": question.key, "to_name": obj, "origin": "manual"}
        value = annotation.value
        if question.kind == "boxes":
            for index, box in enumerate(value if isinstance(value, list) else []):
                position = int(box.get("image", 0))
                size = sizes[position] if position < len(sizes) else None
                if size is None or (position and protocol.unit != "image_set"):
                    left_out += 1
                    continue
                width, height = size
                where = {"item_index": position} if protocol.unit == "image_set" else {}
                results.append(
                    {
                        "id": f"{question.key}-{annotation.pk}-{index}",
                        "type": "rectanglelabels",
                        "original_width": width,
                        "original_height": height,
                        "image_rotation": 0,
                        "value": {
                            "x": box["x"] / width * 100,
                            "y": box["y"] / height * 100,
                            "width": box["w"] / width * 100,
                            "height": box["h"] / height * 100,
                            "rotation": 0,
                            "rectanglelabels": [box["option"]],
                        },
                        **where,
                        **head,
                    }
                )
            continue
        if question.kind == "text":
            body: dict[str, Any] = {"type": "textarea", "value": {"text": [str(value)]}}
        elif likert_as_rating(question):
            keys = [option.key for option in question.options]
            if value not in keys:
                continue
            body = {"type": "rating", "value": {"rating": keys.index(value) + 1}}
        elif question.kind == "multi":
            body = {"type": "choices", "value": {"choices": [str(v) for v in value]}}
        else:
            body = {"type": "choices", "value": {"choices": [str(value)]}}
        results.append({"id": f"{question.key}-{annotation.pk}", **body, **head})
    return results, left_out


def _task(
    protocol: Protocol, item: Item, answers: list[Annotation], skips: list[Assignment], obj: str
) -> tuple[dict[str, Any], int]:
    images = list(item.images.all())
    first = images[0] if images else None
    metadata = dict(item.metadata)
    raw_scores = metadata.get(SCORES_FIELD)
    scores: dict[str, Any] = raw_scores if isinstance(raw_scores, dict) else {}
    data: dict[str, Any] = {}
    if obj == "text":
        data["text"] = item.text
    elif protocol.unit == "image_set":
        data[IMAGES_FIELD] = [f"/data/local-files/?d={_file_path(image)}" for image in images if image.file]
    elif first is not None and first.file:
        data[obj] = f"/data/local-files/?d={_file_path(first)}"
    else:
        data[obj] = str(metadata.get(obj, "")) if isinstance(metadata.get(obj), str) else ""
    data["external_id"] = item.external_id
    for name, field in (("prompt", item.prompt), ("model", item.model_name), ("condition", item.condition)):
        if field:
            data[name] = field
    if item.seed is not None:
        data["seed"] = item.seed
    if item.generation_settings:
        data["settings"] = item.generation_settings
    if item.expert_only:
        data["expert_only"] = True
    data["metadata"] = metadata
    for question in protocol.questions:
        if question.options_from is not None and question.applies_to(metadata):
            data[options_field(question)] = task_options(question, metadata)
    sizes = [(image.width, image.height) if image.width and image.height else None for image in images]
    by_annotator: dict[int, list[Annotation]] = {}
    for annotation in answers:
        by_annotator.setdefault(annotation.annotator_id, []).append(annotation)
    annotations: list[dict[str, Any]] = []
    predictions: list[dict[str, Any]] = []
    left_out = 0
    for group in by_annotator.values():
        annotator = group[0].annotator
        results, lost = _results(protocol, group, obj, sizes)
        left_out += lost
        created = min(a.created_at for a in group)
        updated = max(a.updated_at for a in group)
        if annotator.kind == Annotator.Kind.MACHINE:
            model_version = f"{annotator.name}@{annotator.version}" if annotator.version else annotator.name
            prediction: dict[str, Any] = {
                "model_version": model_version,
                "result": results,
                "created_at": _iso(created),
                "updated_at": _iso(updated),
            }
            if isinstance(scores.get(model_version), int | float):
                prediction["score"] = scores[model_version]
            predictions.append(prediction)
            continue
        times = [a.time_spent_ms for a in group if a.time_spent_ms is not None]
        annotations.append(
            {
                "completed_by": _person(annotator),
                "result": results,
                "was_cancelled": False,
                "ground_truth": False,
                "created_at": _iso(created),
                "updated_at": _iso(updated),
                "lead_time": max(times) / 1000 if times else None,
            }
        )
    for skip in skips:
        if skip.annotator_id in by_annotator:
            continue
        annotations.append(
            {
                "completed_by": _person(skip.annotator),
                "result": [],
                "was_cancelled": True,
                "ground_truth": False,
                "created_at": _iso(skip.completed_at or skip.created_at),
                "updated_at": _iso(skip.completed_at or skip.created_at),
                "lead_time": skip.time_spent_ms / 1000 if skip.time_spent_ms is not None else None,
            }
        )
    for number, written in enumerate(annotations, start=1):
        written["id"] = item.pk * 1000 + number
    task = {"id": item.pk, "data": data, "annotations": annotations, "predictions": predictions}
    return task, left_out


def labelstudio_tasks(study: Study) -> Iterator[dict[str, Any]]:
    """The study's items as Label Studio tasks, in item order."""
    protocol = study.protocol_obj
    obj = "text" if protocol.unit == "text" else "image"
    item_ids = list(Item.objects.filter(study=study).order_by("id").values_list("id", flat=True))
    for start in range(0, len(item_ids), CHUNK):
        chunk = item_ids[start : start + CHUNK]
        items = (
            Item.objects.filter(pk__in=chunk)
            .order_by("id")
            .prefetch_related(Prefetch("images", queryset=ItemImage.objects.order_by("position")))
        )
        answers: dict[int, list[Annotation]] = {}
        for annotation in (
            Annotation.objects.filter(item_id__in=chunk)
            .select_related("annotator", "annotator__user")
            .order_by("item_id", "annotator_id", "id")
        ):
            answers.setdefault(annotation.item_id, []).append(annotation)
        skips: dict[int, list[Assignment]] = {}
        for assignment in (
            Assignment.objects.filter(item_id__in=chunk, status=Assignment.Status.SKIPPED)
            .select_related("annotator", "annotator__user")
            .order_by("id")
        ):
            skips.setdefault(assignment.item_id, []).append(assignment)
        for item in items:
            task, _lost = _task(protocol, item, answers.get(item.pk, []), skips.get(item.pk, []), obj)
            yield task


def export_labelstudio(study: Study, out: Path) -> None:
    """Write the zip (see the module docstring) to ``out``."""
    try:
        config = protocol_to_config(study.protocol_obj)
    except ConfigError as exc:
        raise ValueError(exc.message) from exc
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(CONFIG_NAME, config)
        with archive.open(TASKS_NAME, "w") as handle:
            handle.write(b"[")
            for number, task in enumerate(labelstudio_tasks(study)):
                handle.write((",\n" if number else "\n").encode())
                handle.write(json.dumps(task, ensure_ascii=False).encode("utf-8"))
            handle.write(b"\n]\n")
        written: set[str] = set()
        positions = {} if study.protocol_obj.unit == "image_set" else {"position": 0}
        images = ItemImage.objects.filter(item__study=study, **positions).exclude(file="").order_by("id")
        for image in images.iterator(chunk_size=CHUNK):
            path = _file_path(image)
            if path in written:
                continue
            written.add(path)
            with item_file_open(image) as source, archive.open(path, "w") as target:
                while chunk := source.read(1024 * 1024):
                    target.write(chunk)
