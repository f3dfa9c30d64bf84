"""Importing a Label Studio 1.x JSON export: tasks become items, annotations human answers, predictions
machine answers. All or nothing: a refusal names the task id and the field, and leaves the study (or
the database, when the study is created here) as it was.

Accepted shapes (detected from the file):

- the project export (the Export button; ``JSON``): tasks with ``data``, ``annotations`` whose
  ``completed_by`` is a user id, ``predictions`` as ids only (those are counted and left out);
- the snapshot export (``POST /api/projects/{id}/exports/``): ``completed_by`` as ``{id, email, ...}``,
  predictions in full (``model_version``, ``score``, ``result``), cancelled annotations included;
- ``JSON_MIN``: one flat record per annotation (``id``, the data fields, one key per control,
  ``annotator``, ``lead_time``...): a single choice as a string, several as ``{"choices": [...]}``, a
  rating as ``[{"rating": n}]``, a text as a string, rectangles as a list of regions. It carries no
  predictions, no cancelled annotations and no task without an annotation.

What each part becomes is documented in docs/import-export.md ("Label Studio"); the labeling config
is read by ``annotations/interchange/labelstudio/config.py`` and the answers stored by
``foreign_answers.py`` (which also holds the rule for annotators and accounts).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.db import transaction
from django.utils.dateparse import parse_datetime

from annotations.interchange.foreign_answers import (
    AnswersReport,
    ForeignAnswer,
    ForeignSkip,
    ItemFacts,
    Who,
    foreign_answers_save,
)
from annotations.interchange.item_import import ImportReport, StagedItems, items_import_stage
from annotations.interchange.labelstudio.config import (
    RESULT_KINDS,
    ConfigError,
    Control,
    LabelStudioConfig,
    config_to_protocol,
    controls_for_study,
    option_lookup,
)
from annotations.interchange.sources import Address, address_name, archive_open, file_read, folder_open
from annotations.models import Annotator, Item, ItemImage, Study, User
from annotations.services.studies import protocol_resolve, study_create
from common.checked_input import InputRefused, MalformedJSON, json_parse, json_value_check
from common.errors import ImportRefused, ValidationFailed
from common.files import CheckedImage, FileSource, FolderSource, ZipSource, image_check, safe_member_path
from protocols.answers import MAX_PIXELS
from protocols.schema import Protocol, Question, slugify_option

MAX_TASKS = 500_000
CHUNK = 2000
REMOTE_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http(s)://, s3://, gs://, data:...
UPLOAD_PREFIX = "/data/upload/"
LOCAL_FILES_PREFIX = "/data/local-files/"
JSON_MIN_META = {
    "id",
    "annotator",
    "annotation_id",
    "created_at",
    "updated_at",
    "lead_time",
    "agreement",
    "history",
}
PROVENANCE = ("prompt", "model", "condition", "seed", "settings", "expert_only")
PLACEHOLDER_DOMAIN = "@workbench.invalid"  # the export's address for a person without an account
SCORES_FIELD = "labelstudio_scores"
RESULT_TYPES = tuple(RESULT_KINDS)
BINARY_WORDS = {"1": 1, "0": 0, "yes": 1, "no": 0, "true": 1, "false": 0}
BOX_TOLERANCE_PX = 1.0
KEEP_BYTES = 256 * 1024 * 1024  # checked image bytes kept for the write (see _TaskFiles)


@dataclass
class _Result:
    where: str
    from_name: str
    type: str
    value: dict[str, Any]
    original_width: Any = None
    original_height: Any = None
    image_rotation: Any = 0
    item_index: Any = None  # an image set's image (``<Image valueList>``)


@dataclass
class _Judgement:
    """One annotation or prediction: who, whether it was cancelled, its results."""

    where: str
    who: Who
    results: list[_Result]
    cancelled: bool = False
    time_spent_ms: int | None = None
    when: datetime | None = None
    order: tuple[str, str] = ("", "")  # (updated or created, id): the latest wins


@dataclass
class _Task:
    where: str
    task_id: str
    data: dict[str, Any]
    judgements: list[_Judgement] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)


@dataclass
class LabelStudioImportReport:
    study_id: int = 0
    study_name: str = ""
    created_study: bool = False
    shape: str = ""
    protocol_restored: bool = False
    tasks: int = 0
    items: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    superseded: int = 0
    predictions_left_out: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "study": self.study_id,
            "study_name": self.study_name,
            "created_study": self.created_study,
            "shape": self.shape,
            "protocol_restored": self.protocol_restored,
            "tasks": self.tasks,
            "items": self.items,
            "answers": self.answers,
            "superseded": self.superseded,
            "predictions_left_out": self.predictions_left_out,
            "notes": self.notes,
        }


# --- Reading the files -----------------------------------------------------------------------------


def _read_input(address: Address) -> tuple[bytes, str | None, FileSource | None]:
    """The export's JSON, the config in a zip (if any) and the zip as the media source; a local file
    or a bucket object (``annotations.interchange.sources``)."""
    label = address_name(address)
    if label.lower().endswith(".zip"):
        source = archive_open(address)
        names = source.names()
        jsons = [n for n in names if n.lower().endswith(".json")]
        chosen = "tasks.json" if "tasks.json" in jsons else (jsons[0] if len(jsons) == 1 else None)
        if chosen is None:
            source.close()
            raise ImportRefused(f"{label}: holds {len(jsons)} .json files; it needs one (or tasks.json)")
        xmls = [n for n in names if n.lower().endswith(".xml")]
        if len(xmls) > 1:
            source.close()
            raise ImportRefused(f"{label}: holds several .xml files; it may hold one labeling config")
        limit = settings.WORKBENCH_MAX_UPLOAD_BYTES
        data = source.read(chosen, limit=limit)
        config = _decode(source.read(xmls[0], limit=limit), xmls[0]) if xmls else None
        return data, config, source
    return file_read(address)[1], None, None


def _zipped_config(address: Address) -> str | None:
    """The labeling config inside an export's zip (its one ``.xml``), reading nothing else of it."""
    source = archive_open(address)
    try:
        xmls = [n for n in source.names() if n.lower().endswith(".xml")]
        if len(xmls) > 1:
            raise ImportRefused(
                f"{address_name(address)}: holds several .xml files; it may hold one labeling config"
            )
        limit = settings.WORKBENCH_MAX_UPLOAD_BYTES
        return _decode(source.read(xmls[0], limit=limit), xmls[0]) if xmls else None
    finally:
        source.close()


def labelstudio_study_protocol(*, address: Address, config_address: Address | None, name: str) -> Protocol:
    """The protocol a new study made from a Label Studio export gets: from its labeling config (the
    separate file, else the one in the export's zip), refused as the import itself refuses it. For a
    new study whose tasks a job imports (``labelstudio_import(..., study_from_config=True)``): the
    study is made at once from this, before the tasks are read."""
    if config_address is not None:
        config_name, config_data = file_read(config_address)
        config_text: str | None = _decode(config_data, config_name)
    else:
        config_text = _zipped_config(address) if address_name(address).lower().endswith(".zip") else None
    if config_text is None:
        raise ImportRefused("a new study needs the labeling config (--config CONFIG.xml) for its protocol")
    try:
        config = config_to_protocol(config_text, name=name)
    except ConfigError as exc:
        raise ImportRefused(f"labeling config, {exc.message}") from exc
    try:
        return protocol_resolve(protocol=config.protocol.to_dict(), source="labeling config")
    except ValidationFailed as exc:
        raise ImportRefused(exc.message) from exc


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc


def _load(data: bytes, name: str) -> list[dict[str, Any]]:
    try:
        records = json_parse(_decode(data, name), where=name)
    except MalformedJSON as exc:
        raise ImportRefused(exc.message) from exc
    except InputRefused as exc:
        raise ImportRefused(f"{name}: nested too deeply to be a Label Studio export") from exc
    if not isinstance(records, list):
        raise ImportRefused(f"{name}: a Label Studio JSON export is a list of tasks")
    if not records:
        raise ImportRefused(f"{name}: holds no tasks")
    if len(records) > MAX_TASKS:
        raise ImportRefused(f"{name}: more than {MAX_TASKS} records; split the export")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise ImportRefused(f"{name}: record {index} is not a JSON object")
        task_id = record.get("id")
        plain = type(task_id) in (int, str) and len(str(task_id)) <= 40
        where = f"task {task_id}" if plain else f"record {index}"
        try:  # NaN, 1e400, a huge integer, \u0000, a lone surrogate: named by task and field
            json_value_check(record, where=f"{name}: {where}")
        except InputRefused as exc:
            raise ImportRefused(exc.message) from exc
        if "id" not in record or isinstance(record["id"], bool | dict | list) or record["id"] in (None, ""):
            raise ImportRefused(f"{name}: record {index} has no task id")
    return records


# --- Who, when, how long ------------------------------------------------------------------------------


def _email_ok(value: str) -> bool:
    return 3 <= len(value) <= 150 and value.count("@") == 1 and not any(c.isspace() for c in value)


def _person(raw: Any, where: str, emails: dict[str, str]) -> Who:
    """A person from ``completed_by`` (an id, or ``{id, email, ...}``) or JSON_MIN's ``annotator``."""
    if isinstance(raw, dict):
        email = raw.get("email")
        if isinstance(email, str) and email.strip():
            return _person_by_email(email.strip(), raw, where)
        raw = raw.get("id")
    if isinstance(raw, str) and "@" in raw:
        return _person_by_email(raw.strip(), {}, where)
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
        raise ImportRefused(f"{where}.completed_by: needs a user id or an email, got {raw!r}")
    user_id = str(int(str(raw).strip()))
    if user_id in emails:
        return _person_by_email(emails[user_id], {}, where)
    return Who(kind=Annotator.Kind.HUMAN, name=f"labelstudio-user-{user_id}")


def _person_by_email(email: str, raw: dict[str, Any], where: str) -> Who:
    if not _email_ok(email):
        raise ImportRefused(f"{where}.completed_by: {email[:80]!r} is not an email address")
    if email.lower().endswith(PLACEHOLDER_DOMAIN):
        name = str(raw.get("first_name") or email[: -len(PLACEHOLDER_DOMAIN)]).strip()[:150]
        return Who(kind=Annotator.Kind.HUMAN, name=name or email)
    return Who(kind=Annotator.Kind.HUMAN, name=email.lower(), email=email.lower())


def _machine(model_version: Any) -> Who:
    text = str(model_version or "").strip() or "label-studio"
    name, at, version = text.rpartition("@")
    if not (at and name and version):
        name, version = text, ""
    return Who(kind=Annotator.Kind.MACHINE, name=name[:150], version=version[:64])


def _lead_time(raw: Any, where: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw < 0:
        raise ImportRefused(f"{where}.lead_time: must be a number of seconds, got {raw!r}")
    return min(int(round(raw * 1000)), 2**31 - 1)


def _when(raw: Any) -> datetime | None:
    return parse_datetime(raw) if isinstance(raw, str) else None


def _order(record: dict[str, Any]) -> tuple[str, str]:
    stamp = record.get("updated_at") or record.get("created_at") or ""
    return (str(stamp), f"{record.get('id', 0)!s:>20}")


# --- Full exports (project and snapshot) ------------------------------------------------------------------


def _results(raw: Any, where: str) -> list[_Result]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ImportRefused(f"{where}.result: must be a list")
    results = []
    for index, entry in enumerate(raw):
        spot = f"{where}.result[{index}]"
        if not isinstance(entry, dict):
            raise ImportRefused(f"{spot}: must be an object")
        kind = entry.get("type")
        if kind not in RESULT_TYPES:
            raise ImportRefused(
                f"{spot}.type: {kind!r} is not supported (supported: {', '.join(RESULT_TYPES)})"
            )
        from_name, value = entry.get("from_name"), entry.get("value")
        if not isinstance(from_name, str) or not from_name:
            raise ImportRefused(f"{spot}.from_name: is missing")
        if not isinstance(value, dict):
            raise ImportRefused(f"{spot}.value: must be an object")
        results.append(
            _Result(
                where=f"{spot} ({from_name})",
                from_name=from_name,
                type=kind,
                value=value,
                original_width=entry.get("original_width"),
                original_height=entry.get("original_height"),
                image_rotation=entry.get("image_rotation", 0),
                item_index=entry.get("item_index"),
            )
        )
    return results


def _full_tasks(records: list[dict[str, Any]]) -> tuple[list[_Task], str, int]:
    """Tasks of a project or snapshot export, the shape's name, and predictions given as ids only."""
    emails: dict[str, str] = {}
    snapshot = False
    for record in records:
        for annotation in record.get("annotations") or []:
            person = annotation.get("completed_by") if isinstance(annotation, dict) else None
            if isinstance(person, dict):
                snapshot = True
                if isinstance(person.get("email"), str) and isinstance(person.get("id"), int):
                    emails[str(person["id"])] = person["email"].strip()
        if any(isinstance(p, dict) for p in record.get("predictions") or []):
            snapshot = True
    tasks: list[_Task] = []
    ids_only = 0
    for record in records:
        where = f"task {record['id']}"
        data = record.get("data")
        if not isinstance(data, dict):
            raise ImportRefused(f"{where}.data: must be an object (is this a Label Studio JSON export?)")
        task = _Task(where=where, task_id=str(record["id"]), data=data)
        tasks.append(task)
        for name in ("annotations", "predictions"):
            if not isinstance(record.get(name) or [], list):
                raise ImportRefused(f"{where}.{name}: must be a list")
        for index, annotation in enumerate(record.get("annotations") or []):
            spot = f"{where}, annotations[{index}]"
            if not isinstance(annotation, dict):
                raise ImportRefused(f"{spot}: must be an object")
            task.judgements.append(
                _Judgement(
                    where=spot,
                    who=_person(annotation.get("completed_by"), spot, emails),
                    results=_results(annotation.get("result"), spot),
                    cancelled=bool(annotation.get("was_cancelled")),
                    time_spent_ms=_lead_time(annotation.get("lead_time"), spot),
                    when=_when(annotation.get("updated_at") or annotation.get("created_at")),
                    order=_order(annotation),
                )
            )
        for index, prediction in enumerate(record.get("predictions") or []):
            spot = f"{where}, predictions[{index}]"
            if isinstance(prediction, int) and not isinstance(prediction, bool):
                ids_only += 1
                continue
            if not isinstance(prediction, dict):
                raise ImportRefused(f"{spot}: must be an object or a prediction id")
            who = _machine(prediction.get("model_version"))
            score = prediction.get("score")
            if score is not None:
                if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                    raise ImportRefused(f"{spot}.score: must be a number, got {score!r}")
                task.scores[str(prediction.get("model_version") or "label-studio")] = float(score)
            task.judgements.append(
                _Judgement(
                    where=spot,
                    who=who,
                    results=_results(prediction.get("result"), spot),
                    order=_order(prediction),
                )
            )
    return tasks, ("snapshot" if snapshot else "project"), ids_only


# --- JSON_MIN --------------------------------------------------------------------------------------------


def _min_results(raw: Any, control: Control, question: Question, where: str) -> list[_Result]:
    """One JSON_MIN value as the results a full export would hold."""
    spot = f"{where}.{control.from_name}"
    kind = control.result_type
    if kind == "choices" or (kind == "" and question.kind in ("single", "multi", "binary")):
        if isinstance(raw, str | int) and not isinstance(raw, bool):
            return [_Result(spot, control.from_name, "choices", {"choices": [str(raw)]})]
        if isinstance(raw, dict) and isinstance(raw.get("choices"), list):
            return [_Result(spot, control.from_name, "choices", {"choices": raw["choices"]})]
        if isinstance(raw, list) and all(isinstance(v, str) for v in raw):
            return [_Result(spot, control.from_name, "choices", {"choices": raw})]
    if kind in ("rating", "choices", "") and question.kind == "likert":
        regions = raw if isinstance(raw, list) else [raw]
        if all(isinstance(r, dict) and "rating" in r for r in regions):
            return [_Result(spot, control.from_name, "rating", {"rating": r["rating"]}) for r in regions]
        if isinstance(raw, str):
            return [_Result(spot, control.from_name, "choices", {"choices": [raw]})]
    if kind in ("textarea", "") and question.kind == "text":
        if isinstance(raw, str):
            return [_Result(spot, control.from_name, "textarea", {"text": [raw]})]
        regions = raw if isinstance(raw, list) else [raw]
        texts: list[Any] = []
        for region in regions:
            texts.extend(region.get("text", []) if isinstance(region, dict) else [region])
        return [_Result(spot, control.from_name, "textarea", {"text": texts})]
    if kind in ("rectanglelabels", "") and question.kind == "boxes":
        if not isinstance(raw, list):
            raise ImportRefused(f"{spot}: rectangles must be a list of regions")
        results = []
        for index, region in enumerate(raw):
            if not isinstance(region, dict):
                raise ImportRefused(f"{spot}[{index}]: must be an object")
            value = {
                k: v
                for k, v in region.items()
                if k not in ("original_width", "original_height", "item_index")
            }
            results.append(
                _Result(
                    f"{spot}[{index}]",
                    control.from_name,
                    "rectanglelabels",
                    value,
                    region.get("original_width"),
                    region.get("original_height"),
                    0,
                    region.get("item_index"),
                )
            )
        return results
    raise ImportRefused(
        f"{spot}: {json.dumps(raw)[:80]} is not a value question {question.key!r} ({question.kind}) takes"
    )


def _min_tasks(
    records: list[dict[str, Any]], controls: dict[str, Control], protocol: Protocol
) -> list[_Task]:
    tasks: dict[str, _Task] = {}
    for index, record in enumerate(records):
        task_id = str(record["id"])
        where = f"task {task_id}"
        spot = f"{where}, record {index}"
        data = {k: v for k, v in record.items() if k not in JSON_MIN_META and k not in controls}
        task = tasks.setdefault(task_id, _Task(where=where, task_id=task_id, data=data))
        if "annotator" not in record:
            raise ImportRefused(f"{spot}: JSON_MIN records name their annotator ('annotator' is missing)")
        results: list[_Result] = []
        for name, control in controls.items():
            if name in record and record[name] is not None:
                question = protocol.question(control.question_key)
                results.extend(_min_results(record[name], control, question, spot))
        task.judgements.append(
            _Judgement(
                where=spot,
                who=_person(record.get("annotator"), spot, {}),
                results=results,
                time_spent_ms=_lead_time(record.get("lead_time"), spot),
                when=_when(record.get("updated_at") or record.get("created_at")),
                order=(
                    str(record.get("updated_at") or record.get("created_at") or ""),
                    f"{record.get('annotation_id', 0)!s:>20}",
                ),
            )
        )
    return list(tasks.values())


# --- From results to answers -----------------------------------------------------------------------------


def _number(value: Any, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ImportRefused(f"{where}: value.{name} must be a number, got {value!r}")
    return float(value)


def _edge(start: float, extent: float, size: int) -> tuple[int, int]:
    """Pixel start and length from a start and an extent in pixels; within a pixel of the edge counts
    as on it (Label Studio's percentages are floats)."""
    low, high = start, start + extent
    if -BOX_TOLERANCE_PX <= low < 0:
        low = 0.0
    if size < high <= size + BOX_TOLERANCE_PX:
        high = float(size)
    first, last = int(round(low)), int(round(high))
    length = max(1, last - first)
    if first + length > size >= length and first <= size:
        first = size - length
    return first, length


def _image_index(result: _Result, facts: ItemFacts, unit: str) -> int:
    """The image of an item a rectangle is drawn on: ``item_index`` (an image set), else the first."""
    raw = result.item_index
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ImportRefused(f"{result.where}: item_index must be an image's index (0, 1, ...), got {raw!r}")
    if raw and unit != "image_set":
        raise ImportRefused(f"{result.where}: item_index {raw}: the study shows one image per item")
    if facts.image_sizes and raw >= len(facts.image_sizes):
        raise ImportRefused(f"{result.where}: item_index {raw}: the item has {len(facts.image_sizes)} images")
    return raw


def _box(result: _Result, label_keys: list[str], size: tuple[int, int] | None) -> list[dict[str, Any]]:
    value = result.value
    for name, raw in (
        ("value.rotation", value.get("rotation", 0)),
        ("image_rotation", result.image_rotation),
    ):
        if raw not in (0, 0.0, None):
            raise ImportRefused(f"{result.where}: {name} is {raw!r}; only unrotated rectangles are imported")
    if size is None:
        width, height = result.original_width, result.original_height
        if isinstance(width, bool) or not isinstance(width, int | float) or not width or width < 0:
            raise ImportRefused(
                f"{result.where}: original_width and original_height are needed (the item has no image)"
            )
        if isinstance(height, bool) or not isinstance(height, int | float) or not height or height < 0:
            raise ImportRefused(
                f"{result.where}: original_width and original_height are needed (the item has no image)"
            )
        if width > MAX_PIXELS or height > MAX_PIXELS:
            raise ImportRefused(
                f"{result.where}: original_width and original_height must be at most {MAX_PIXELS} pixels"
            )
        size = (int(width), int(height))
    x, y = (_number(value.get(k), k, result.where) for k in ("x", "y"))
    w, h = (_number(value.get(k), k, result.where) for k in ("width", "height"))
    outside = any(
        extent <= 0
        or start / 100 * side < -BOX_TOLERANCE_PX
        or (start + extent) / 100 * side > side + BOX_TOLERANCE_PX
        for start, extent, side in ((x, w, size[0]), (y, h, size[1]))
    )
    if outside:
        # Checked here for every item (within a pixel, as ``_edge`` puts on the edge): a reference item
        # (no file) has no stored size that the answer check could hold the box to, only the size
        # this result declares.
        raise ImportRefused(
            f"{result.where}: the box (x {x:g}%, y {y:g}%, width {w:g}%, height {h:g}%) lies outside the "
            f"{size[0]}x{size[1]} image"
        )
    left, box_w = _edge(x / 100 * size[0], w / 100 * size[0], size[0])
    top, box_h = _edge(y / 100 * size[1], h / 100 * size[1], size[1])
    return [{"option": key, "x": left, "y": top, "w": box_w, "h": box_h} for key in label_keys]


def _choice_keys(result: _Result, lookup: dict[str, str], question: Question) -> list[str]:
    raw = result.value.get("choices")
    if not isinstance(raw, list):
        raise ImportRefused(f"{result.where}: value.choices must be a list")
    keys = []
    for choice in raw:
        text = str(choice)
        key = lookup.get(text) or lookup.get(text.strip()) or lookup.get(slugify_option(text))
        if key is None:
            raise ImportRefused(
                f"{result.where}: choice {text[:80]!r} is not an option of {question.key!r} "
                f"({', '.join(sorted(set(lookup.values())))})"
            )
        keys.append(key)
    return keys


def _value(
    protocol: Protocol, question: Question, control: Control, results: list[_Result], facts: ItemFacts
) -> Any:
    """The answer a control's results give, in the form ``clean_answer`` takes."""
    first = results[0]
    for result in results:
        if question.kind not in RESULT_KINDS[result.type]:
            raise ImportRefused(
                f"{result.where}: {result.type} results cannot answer {question.key!r} ({question.kind})"
            )
    if question.kind == "boxes":
        assert question.linked_question is not None
        linked = protocol.question(question.linked_question)
        lookup = option_lookup(linked, control, facts.metadata)
        boxes: list[dict[str, Any]] = []
        for result in results:
            position = _image_index(result, facts, protocol.unit)
            size = facts.image_sizes[position] if facts.image_sizes else None
            labels = result.value.get("rectanglelabels")
            if not isinstance(labels, list) or not labels:
                raise ImportRefused(f"{result.where}: value.rectanglelabels must name a label")
            keys = []
            for label in labels:
                key = lookup.get(str(label)) or lookup.get(slugify_option(str(label)))
                if key is None:
                    raise ImportRefused(
                        f"{result.where}: label {str(label)[:80]!r} is not an option of "
                        f"{question.linked_question!r}"
                    )
                keys.append(key)
            drawn = _box(result, keys, size)
            if protocol.unit == "image_set":
                drawn = [{**box, "image": position} for box in drawn]
            boxes.extend(drawn)
        return boxes
    if question.kind == "text":
        texts: list[str] = []
        for result in results:
            raw = result.value.get("text")
            raw = [raw] if isinstance(raw, str) else raw
            if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
                raise ImportRefused(f"{result.where}: value.text must be a list of texts")
            texts.extend(raw)
        return "\n".join(texts)
    if first.type == "rating":
        if len(results) > 1:
            raise ImportRefused(f"{results[1].where}: a second rating for {question.key!r}")
        rating = first.value.get("rating")
        options = question.options_for(facts.metadata)
        if isinstance(rating, bool) or not isinstance(rating, int | float) or rating != int(rating):
            raise ImportRefused(f"{first.where}: value.rating must be a whole number, got {rating!r}")
        if not 1 <= int(rating) <= len(options):
            raise ImportRefused(
                f"{first.where}: rating {rating} is outside 1..{len(options)} of {question.key!r}"
            )
        return options[int(rating) - 1].key
    if question.kind == "binary":
        words: dict[str, int] = {k.lower(): v for k, v in BINARY_WORDS.items()}
        words.update({k.lower(): int(v) for k, v in control.values.items() if v in ("0", "1")})
        chosen = []
        for result in results:
            raw = result.value.get("choices")
            if not isinstance(raw, list):
                raise ImportRefused(f"{result.where}: value.choices must be a list")
            for choice in raw:
                if str(choice).strip().lower() not in words:
                    raise ImportRefused(
                        f"{result.where}: choice {str(choice)[:80]!r} is not yes/no (1/0) for "
                        f"{question.key!r}"
                    )
                chosen.append(words[str(choice).strip().lower()])
        if len(chosen) != 1:
            raise ImportRefused(f"{first.where}: {question.key!r} takes one choice, got {len(chosen)}")
        return chosen[0]
    lookup = option_lookup(question, control, facts.metadata)
    keys = [key for result in results for key in _choice_keys(result, lookup, question)]
    if question.kind == "multi":
        return list(dict.fromkeys(keys))
    if len(keys) != 1:
        raise ImportRefused(f"{first.where}: {question.key!r} takes one choice, got {len(keys)}")
    return keys[0]


def _answers(
    judgement: _Judgement, facts: ItemFacts, protocol: Protocol, controls: dict[str, Control]
) -> list[ForeignAnswer]:
    grouped: dict[str, list[_Result]] = {}
    for result in judgement.results:
        if result.from_name not in controls:
            raise ImportRefused(
                f"{result.where}: from_name {result.from_name!r} is not a control of the labeling config"
            )
        grouped.setdefault(result.from_name, []).append(result)
    answers = []
    for from_name, results in grouped.items():
        control = controls[from_name]
        question = protocol.question(control.question_key)
        answers.append(
            ForeignAnswer(
                where=results[0].where,
                item=facts,
                who=judgement.who,
                question_key=question.key,
                value=_value(protocol, question, control, results, facts),
                time_spent_ms=judgement.time_spent_ms,
            )
        )
    return answers


# --- Items ----------------------------------------------------------------------------------------------


class _TaskFiles(FileSource):
    """The media source, with refusals that name the task and the field. The bytes of checked images
    are kept (up to ``KEEP_BYTES`` in all) for the write that follows the checks, so most files are
    read once."""

    def __init__(self, inner: FileSource, where: dict[str, str]) -> None:
        self.inner, self.where = inner, where
        self.kept: dict[str, bytes] = {}
        self.kept_bytes = 0

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        kept = self.kept.pop(name, None)
        if kept is not None:
            self.kept_bytes -= len(kept)
            return kept
        try:
            return self.inner.read(name, limit=limit)
        except ImportRefused as exc:
            raise ImportRefused(f"{self.where.get(name, name)}: {exc.message}") from exc

    def checked_image(self, name: str) -> CheckedImage:
        try:
            data = self.inner.read(name)
            checked = image_check(data, name=name)
        except ImportRefused as exc:
            raise ImportRefused(f"{self.where.get(name, name)}: {exc.message}") from exc
        if self.kept_bytes + len(data) <= KEEP_BYTES:
            self.kept[name] = data
            self.kept_bytes += len(data)
        return checked

    def names(self) -> list[str]:
        return self.inner.names()


def _exists(source: FileSource, name: str) -> bool:
    if isinstance(source, ZipSource):
        return name in source.members
    if isinstance(source, FolderSource):
        return (source.root / name).is_file()
    return name in source.names()


def _member(value: str, where: str, source: FileSource) -> str | None:
    """The media file a task's image names, or None for a remote URL (never fetched)."""
    if value.startswith(UPLOAD_PREFIX):
        relative = "upload/" + value[len(UPLOAD_PREFIX) :]
    elif value.startswith(LOCAL_FILES_PREFIX):
        found = parse_qs(urlsplit(value).query).get("d")
        if not found:
            raise ImportRefused(f"{where}: {value[:120]!r} names no file (?d=PATH)")
        relative = found[0]
    elif REMOTE_RE.match(value):
        return None
    else:
        relative = value
    try:
        relative = safe_member_path(relative.lstrip("/") if value.startswith("/data/") else relative)
    except ImportRefused as exc:
        raise ImportRefused(f"{where}: {exc.message}") from exc
    if not _exists(source, relative) and relative.startswith("upload/") and _exists(source, relative[7:]):
        return relative[7:]
    if not _exists(source, relative):
        raise ImportRefused(f"{where}: {value[:120]!r} is not under the media root ({relative})")
    return relative


def _item_record(
    task: _Task,
    field_name: str,
    protocol: Protocol,
    source: FileSource | None,
    files: dict[str, str],
    options_fields: set[str],
) -> dict[str, Any]:
    data = task.data
    external = data.get("external_id")
    record: dict[str, Any] = {
        "external_id": str(external).strip()
        if isinstance(external, str | int) and str(external).strip()
        else task.task_id
    }
    for name in PROVENANCE:
        if data.get(name) not in (None, ""):
            record[name] = data[name]
    unit = protocol.unit
    skip = {"external_id", "metadata", field_name, *PROVENANCE, *options_fields}
    metadata = {key: value for key, value in data.items() if key not in skip}
    if isinstance(data.get("metadata"), dict):
        metadata.update(data["metadata"])
    elif "metadata" in data:
        metadata["metadata"] = data["metadata"]
    read_from = {q.options_from for q in protocol.questions if q.options_from is not None}
    for name in sorted(options_fields & read_from):
        # A config without the workbench comment: the question reads its options from this field.
        metadata[name] = _dynamic_labels(data.get(name), f"{task.where}, data.{name}")
    shown = data.get(field_name)
    where = f"{task.where}, data.{field_name}"
    if unit == "image_set" and isinstance(shown, list):
        members: list[str] = []
        for index, entry in enumerate(shown):
            spot = f"{where}[{index}]"
            if not isinstance(entry, str) or not entry.strip():
                raise ImportRefused(f"{spot}: must be the image's URL or path")
            member = _member(entry.strip(), spot, source) if source is not None else None
            if member is None:
                metadata[field_name] = shown
                members = []
                break
            members.append(member)
            files.setdefault(member, spot)
        if members:
            record["files"] = members
    elif unit == "text":
        if not isinstance(shown, str) or not shown.strip():
            raise ImportRefused(f"{where}: the text to judge is missing")
        record["text"] = shown
    elif isinstance(shown, str) and shown.strip():
        member = _member(shown.strip(), where, source) if source is not None else None
        if member is None:
            metadata[field_name] = shown
        else:
            record["file"] = member
            files.setdefault(member, where)
    elif shown is not None:
        raise ImportRefused(f"{where}: must be the image's URL or path")
    if task.scores:
        metadata[SCORES_FIELD] = dict(sorted(task.scores.items()))
    record["metadata"] = metadata
    return record


def _dynamic_labels(raw: Any, where: str) -> list[str]:
    """The labels of a task's dynamic choices (a list of ``{"value": ...}`` or of texts)."""
    if not isinstance(raw, list) or not raw:
        raise ImportRefused(f"{where}: the task's choices must be a non-empty list")
    labels = []
    for index, entry in enumerate(raw):
        value = entry.get("value") if isinstance(entry, dict) else entry
        if not isinstance(value, str) or not value.strip():
            raise ImportRefused(f'{where}[{index}]: a choice is {{"value": TEXT}} or a text')
        labels.append(value)
    return labels


def _data_field(tasks: list[_Task], unit: str) -> str:
    """Without a config: the data field that holds the image (or text) — ``image``/``text`` when
    present, else the one field whose values look like URLs or paths."""
    preferred = {"text": "text", "image_set": "images"}.get(unit, "image")
    if any(preferred in task.data for task in tasks):
        return preferred
    candidates = {
        key
        for task in tasks[:1000]
        for key, value in task.data.items()
        if isinstance(value, str) and (value.startswith("/data/") or REMOTE_RE.match(value))
    }
    if len(candidates) == 1:
        return candidates.pop()
    if not candidates:
        return preferred
    raise ImportRefused(
        f"the tasks' data has several fields that look like images ({', '.join(sorted(candidates))}); "
        "give the labeling config to say which one is shown"
    )


def _facts(study: Study, external_ids: list[str]) -> dict[str, ItemFacts]:
    found: dict[str, ItemFacts] = {}
    rows: list[tuple[int, str, dict[str, Any]]] = []
    distinct = sorted(set(external_ids))
    for start in range(0, len(distinct), CHUNK):
        rows.extend(
            Item.objects.filter(study=study, external_id__in=distinct[start : start + CHUNK]).values_list(
                "id", "external_id", "metadata"
            )
        )
    sizes: dict[int, list[tuple[int, int] | None]] = {}
    ids = [pk for pk, _e, _m in rows]
    for start in range(0, len(ids), CHUNK):
        for item_id, width, height in (
            ItemImage.objects.filter(item_id__in=ids[start : start + CHUNK])
            .order_by("item_id", "position")
            .values_list("item_id", "width", "height")
        ):
            sizes.setdefault(item_id, []).append((width, height) if width and height else None)
    for pk, external_id, metadata in rows:
        found[external_id] = ItemFacts(pk, external_id, metadata or {}, tuple(sizes.get(pk, [])))
    return found


# --- The import ----------------------------------------------------------------------------------------


def _latest(task: _Task) -> tuple[list[_Judgement], int]:
    """One judgement per annotator on a task: the latest (edited annotations count once)."""
    best: dict[Who, _Judgement] = {}
    for judgement in task.judgements:
        current = best.get(judgement.who)
        if current is None or judgement.order >= current.order:
            best[judgement.who] = judgement
    return list(best.values()), len(task.judgements) - len(best)


def _study_controls(
    protocol: Protocol, records: list[dict[str, Any]], json_min: bool, config: LabelStudioConfig | None
) -> dict[str, Control]:
    """Controls of an import into an existing study: the config's, or the export's from_names."""
    try:
        if config is not None:
            mapped = controls_for_study(
                protocol, {name: c.result_type for name, c in config.controls.items()}
            )
            return {
                name: Control(name, control.question_key, control.result_type, config.controls[name].values)
                for name, control in mapped.items()
            }
        if json_min:
            names: dict[str, str] = {}
            for record in records:
                for key in record:
                    if key not in JSON_MIN_META and (
                        protocol.has_question(key) or protocol.has_question(slugify_option(key))
                    ):
                        names.setdefault(key, "")
            return controls_for_study(protocol, names)
        seen: dict[str, str] = {}
        for record in records:
            for group in ("annotations", "predictions"):
                for judgement in record.get(group) or []:
                    for result in (judgement.get("result") or []) if isinstance(judgement, dict) else []:
                        if isinstance(result, dict) and isinstance(result.get("from_name"), str):
                            seen.setdefault(result["from_name"], str(result.get("type", "")))
        return controls_for_study(protocol, seen)
    except ConfigError as exc:
        raise ImportRefused(exc.message) from exc


def _no_tick() -> None:
    return None


def labelstudio_import(
    *,
    address: Address,
    study: Study | None = None,
    owner: User | None = None,
    name: str | None = None,
    config_address: Address | None = None,
    config_text: str | None = None,
    media_root: Address | None = None,
    study_from_config: bool = False,
    tick: Callable[[], None] = _no_tick,
    before_commit: Callable[[], None] = _no_tick,
) -> LabelStudioImportReport:
    """Import a Label Studio export (``.json``, or a ``.zip`` holding it with its config and media)
    into ``study``, or into a new study of ``owner`` named ``name`` whose protocol the labeling config
    gives. All or nothing; see the module docstring and docs/import-export.md. ``media_root``: a
    local folder, a bucket prefix or a zip the tasks' files are read from; ``study_from_config``:
    ``study`` was just made from this export's config (:func:`labelstudio_study_protocol`, a new
    study whose tasks a job imports), so the config's controls are read as for a new study;
    ``tick``: an import job's heartbeat, called as files are stored; ``before_commit``: called last,
    inside the transaction (an import job's check for a cancel: raising rolls everything back and
    deletes the files)."""
    if (study is None) == (owner is None):
        raise ValidationFailed("give a study to import into, or an owner and a name for a new study")
    data, zipped_config, zipped_media = _read_input(address)
    rooted: FileSource | None = None
    try:
        if config_address is not None:
            config_name, config_data = file_read(config_address)
            config_text = _decode(config_data, config_name)
        config_text = config_text if config_text is not None else zipped_config
        if media_root is not None:
            rooted = folder_open(media_root)
        media: FileSource | None = rooted if rooted is not None else zipped_media
        return _import(
            records=_load(data, address_name(address)),
            study=study,
            owner=owner,
            name=name or PurePosixPath(address_name(address)).stem,
            config_text=config_text,
            media=media,
            source_name=address_name(address),
            study_from_config=study_from_config,
            tick=tick,
            before_commit=before_commit,
        )
    finally:
        for opened in (zipped_media, rooted):
            if opened is not None:
                opened.close()


def _import(
    *,
    records: list[dict[str, Any]],
    study: Study | None,
    owner: User | None,
    name: str,
    config_text: str | None,
    media: FileSource | None,
    source_name: str,
    study_from_config: bool,
    tick: Callable[[], None],
    before_commit: Callable[[], None],
) -> LabelStudioImportReport:
    report = LabelStudioImportReport()
    if study_from_config and config_text is None:
        raise ImportRefused("the labeling config this study was made from is missing")
    config: LabelStudioConfig | None = None
    if config_text is not None:
        try:
            config = config_to_protocol(config_text, name=name)
        except ConfigError as exc:
            raise ImportRefused(f"labeling config, {exc.message}") from exc
    elif study is None:
        raise ImportRefused("a new study needs the labeling config (--config CONFIG.xml) for its protocol")
    if study is not None:
        protocol = study.protocol_obj
    else:
        assert config is not None
        protocol = config.protocol
    json_min = not any("data" in record for record in records)
    if study is None or study_from_config:
        assert config is not None
        controls = config.controls
        report.protocol_restored = config.restored
        report.created_study = study_from_config
    else:
        controls = _study_controls(protocol, records, json_min, config)
    if json_min:
        tasks = _min_tasks(records, controls, protocol)
        report.shape = "json_min"
        report.notes.append(
            "JSON_MIN carries no predictions, no cancelled annotations and no tasks without annotations"
        )
    else:
        tasks, report.shape, report.predictions_left_out = _full_tasks(records)
        if report.predictions_left_out:
            report.notes.append(
                f"{report.predictions_left_out} predictions are given as ids only (the project export); "
                "a snapshot export carries them in full"
            )
    field_name = config.data_field if config is not None else _data_field(tasks, protocol.unit)
    files: dict[str, str] = {}
    options_fields = config.options_fields if config is not None else set()
    item_records = [
        (task.where, _item_record(task, field_name, protocol, media, files, options_fields)) for task in tasks
    ]
    seen_ids: dict[str, str] = {}
    for task, (_where, record) in zip(tasks, item_records, strict=True):
        if record["external_id"] in seen_ids:
            raise ImportRefused(
                f"{task.where}: external id {record['external_id']!r} repeats "
                f"{seen_ids[record['external_id']]}"
            )
        seen_ids[record["external_id"]] = task.where
    # The study (when new) and the item files are written first, each outside the transaction that
    # then writes the items and their answers together; if anything fails, both are removed again.
    created: Study | None = None
    if study is None:
        assert owner is not None and config is not None
        try:
            resolved = protocol_resolve(protocol=config.protocol.to_dict(), source="labeling config")
        except ValidationFailed as exc:
            raise ImportRefused(exc.message) from exc
        # A draft, as a study made on the new-study page: its researcher launches it (docs/annotating.md).
        study = created = study_create(
            owner=owner,
            name=name,
            protocol=resolved,
            imported_from=source_name,
            status=Study.Status.DRAFT,
        )
        report.created_study = True
    staged: StagedItems | None = None
    try:
        staged = items_import_stage(
            study=study,
            records=item_records,
            source=_TaskFiles(media, files) if media is not None else None,
            tick=tick,
        )
        with transaction.atomic():
            items: ImportReport = staged.insert()
            skipped = {
                d["external_id"]: d["reason"]
                for d in items.duplicates
                if d["reason"] != "already in the study"
            }
            facts = _facts(study, [record["external_id"] for _w, record in item_records])
            answers: list[ForeignAnswer] = []
            skips: list[ForeignSkip] = []
            for task, (_where, record) in zip(tasks, item_records, strict=True):
                external_id = record["external_id"]
                if external_id in skipped:
                    raise ImportRefused(
                        f"{task.where}, data.{field_name}: {skipped[external_id]}; one item per image"
                    )
                item = facts[external_id]
                judgements, superseded = _latest(task)
                report.superseded += superseded
                for judgement in judgements:
                    if judgement.cancelled:
                        skips.append(
                            ForeignSkip(
                                judgement.where, item, judgement.who, judgement.time_spent_ms, judgement.when
                            )
                        )
                        continue
                    answers.extend(_answers(judgement, item, protocol, controls))
            answer_report: AnswersReport = foreign_answers_save(study=study, answers=answers, skips=skips)
            before_commit()  # a job cancelled meanwhile: nothing of it commits
    except BaseException:
        if staged is not None:
            staged.discard()
        if created is not None:
            Study.objects.filter(pk=created.pk).delete()
        raise
    report.study_id, report.study_name = study.pk, study.name
    report.tasks = len(tasks)
    report.items = {key: value for key, value in items.as_dict().items() if key != "item_ids"}
    report.answers = answer_report.as_dict()
    return report
