"""Saving annotations (one at a time from the task page or API, or in bulk from a file).

Every value is checked by ``annotations.protocols.answers`` against its question, whoever gave it. An edit
keeps the previous state as an ``AnnotationRevision``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotations.models import Annotation, AnnotationRevision, Annotator, Item, ItemImage, Study, User
from annotations.protocols.answers import AnswerError, CleanAnswer, ItemContext, clean_answer
from common.errors import ImportRefused
from common.planner_statistics import statistics_refresh

BULK_BATCH = 2000


def item_context(item: Item, images: Iterable[ItemImage] | None = None) -> ItemContext:
    """Metadata and image sizes of an item, for validating answers about it."""
    images = item.images.all() if images is None else images
    return ItemContext(
        metadata=item.metadata,
        image_sizes=[
            (image.width, image.height) if image.width and image.height else None for image in images
        ],
    )


@transaction.atomic
def annotation_save(
    *,
    item: Item,
    annotator: Annotator,
    answer: CleanAnswer,
    source: str,
    time_spent_ms: int | None = None,
    edited_by: User | None = None,
) -> Annotation:
    """Create or change one annotation; a change keeps a revision. Locks the existing row."""
    existing = (
        Annotation.objects.select_for_update()
        .filter(item=item, annotator=annotator, question_key=answer.question_key)
        .first()
    )
    if existing is None:
        return Annotation.objects.create(
            study_id=item.study_id,
            item=item,
            annotator=annotator,
            question_key=answer.question_key,
            value=answer.value,
            shown=answer.shown,
            reason=answer.reason,
            source=source,
            time_spent_ms=time_spent_ms,
        )
    if existing.snapshot() == {"value": answer.value, "shown": answer.shown, "reason": answer.reason}:
        return existing
    AnnotationRevision.objects.create(
        annotation=existing,
        value=existing.value,
        shown=existing.shown,
        reason=existing.reason,
        replaced_by=edited_by,
    )
    existing.value, existing.shown, existing.reason = answer.value, answer.shown, answer.reason
    existing.source = source
    if time_spent_ms is not None:
        existing.time_spent_ms = time_spent_ms
    existing.save(update_fields=["value", "shown", "reason", "source", "time_spent_ms", "updated_at"])
    return existing


# --- Import from JSONL --------------------------------------------------------------------------


@dataclass
class AnnotationImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    annotators_created: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "annotators_created": self.annotators_created,
        }


@dataclass
class _Line:
    number: int
    item_id: int
    annotator_key: tuple[str, str, str]
    answer: CleanAnswer
    time_spent_ms: int | None


REQUIRED_FIELDS = ("item", "annotator", "question", "value")
ALLOWED_FIELDS = {
    *REQUIRED_FIELDS,
    "annotator_kind",
    "annotator_version",
    "reason",
    "shown",
    "time_spent_ms",
    "pool",
    "annotator_attributes",
}


def _parse_lines(data: bytes, name: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportRefused(f"line {number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise ImportRefused(f"line {number}: each line must be a JSON object")
        missing = [key for key in REQUIRED_FIELDS if key not in record]
        if missing:
            raise ImportRefused(f"line {number}: '{missing[0]}' is missing")
        unknown = sorted(set(record) - ALLOWED_FIELDS)
        if unknown:
            raise ImportRefused(f"line {number}: unknown field '{unknown[0]}'")
        records.append((number, record))
    if not records:
        raise ImportRefused(f"{name}: has no annotations")
    return records


def annotations_import(*, study: Study, path: Path) -> AnnotationImportReport:
    """Import a JSONL file of annotations into ``study``; all or nothing.

    A line: ``{"item": EXTERNAL_ID, "annotator": NAME, "annotator_kind": "human"|"machine",
    "question": KEY, "value": ..., "reason": ..., "shown": [...]}`` (see docs/import-export.md).
    Unknown items, questions or options, and values that do not fit their question, stop the
    import with the line number. Human annotators named in the file become annotators of this
    study (without accounts); machine annotators are shared by (name, version).
    """
    if not path.is_file():
        raise ImportRefused(f"{path}: no such file")
    return annotations_import_records(study=study, records=_parse_lines(path.read_bytes(), path.name))


def annotations_import_records(
    *, study: Study, records: list[tuple[int, dict[str, Any]]]
) -> AnnotationImportReport:
    protocol = study.protocol_obj
    wanted = {str(record["item"]) for _number, record in records}
    items = {item.external_id: item for item in Item.objects.filter(study=study, external_id__in=wanted)}
    sizes: dict[int, list[tuple[int, int] | None]] = {}
    for image in ItemImage.objects.filter(item__in=items.values()).order_by("item_id", "position"):
        sizes.setdefault(image.item_id, []).append(
            (image.width, image.height) if image.width and image.height else None
        )
    annotator_specs: dict[tuple[str, str, str], dict[str, Any]] = {}
    parsed: list[tuple[int, dict[str, Any], Item]] = []
    for number, record in records:
        item = items.get(str(record["item"]))
        if item is None:
            raise ImportRefused(f"line {number}: item {record['item']!r} is not in this study")
        kind = record.get("annotator_kind", "human")
        if kind not in Annotator.Kind.values:
            raise ImportRefused(f"line {number}: annotator_kind must be 'human' or 'machine'")
        name = str(record["annotator"]).strip()
        if not name or len(name) > 150:
            raise ImportRefused(f"line {number}: annotator must be a name of 1 to 150 characters")
        version = str(record.get("annotator_version", "") or "") if kind == "machine" else ""
        pool = record.get("pool")
        if pool is not None and pool not in Annotator.Pool.values:
            raise ImportRefused(f"line {number}: pool must be 'crowd' or 'expert'")
        attributes = record.get("annotator_attributes")
        if attributes is not None and not isinstance(attributes, dict):
            raise ImportRefused(f"line {number}: annotator_attributes must be a JSON object")
        spec = annotator_specs.setdefault((kind, name, version), {})
        if pool:
            spec["pool"] = pool
        if attributes:
            spec["attributes"] = attributes
        parsed.append((number, record, item))
    # Non-box answers first: boxes are checked against the options selected in their linked question.
    parsed.sort(key=lambda entry: _is_boxes(protocol, entry[1]))
    selected: dict[tuple[int, tuple[str, str, str], str], Any] = {}
    lines: list[_Line] = []
    seen: dict[tuple[int, tuple[str, str, str], str], int] = {}
    for number, record, item in parsed:
        kind = record.get("annotator_kind", "human")
        name = str(record["annotator"]).strip()
        version = str(record.get("annotator_version", "") or "") if kind == "machine" else ""
        annotator_key = (kind, name, version)
        question_key = str(record["question"])
        if not protocol.has_question(question_key):
            raise ImportRefused(f"line {number}: question {question_key!r} is not in the protocol")
        question = protocol.question(question_key)
        if not question.applies_to(item.metadata):
            raise ImportRefused(
                f"line {number}: question {question_key!r} does not apply to item {item.external_id!r}"
            )
        key = (item.pk, annotator_key, question_key)
        if key in seen:
            raise ImportRefused(f"line {number}: repeats the answer of line {seen[key]}")
        seen[key] = number
        boxes_selected = None
        if question.kind == "boxes" and question.linked_question:
            boxes_selected = selected.get((item.pk, annotator_key, question.linked_question))
            if boxes_selected is None:
                boxes_selected = _stored_selection(study, item, annotator_key, question.linked_question)
        context = ItemContext(metadata=item.metadata, image_sizes=sizes.get(item.pk, []))
        try:
            answer = clean_answer(
                question,
                record["value"],
                context=context,
                protocol=protocol,
                shown=record.get("shown"),
                reason=record.get("reason", ""),
                selected=boxes_selected,
            )
        except AnswerError as exc:
            raise ImportRefused(f"line {number}: {exc}") from exc
        time_spent = record.get("time_spent_ms")
        if time_spent is not None and (
            isinstance(time_spent, bool) or not isinstance(time_spent, int) or time_spent < 0
        ):
            raise ImportRefused(f"line {number}: time_spent_ms must be a non-negative integer")
        if question.kind == "multi":
            selected[key] = answer.value
        lines.append(_Line(number, item.pk, annotator_key, answer, time_spent))
    return _write_imported(study, lines, annotator_specs)


def _stored_selection(
    study: Study, item: Item, annotator_key: tuple[str, str, str], question_key: str
) -> list[str]:
    """The options an annotator already selected (in the database) for a boxes question's linked question."""
    kind, name, version = annotator_key
    annotators = Annotator.objects.filter(kind=kind, name=name)
    annotators = (
        annotators.filter(version=version)
        if kind == Annotator.Kind.MACHINE
        else annotators.filter(study=study)
    )
    stored = Annotation.objects.filter(item=item, annotator__in=annotators, question_key=question_key).first()
    return list(stored.value) if stored is not None and isinstance(stored.value, list) else []


def _is_boxes(protocol: Any, record: dict[str, Any]) -> bool:
    key = str(record.get("question"))
    return protocol.has_question(key) and protocol.question(key).kind == "boxes"


@transaction.atomic
def _write_imported(
    study: Study, lines: list[_Line], annotator_specs: dict[tuple[str, str, str], dict[str, Any]]
) -> AnnotationImportReport:
    report = AnnotationImportReport()
    annotators: dict[tuple[str, str, str], Annotator] = {}
    # Study-scoped humans in bulk (a published dataset can name thousands of anonymous raters).
    human_names = [name for (kind, name, _version) in annotator_specs if kind == Annotator.Kind.HUMAN]
    known = {
        a.name: a
        for a in Annotator.objects.filter(kind=Annotator.Kind.HUMAN, study=study, name__in=human_names)
    }
    new_humans = [
        Annotator(
            kind=Annotator.Kind.HUMAN,
            study=study,
            name=name,
            pool=annotator_specs[(Annotator.Kind.HUMAN, name, "")].get("pool", Annotator.Pool.CROWD),
            attributes=annotator_specs[(Annotator.Kind.HUMAN, name, "")].get("attributes", {}),
        )
        for name in human_names
        if name not in known
    ]
    for annotator in Annotator.objects.bulk_create(new_humans, batch_size=BULK_BATCH):
        known[annotator.name] = annotator
    new_names = {annotator.name for annotator in new_humans}
    for kind, name, version in annotator_specs:
        if kind == Annotator.Kind.MACHINE:
            annotator, created = Annotator.objects.get_or_create(
                kind=kind, name=name, version=version, defaults={"config": {}}
            )
        else:
            annotator, created = known[name], name in new_names
        if created:
            report.annotators_created.append(name if not version else f"{name} {version}")
        annotators[(kind, name, version)] = annotator
    existing: dict[tuple[int, int, str], Annotation] = {}
    annotator_ids = [annotator.pk for annotator in annotators.values()]
    item_ids = sorted({line.item_id for line in lines})
    for start in range(0, len(item_ids), BULK_BATCH):
        chunk = item_ids[start : start + BULK_BATCH]
        for annotation in Annotation.objects.filter(item_id__in=chunk, annotator_id__in=annotator_ids):
            existing[(annotation.item_id, annotation.annotator_id, annotation.question_key)] = annotation
    to_create: list[Annotation] = []
    to_update: list[Annotation] = []
    revisions: list[AnnotationRevision] = []
    for line in lines:
        annotator = annotators[line.annotator_key]
        answer = line.answer
        current = existing.get((line.item_id, annotator.pk, answer.question_key))
        if current is None:
            to_create.append(
                Annotation(
                    study=study,
                    item_id=line.item_id,
                    annotator=annotator,
                    question_key=answer.question_key,
                    value=answer.value,
                    shown=answer.shown,
                    reason=answer.reason,
                    time_spent_ms=line.time_spent_ms,
                    source=Annotation.Source.IMPORT,
                )
            )
        elif current.snapshot() == {"value": answer.value, "shown": answer.shown, "reason": answer.reason}:
            report.unchanged += 1
        else:
            revisions.append(
                AnnotationRevision(
                    annotation=current, value=current.value, shown=current.shown, reason=current.reason
                )
            )
            current.value, current.shown, current.reason = answer.value, answer.shown, answer.reason
            current.source = Annotation.Source.IMPORT
            current.updated_at = timezone.now()
            to_update.append(current)
    Annotation.objects.bulk_create(to_create, batch_size=BULK_BATCH)
    AnnotationRevision.objects.bulk_create(revisions, batch_size=BULK_BATCH)
    Annotation.objects.bulk_update(
        to_update, ["value", "shown", "reason", "source", "updated_at"], batch_size=BULK_BATCH
    )
    report.created = len(to_create)
    report.updated = len(to_update)
    statistics_refresh(Annotation, Annotator, rows=len(to_create) + len(new_humans))
    return report
