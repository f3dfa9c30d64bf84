"""Control items (gold items and attention checks) marked from a CSV or JSONL file (docs/crowd.md,
"Quality control"): each row is marked through ``annotations.services.controls.control_mark``, in one
transaction; a bad row stops the import with its line."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from django.db import transaction

from annotations.interchange.item_import import manifest_records_read
from annotations.interchange.sources import Address, file_read
from annotations.models import ControlKind, Item, Study
from annotations.services.controls import control_mark
from common.errors import ImportRefused, ValidationFailed
from protocols.schema import Protocol


@dataclass
class ControlImportReport:
    marked: int = 0
    replaced: int = 0
    item_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


RESERVED = {"external_id", "kind", "note", "answers"}


def _answers_from_record(record: dict[str, Any], protocol: Protocol) -> dict[str, Any]:
    if "answers" in record:
        return record["answers"] if isinstance(record["answers"], dict) else {"answers": record["answers"]}
    answers: dict[str, Any] = {}
    for key, value in record.items():
        if key in RESERVED or value in ("", None):
            continue
        if isinstance(value, str) and protocol.has_question(key) and protocol.question(key).kind == "multi":
            value = [part.strip() for part in value.split(";") if part.strip()]
        answers[key] = value
    return answers


@transaction.atomic
def controls_import(
    *, study: Study, address: Address, default_kind: str = ControlKind.GOLD
) -> ControlImportReport:
    """Mark controls from a CSV or JSONL file (see docs/crowd.md); one transaction, a bad row stops it.

    Each row names an item (``external_id``), optionally its ``kind`` (gold or attention; else
    ``default_kind``) and ``note``, and its expected answers: in JSONL an ``answers`` object or one key
    per question; in CSV one column per question (a multi question's options separated by ``;`` or as
    a JSON list). Empty cells are no answer.
    """
    if default_kind not in ControlKind.values:
        raise ValidationFailed(f"kind must be one of {', '.join(ControlKind.values)}")
    protocol = study.protocol_obj
    report = ControlImportReport()
    seen: set[str] = set()
    name, data = file_read(address)
    rows = list(manifest_records_read(name, data))
    if not rows:
        raise ImportRefused(f"{name}: has no rows")
    items = {
        item.external_id: item
        for item in Item.objects.filter(
            study=study, external_id__in=[str(record.get("external_id", "")) for _where, record in rows]
        )
    }
    for where, record in rows:
        external_id = str(record.get("external_id", "")).strip()
        if not external_id:
            raise ImportRefused(f"{where}: external_id is required")
        if external_id in seen:
            raise ImportRefused(f"{where}: item {external_id!r} appears twice")
        seen.add(external_id)
        item = items.get(external_id)
        if item is None:
            raise ImportRefused(f"{where}: no item {external_id!r} in this study")
        kind = str(record.get("kind") or default_kind).strip()
        try:
            was_control = bool(item.control_kind)
            control_mark(
                study=study,
                item=item,
                kind=kind,
                answers=_answers_from_record(record, protocol),
                note=str(record.get("note") or ""),
            )
        except ValidationFailed as exc:
            raise ImportRefused(f"{where}: {exc.message}") from exc
        report.replaced += was_control
        report.marked += not was_control
        report.item_ids.append(item.pk)
    return report
