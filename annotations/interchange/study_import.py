"""Rebuilding a study from its export (``study.jsonl``, or a zip holding it and the image files)."""

from __future__ import annotations

import zipfile
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils.dateparse import parse_datetime

from annotations.access import studies_for_user, studies_writable_by
from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.interchange.records import jsonl_objects
from annotations.interchange.sources import Address, address_name, archive_open, file_read
from annotations.models import (
    Annotation,
    AnnotationRevision,
    Annotator,
    AnnotatorExclusion,
    ConsensusLabel,
    Enrollment,
    Item,
    Study,
    User,
)
from annotations.services.controls import control_answers_clean
from annotations.services.rater_pools import study_rater_pools_set
from annotations.services.stored_files import item_files_kept_on_success
from annotations.services.studies import protocol_resolve, study_create, study_overlap_set
from annotations.services.study_options import study_options_parse, study_options_restore
from common.errors import ImportRefused, ValidationFailed
from common.files import FileSource

ITEM_FIELDS = (
    "external_id",
    "text",
    "prompt",
    "model",
    "condition",
    "seed",
    "settings",
    "metadata",
    "expert_only",
)


def _records(data: bytes, name: str) -> list[tuple[int, dict[str, Any]]]:
    records = []
    for number, record in jsonl_objects(
        data.decode("utf-8"), where=f"{name} ", not_object="not a workbench export record"
    ):
        if "type" not in record:
            raise ImportRefused(f"{name} line {number}: not a workbench export record")
        records.append((number, record))
    if not records or records[0][1]["type"] != "study":
        raise ImportRefused(f"{name}: does not start with a study record (is it a workbench export?)")
    return records


def study_import(*, owner: User, address: Address, name: str | None = None) -> Study:
    """Create a new study from an export; all or nothing. Returns the new study. ``path``: a local
    file or a bucket object (``annotations.interchange.sources``)."""
    source: FileSource | None = None
    label = address_name(address)
    if label.lower().endswith(".zip"):
        source = archive_open(address)
        try:
            data = source.read("study.jsonl", limit=1 << 40)
        except ImportRefused as exc:
            source.close()
            raise ImportRefused(f"{label}: has no study.jsonl") from exc
    else:
        label, data = file_read(address)
    try:
        with item_files_kept_on_success():  # the study's transaction rolled back: its files go too
            return _study_import(owner=owner, records=_records(data, label), source=source, name=name)
    except (zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise ImportRefused(f"{label}: unreadable ({exc})") from exc
    finally:
        if source is not None:
            source.close()


@transaction.atomic
def _study_import(
    *, owner: User, records: list[tuple[int, dict[str, Any]]], source: FileSource | None, name: str | None
) -> Study:
    head = records[0][1]
    protocol = protocol_resolve(protocol=head.get("protocol"), source="export")
    try:
        options = study_options_parse(head.get("options"), protocol=protocol)
    except ValidationFailed as exc:
        raise ImportRefused(f"line {records[0][0]}: {exc.message}") from exc
    study = study_create(
        owner=owner,
        name=name or str(head.get("name", "Imported study")),
        protocol=protocol,
        preset=str(head.get("preset", "")),
        overlap=int(head.get("overlap", 3)),
        lease_minutes=int(head.get("lease_minutes", 30)),
        description=str(head.get("description", "")),
    )
    study = study_options_restore(study=study, options=options, linkable=studies_for_user(owner))
    pools = head.get("rater_pools")
    if pools is not None and not isinstance(pools, dict):
        raise ImportRefused(
            f"line {records[0][0]}: rater_pools must be an object of an attribute and its quotas, "
            'e.g. {"attribute": "region", "quotas": {"South Asia": 2}}'
        )
    if pools and (pools.get("attribute") or pools.get("quotas")):
        try:  # refuses quotas without an attribute, and quotas outside 1..overlap
            study = study_rater_pools_set(
                study=study, attribute=pools.get("attribute") or "", quotas=pools.get("quotas") or {}
            )
        except ValidationFailed as exc:
            raise ImportRefused(f"line {records[0][0]}: rater_pools: {exc.message}") from exc
    item_records: list[tuple[str, dict[str, Any]]] = []
    annotation_records: list[tuple[int, dict[str, Any]]] = []
    revisions: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}
    annotator_info: dict[tuple[str, str, str], dict[str, Any]] = {}
    item_extras: dict[str, dict[str, Any]] = {}  # external id -> note and control mark
    later: dict[str, list[tuple[int, dict[str, Any]]]] = {"consensus": [], "exclusion": []}
    for number, record in records[1:]:
        kind = record["type"]
        if kind == "annotator":
            annotator_info[
                (record.get("kind", "human"), record.get("name", ""), record.get("version", ""))
            ] = record
        elif kind == "item":
            row = {key: record[key] for key in ITEM_FIELDS if key in record and record[key] not in (None, "")}
            files = record.get("files") or []
            if files and source is not None:
                row["files"] = [entry["path"] for entry in files]
                row["original_names"] = [entry.get("name") or entry["path"] for entry in files]
            elif files:
                row.setdefault("metadata", {})
                row["metadata"] = {
                    **row["metadata"],
                    "exported_files": [entry.get("name") for entry in files],
                }
            item_records.append((f"line {number}", row))
            if record.get("note") or record.get("control"):
                item_extras[str(record.get("external_id", ""))] = {
                    "note": record.get("note") or "",
                    "control": record.get("control"),
                    "line": number,
                }
        elif kind == "annotation":
            line = {
                key: record[key]
                for key in (
                    "item",
                    "annotator",
                    "annotator_kind",
                    "question",
                    "value",
                    "reason",
                    "shown",
                    "time_spent_ms",
                )
                if record.get(key) is not None
            }
            if record.get("annotator_version"):
                line["annotator_version"] = record["annotator_version"]
            info = annotator_info.get(
                (
                    record.get("annotator_kind", "human"),
                    record["annotator"],
                    record.get("annotator_version", ""),
                )
            )
            if info and info.get("kind") == "human":
                line["pool"] = info.get("pool") or "crowd"
                if info.get("attributes"):
                    line["annotator_attributes"] = info["attributes"]
            annotation_records.append((number, line))
            if record.get("revisions"):
                revisions[
                    (
                        record["item"],
                        record["annotator"],
                        record.get("annotator_kind", "human"),
                        record.get("annotator_version", ""),
                        record["question"],
                    )
                ] = record["revisions"]
        elif kind in later:
            later[kind].append((number, record))
        else:
            raise ImportRefused(f"line {number}: unknown record type {kind!r}")
    if item_records:
        items_import_records(study=study, records=item_records, source=source)
    if annotation_records:
        annotations_import_records(study=study, records=annotation_records)
    _restore_revisions(study, revisions)
    _restore_item_extras(study, item_extras)
    _restore_consensus(study, later["consensus"])
    _restore_exclusions(study, later["exclusion"])
    return _restore_overlap_policy(study, head, number=records[0][0])


def _restore_overlap_policy(study: Study, head: dict[str, Any], *, number: int) -> Study:
    """The exported overlap policy, set once every answer is in (a ``posterior`` policy fits its model on
    them, and every item's claim state is decided from its imported votes, as a save on the Overlap tab
    does). An export without one (older files, ``fixed:K``) keeps the overlap it gave."""
    policy = str(head.get("overlap_policy") or "")
    if not policy:
        return study
    try:
        return study_overlap_set(study=study, policy=policy, question=str(head.get("overlap_question") or ""))
    except ValidationFailed as exc:
        raise ImportRefused(f"line {number}: {exc.message}") from exc


def _restore_item_extras(study: Study, extras: dict[str, dict[str, Any]]) -> None:
    """Notes and control marks (gold answers checked again against the protocol)."""
    protocol = study.protocol_obj
    for item in Item.objects.filter(study=study, external_id__in=list(extras)):
        extra = extras[item.external_id]
        item.note = str(extra["note"])[:2000]
        control = extra["control"]
        if control:
            if control.get("kind") not in ("gold", "attention"):
                raise ImportRefused(
                    f"line {extra['line']}: control kind {control.get('kind')!r} is not gold or attention"
                )
            try:
                item.control_answers = control_answers_clean(
                    protocol=protocol, item=item, answers=control.get("answers") or {}
                )
            except ValidationFailed as exc:
                raise ImportRefused(f"line {extra['line']}: control answers: {exc.message}") from exc
            item.control_kind = control["kind"]
        item.save(update_fields=["note", "control_kind", "control_answers"])


def _annotator_key(record: dict[str, Any], prefix: str = "annotator") -> tuple[str, str, str]:
    return (
        str(record.get(prefix, "")),
        str(record.get(f"{prefix}_kind", "human")),
        str(record.get(f"{prefix}_version", "")),
    )


def _restore_consensus(study: Study, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Stored consensus labels; support found again through (item, question, annotator)."""
    if not records:
        return
    items = dict(Item.objects.filter(study=study).values_list("external_id", "id"))
    # Looked up with (item id, question, *the record's strings): any tuple may be asked for.
    annotation_ids: dict[tuple[object, ...], int] = {
        (item_id, question, name, kind, version): pk
        for pk, item_id, question, name, kind, version in Annotation.objects.filter(study=study).values_list(
            "id", "item_id", "question_key", "annotator__name", "annotator__kind", "annotator__version"
        )
    }
    users = _users(study, {record.get("adjudicated_by") for _n, record in records})
    labels = []
    for number, record in records:
        item_id = items.get(str(record.get("item", "")))
        if item_id is None:
            raise ImportRefused(f"line {number}: consensus for unknown item {record.get('item')!r}")
        question = str(record.get("question", ""))
        try:
            support = [
                annotation_ids.get((item_id, question, *map(str, who))) for who in record.get("support") or []
            ]
            confidence = None if record.get("confidence") is None else float(record["confidence"])
            n_votes = int(record.get("n_votes") or 0)
            if n_votes < 0:
                raise ValueError(f"n_votes {n_votes} is negative")
        except (TypeError, ValueError) as exc:
            raise ImportRefused(
                f"line {number}: a consensus record's support, confidence or n_votes is malformed ({exc})"
            ) from exc
        labels.append(
            ConsensusLabel(
                study=study,
                item_id=item_id,
                question_key=question,
                value=record.get("value"),
                resolved=bool(record.get("resolved")),
                rule=str(record.get("rule", ""))[:32],
                params=record.get("params") or {},
                support=[pk for pk in support if pk is not None],
                confidence=confidence,
                reason=str(record.get("reason") or ""),
                n_votes=n_votes,
                pending=bool(record.get("pending")),
                adjudicated_by=users.get(record.get("adjudicated_by")),
                note=str(record.get("note") or ""),
            )
        )
    ConsensusLabel.objects.bulk_create(labels, batch_size=2000)


def _restore_exclusions(study: Study, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Exclusions with their history (who and when, reinstatements); people are found by username."""
    if not records:
        return
    annotators = {
        (a.name, a.kind, a.version): a for a in Annotator.objects.filter(annotations__study=study).distinct()
    }
    users = _users(
        study, {record.get(key) for _n, record in records for key in ("excluded_by", "reinstated_by")}
    )
    for number, record in records:
        annotator = annotators.get(_annotator_key(record))
        if annotator is None:
            raise ImportRefused(
                f"line {number}: exclusion of an annotator with no annotations: {record.get('annotator')!r}"
            )
        try:
            with transaction.atomic():
                AnnotatorExclusion.objects.create(
                    study=study,
                    annotator=annotator,
                    reason=str(record.get("reason") or "imported"),
                    excluded_by=users.get(record.get("excluded_by")),
                    excluded_at=_when(record.get("excluded_at"), number),
                    reinstated_by=users.get(record.get("reinstated_by")),
                    reinstated_at=_when(record.get("reinstated_at"), number)
                    if record.get("reinstated_at")
                    else None,
                    reinstate_note=str(record.get("reinstate_note") or ""),
                )
        except IntegrityError as exc:  # e.g. two exclusions of one person, neither reinstated
            raise ImportRefused(
                f"line {number}: {record.get('annotator')!r} is excluded twice without being "
                f"reinstated in between"
            ) from exc


def _users(study: Study, names: set[Any]) -> dict[object, User]:
    """Accounts by username (looked up with whatever a record holds, so not only by str), among the
    people of the studies the new study's owner may change (the owner, their collaborators, people
    enrolled or answering there): an archive never links another researcher's people, nor tells
    which usernames exist (docs/security.md, "Imported people and labellers stay in their study")."""
    own = studies_writable_by(study.owner).values("id")
    people = User.objects.filter(
        Q(pk=study.owner_id)
        | Exists(
            Study.objects.filter(id__in=own).filter(Q(owner=OuterRef("pk")) | Q(shared_with=OuterRef("pk")))
        )
        | Exists(Enrollment.objects.filter(user=OuterRef("pk"), study__in=own))
        | Exists(Annotation.objects.filter(annotator__user=OuterRef("pk"), study__in=own))
    )
    return {user.username: user for user in people.filter(username__in=[n for n in names if n])}


def _when(text: Any, number: int) -> Any:
    moment = parse_datetime(str(text or ""))
    if moment is None:
        raise ImportRefused(f"line {number}: {text!r} is not a date and time (ISO 8601)")
    return moment


def _restore_revisions(
    study: Study, revisions: dict[tuple[str, str, str, str, str], list[dict[str, Any]]]
) -> None:
    if not revisions:
        return
    annotations = Annotation.objects.filter(study=study).select_related("item", "annotator")
    rows = []
    for annotation in annotations.iterator(chunk_size=2000):
        annotator: Annotator = annotation.annotator
        key = (
            annotation.item.external_id,
            annotator.name,
            annotator.kind,
            annotator.version,
            annotation.question_key,
        )
        for revision in revisions.get(key, []):
            rows.append(
                AnnotationRevision(
                    annotation=annotation,
                    value=revision.get("value"),
                    shown=revision.get("shown"),
                    reason=revision.get("reason") or "",
                )
            )
    AnnotationRevision.objects.bulk_create(rows, batch_size=2000)
