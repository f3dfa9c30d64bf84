"""Annotations from a JSONL file (docs/import-export.md, "Annotations"): every line checked against its
question by ``protocols.answers`` and stored through ``annotations_save``, all or nothing.
The record form (``annotations_import_records``) is what study archives, ViSAGe and Label Studio
imports store their answers through."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import transaction
from django.db.models import Q

from annotations.interchange.box_cover import GivenSelection, boxes_cover_check
from annotations.interchange.records import jsonl_objects, utf8_text
from annotations.interchange.sources import Address, file_read
from annotations.models import Annotation, Annotator, Item, ItemImage, Study
from annotations.services.annotation_writes import (
    BULK_BATCH,
    MAX_TIME_SPENT_MS,
    AnswerToSave,
    annotations_save,
    machine_annotator_for_import,
)
from annotations.services.annotator_attributes import MAX_ATTRIBUTE_KEYS, attributes_clean, attributes_merged
from common.errors import ImportRefused, ValidationFailed
from common.planner_statistics import statistics_refresh
from protocols.answers import (
    AnswerError,
    CleanAnswer,
    ItemContext,
    clean_answer,
)
from protocols.schema import Protocol


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
    records = []
    for number, record in jsonl_objects(utf8_text(data, name)):
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


def annotations_import(*, study: Study, address: Address) -> AnnotationImportReport:
    """Import a JSONL file of annotations into ``study``; all or nothing.

    A line: ``{"item": EXTERNAL_ID, "annotator": NAME, "annotator_kind": "human"|"machine",
    "question": KEY, "value": ..., "reason": ..., "shown": [...]}`` (see docs/import-export.md).
    Unknown items, questions or options, and values that do not fit their question, stop the
    import with the line number; so do a multi answer that ``require_all_shown`` and whose ``shown``
    misses an option, and selected options without a box where the boxes question says
    ``boxes_required: each_selected`` (checked per item and annotator, file and stored answers
    together: ``_check_boxes_cover_selections``). Human annotators named in the file become annotators of this
    study (without accounts); so do machine annotators, by (name, version)
    (``machine_annotator_for_import``).
    """
    name, data = file_read(address)
    return annotations_import_records(study=study, records=_parse_lines(data, name))


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
        spec = annotator_specs.setdefault((kind, name, version), {})
        if pool:
            spec["pool"] = pool
        _take_attributes(spec, number, name, kind, record.get("annotator_attributes"))
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
            isinstance(time_spent, bool)
            or not isinstance(time_spent, int)
            or not 0 <= time_spent <= MAX_TIME_SPENT_MS
        ):
            raise ImportRefused(
                f"line {number}: time_spent_ms must be a whole number of milliseconds from 0 to "
                f"{MAX_TIME_SPENT_MS} (a day)"
            )
        if question.kind == "multi":
            selected[key] = answer.value
        lines.append(_Line(number, item.pk, annotator_key, answer, time_spent))
    _check_boxes_cover_selections(study, protocol, items.values(), selected, seen)
    return _write_imported(study, lines, annotator_specs)


def _take_attributes(spec: dict[str, Any], number: int, name: str, kind: str, given: Any) -> None:
    """Collect one line's ``annotator_attributes`` into its annotator's ``spec`` (checked:
    ``attributes_clean``; people only). Two lines that give one annotator different values of one
    attribute are refused, naming both lines."""
    if given is None:
        return
    try:
        attributes = attributes_clean(given, where=f"line {number}: annotator_attributes")
    except ValidationFailed as exc:
        raise ImportRefused(exc.message) from exc
    if attributes and kind != Annotator.Kind.HUMAN:
        raise ImportRefused(f"line {number}: annotator_attributes are for people, not machine labellers")
    taken = spec.setdefault("attributes", {})
    lines = spec.setdefault("attribute_lines", {})
    for key, value in attributes.items():
        if key in taken and json.dumps(taken[key]) != json.dumps(value):
            raise ImportRefused(
                f"line {number}: gives annotator {name!r} {key} {value!r}, but line {lines[key]} gave "
                f"{taken[key]!r}; an annotator has one {key} in a study"
            )
        taken.setdefault(key, value)
        lines.setdefault(key, number)
    if len(taken) > MAX_ATTRIBUTE_KEYS:  # each line within the limit, their union too
        raise ImportRefused(
            f"line {number}: annotator {name!r} would have {len(taken)} attributes in this study, more than "
            f"{MAX_ATTRIBUTE_KEYS}"
        )


def _check_boxes_cover_selections(
    study: Study,
    protocol: Protocol,
    items: Iterable[Item],
    selected: dict[tuple[int, tuple[str, str, str], str], Any],
    seen: dict[tuple[int, tuple[str, str, str], str], int],
) -> None:
    """``boxes_required: each_selected`` for the selections of a file whose boxes are not in it (the one
    rule: ``interchange/box_cover.py``). An import line holds one question, so a selection with a boxes
    line in the file was checked with that line (``clean_answer`` is told the selection)."""
    external = {item.pk: item for item in items}
    boxes_cover_check(
        protocol,
        [
            GivenSelection(
                item_id=item_id,
                annotator=annotator_key,
                question_key=question_key,
                value=value,
                metadata=external[item_id].metadata,
                machine=annotator_key[0] == Annotator.Kind.MACHINE,
                where=f"line {seen[(item_id, annotator_key, question_key)]}",
                whose=f"answer of {annotator_key[1]!r} on item {external[item_id].external_id!r}",
            )
            for (item_id, annotator_key, question_key), value in selected.items()
        ],
        seen,
        lambda key, groups: dict(
            _stored_answers(study, key, cast(set[tuple[int, tuple[str, str, str]]], groups))
        ),
    )


def _stored_answers(
    study: Study, question_key: str, groups: set[tuple[int, tuple[str, str, str]]]
) -> dict[tuple[int, tuple[str, str, str]], Any]:
    """The stored answers to ``question_key`` of the (item id, annotator key) ``groups``, in bulk
    (by name, and machines by version, among this study's own annotators, as the import finds them)."""
    found: dict[tuple[int, tuple[str, str, str]], Any] = {}
    item_ids = sorted({item_id for item_id, _annotator in groups})
    for start in range(0, len(item_ids), BULK_BATCH):
        rows = Annotation.objects.filter(
            study=study, question_key=question_key, item_id__in=item_ids[start : start + BULK_BATCH]
        ).values_list(
            "item_id",
            "annotator__kind",
            "annotator__name",
            "annotator__version",
            "annotator__study_id",
            "value",
        )
        for item_id, kind, name, version, annotator_study, value in rows:
            if annotator_study != study.pk and (kind == Annotator.Kind.HUMAN or annotator_study is not None):
                continue  # an account's answers are never matched by an imported name
            key = (item_id, (kind, name, version if kind == Annotator.Kind.MACHINE else ""))
            if key in groups:
                found[key] = value if isinstance(value, list) else []
    return found


def _stored_selection(
    study: Study, item: Item, annotator_key: tuple[str, str, str], question_key: str
) -> list[str]:
    """The options an annotator already selected (in the database) for a boxes question's linked question."""
    kind, name, version = annotator_key
    annotators = Annotator.objects.filter(kind=kind, name=name)
    annotators = (
        annotators.filter(Q(study=study) | Q(study__isnull=True), version=version)
        if kind == Annotator.Kind.MACHINE
        else annotators.filter(study=study)
    )
    stored = Annotation.objects.filter(item=item, annotator__in=annotators, question_key=question_key).first()
    return list(stored.value) if stored is not None and isinstance(stored.value, list) else []


def _is_boxes(protocol: Any, record: dict[str, Any]) -> bool:
    key = str(record.get("question"))
    return bool(protocol.has_question(key) and protocol.question(key).kind == "boxes")


def _attributes_update(annotators: list[Annotator], given: dict[str, dict[str, Any]]) -> None:
    """Merge the file's attributes into annotators the study already had (the file's keys set, the rest
    kept), in bulk."""
    changed = []
    for annotator in annotators:
        if not given.get(annotator.name):
            continue  # nothing given: what the annotator has stays, whatever it is
        try:
            merged = attributes_merged(
                annotator.study_attributes, given.get(annotator.name) or {}, who=annotator.name
            )
        except ValidationFailed as exc:
            raise ImportRefused(exc.message) from exc
        if merged != annotator.study_attributes:
            annotator.study_attributes = merged
            changed.append(annotator)
    Annotator.objects.bulk_update(changed, ["study_attributes"], batch_size=BULK_BATCH)


@transaction.atomic
def _write_imported(
    study: Study, lines: list[_Line], annotator_specs: dict[tuple[str, str, str], dict[str, Any]]
) -> AnnotationImportReport:
    """Find or create the file's annotators, then store its answers with ``annotations_save``; one
    transaction, so a failed import leaves nothing behind."""
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
            study_pool=annotator_specs[(Annotator.Kind.HUMAN, name, "")].get("pool", Annotator.Pool.CROWD),
            study_attributes=annotator_specs[(Annotator.Kind.HUMAN, name, "")].get("attributes", {}),
        )
        for name in human_names
        if name not in known
    ]
    for annotator in Annotator.objects.bulk_create(new_humans, batch_size=BULK_BATCH):
        known[annotator.name] = annotator
    new_names = {annotator.name for annotator in new_humans}
    _attributes_update(
        [known[name] for name in human_names if name not in new_names],
        {
            name: annotator_specs[(Annotator.Kind.HUMAN, name, "")].get("attributes", {})
            for name in human_names
        },
    )
    for kind, name, version in annotator_specs:
        if kind == Annotator.Kind.MACHINE:
            annotator, created = machine_annotator_for_import(study=study, name=name, version=version)
        else:
            annotator, created = known[name], name in new_names
        if created:
            report.annotators_created.append(name if not version else f"{name} {version}")
        annotators[(kind, name, version)] = annotator
    counts = annotations_save(
        study_id=study.pk,
        answers=[
            AnswerToSave(
                item_id=line.item_id,
                annotator=annotators[line.annotator_key],
                answer=line.answer,
                time_spent_ms=line.time_spent_ms,
            )
            for line in lines
        ],
        source=Annotation.Source.IMPORT,
    )
    report.created, report.updated, report.unchanged = counts.created, counts.updated, counts.unchanged
    statistics_refresh(Annotation, Annotator, rows=counts.created + len(new_humans))
    return report
