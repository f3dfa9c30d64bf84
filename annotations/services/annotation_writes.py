"""Saving annotations: the one write used by task submits (page and API), machine labellers and every
import (their readers are ``annotations/interchange/annotation_import.py`` and the other adapters).

Every value is checked by ``protocols.answers`` against its question before it gets here,
whoever gave it; ``annotations_save`` stores already-cleaned answers and keeps the previous state of an
edited annotation as an ``AnnotationRevision``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections, models, router, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from annotations.models import (
    Annotation,
    AnnotationRevision,
    Annotator,
    Item,
    ItemFeature,
    ItemImage,
    Study,
)
from protocols.answers import (
    CleanAnswer,
    ItemContext,
)

BULK_BATCH = 2000
MAX_TIME_SPENT_MS = 24 * 3600 * 1000  # the same day's cap as the task page and the submit API


def item_context(item: Item, images: Iterable[ItemImage] | None = None) -> ItemContext:
    """Metadata and image sizes of an item, for validating answers about it."""
    images = item.images.all() if images is None else images
    return ItemContext(
        metadata=item.metadata,
        image_sizes=[
            (image.width, image.height) if image.width and image.height else None for image in images
        ],
    )


@dataclass(frozen=True)
class AnswerToSave:
    """One cleaned answer of ``annotator`` to a question on item ``item_id``, with its measured time."""

    item_id: int
    annotator: Annotator
    answer: CleanAnswer
    time_spent_ms: int | None = None


@dataclass
class SaveCounts:
    """What ``annotations_save`` did: rows created, changed (each with a revision), left as they were,
    and deleted (answers missing from a whole set)."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0


def annotations_save(
    *,
    study_id: int,
    answers: Sequence[AnswerToSave],
    source: str,
    whole_sets: Collection[tuple[int, int]] = (),
    nothing_stored: bool = False,
) -> SaveCounts:
    """Create or change the annotations of ``answers`` (all in study ``study_id``), in bulk.

    The rule, the same for a task submit, a labeller and an import:

    - A new (item, annotator, question) is created with the answer's value, shown, reason and
      ``time_spent_ms``, and ``source``.
    - An answer equal to the stored one (value, shown and reason) writes nothing: the stored row,
      its ``time_spent_ms`` and ``source`` stand (a double submit or a re-run changes nothing).
    - A changed answer first keeps the stored value, shown and reason as an ``AnnotationRevision``
      whose ``replaced_by`` is the account that gave the new answer, which is always the annotator's
      own (``Annotator.user``): people with an account change only their own answers, and machine
      labellers and imported raters have no account, so theirs is None. The row then takes the new
      value, shown, reason, ``source``, and ``time_spent_ms``: the time of the latest answer, None
      when that answer was not timed (the old time belonged to the old value).
    - ``whole_sets``: (item id, annotator id) pairs whose answers in this batch are everything they
      now say about that item (a task submit): their other stored answers (e.g. to questions hidden
      by ``show_if`` after an edit) are deleted, so the stored set equals the last submission.
    - ``nothing_stored``: the caller read, under a lock every writer of these answers takes (a submit
      locks its assignment row), that no annotation of these (item, annotator) pairs is stored: the
      read of stored rows is skipped and every answer is inserted (a first submit: one query fewer).

    Queries do not grow with the batch beyond ``BULK_BATCH`` rows each: one read of the stored
    rows per chunk of items, then bulk inserts of new rows and revisions, one bulk update and at
    most one delete. Transaction: the caller's, or its own (no savepoint, so a submit keeps its
    query count); the stored rows are read ``SELECT ... FOR UPDATE``, so two writers of the same
    annotation take turns and each edit keeps the value it replaced. Raises ValueError when the
    batch holds one (item, annotator, question) twice (callers refuse repeats with a message first).
    """
    wanted: dict[tuple[int, int, str], AnswerToSave] = {}
    for entry in answers:
        key = (entry.item_id, entry.annotator.pk, entry.answer.question_key)
        if key in wanted:
            raise ValueError(f"answer to {key[2]!r} on item {key[0]} by annotator {key[1]} given twice")
        wanted[key] = entry
    # No savepoint: inside a caller's transaction (a submit) this adds no query; checked before it
    # starts, so a refused batch never marks the caller's transaction for rollback.
    with transaction.atomic(savepoint=False):
        return _save(
            study_id=study_id, wanted=wanted, source=source, whole=set(whole_sets), read=not nothing_stored
        )


def _save(
    *,
    study_id: int,
    wanted: dict[tuple[int, int, str], AnswerToSave],
    source: str,
    whole: set[tuple[int, int]],
    read: bool = True,
) -> SaveCounts:
    counts = SaveCounts()
    item_ids = sorted({item_id for item_id, _a, _q in wanted} | {item_id for item_id, _a in whole})
    annotator_ids = sorted({a for _i, a, _q in wanted} | {a for _i, a in whole})
    question_keys = sorted({q for _i, _a, q in wanted})
    stored: dict[tuple[int, int, str], Annotation] = {}
    for start in range(0, len(item_ids) if read else 0, BULK_BATCH):
        rows = Annotation.objects.select_for_update().filter(
            item_id__in=item_ids[start : start + BULK_BATCH], annotator_id__in=annotator_ids
        )
        if not whole:  # a whole set also needs the answers that are no longer given
            rows = rows.filter(question_key__in=question_keys)
        for annotation in rows:
            stored[(annotation.item_id, annotation.annotator_id, annotation.question_key)] = annotation
    now = timezone.now()
    to_create: list[dict[str, Any]] = []  # new rows, by attribute name (see _insert)
    to_update: list[Annotation] = []
    revisions: list[AnnotationRevision] = []
    for key, entry in wanted.items():
        answer, current = entry.answer, stored.get(key)
        if current is None:
            to_create.append(
                {
                    "study_id": study_id,
                    "item_id": entry.item_id,
                    "annotator_id": entry.annotator.pk,
                    "question_key": answer.question_key,
                    "value": answer.value,
                    "shown": answer.shown,
                    "reason": answer.reason,
                    "time_spent_ms": entry.time_spent_ms,
                    "source": source,
                }
            )
        elif current.snapshot() == {"value": answer.value, "shown": answer.shown, "reason": answer.reason}:
            counts.unchanged += 1
        else:
            revisions.append(
                AnnotationRevision(
                    annotation=current,
                    value=current.value,
                    shown=current.shown,
                    reason=current.reason,
                    replaced_by_id=entry.annotator.user_id,
                )
            )
            current.value, current.shown, current.reason = answer.value, answer.shown, answer.reason
            current.time_spent_ms, current.source, current.updated_at = entry.time_spent_ms, source, now
            to_update.append(current)
    gone = [
        annotation.pk for key, annotation in stored.items() if key not in wanted and (key[0], key[1]) in whole
    ]
    if to_create:
        _insert(to_create)
    if revisions:
        AnnotationRevision.objects.bulk_create(revisions, batch_size=BULK_BATCH)
        Annotation.objects.bulk_update(
            to_update,
            ["value", "shown", "reason", "time_spent_ms", "source", "updated_at"],
            batch_size=BULK_BATCH,
        )
    if gone:
        Annotation.objects.filter(pk__in=gone).delete()
    counts.created, counts.updated, counts.removed = len(to_create), len(to_update), len(gone)
    return counts


def _insert(rows: list[dict[str, Any]]) -> None:
    """Insert new annotations (their attribute values by name): what ``bulk_create`` would write,
    sent with one ``executemany`` per ``BULK_BATCH`` rows. ``bulk_create`` builds a model instance per
    row, compiles a multi-row statement per 90 rows on SQLite (its parameter limit) and prepares every
    value through several layers: a 100,000-answer import spent most of its time there. Here JSON
    fields go through their field's preparation (the backend's JSON adaptation), ``created_at`` and
    ``updated_at`` get one prepared timestamp for the batch, and the other columns (keys, text,
    integers, already of their type) go as they are. Primary keys are not read back."""
    connection = connections[router.db_for_write(Annotation)]
    fields = [column for column in Annotation._meta.concrete_fields if not column.primary_key]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(Annotation._meta.db_table)} ({', '.join(quote(str(f.column)) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    stamp = Annotation._meta.get_field("created_at").get_db_prep_save(timezone.now(), connection)
    columns: list[tuple[str, Any]] = []  # (attribute, JSON field or None), or ("", None) for a timestamp
    for column in fields:
        if column.attname in ("created_at", "updated_at"):
            columns.append(("", None))
        else:
            columns.append((column.attname, column if isinstance(column, models.JSONField) else None))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BULK_BATCH):
            cursor.executemany(
                sql,
                [
                    tuple(
                        stamp
                        if not name
                        else (prep.get_db_prep_save(row[name], connection) if prep is not None else row[name])
                        for name, prep in columns
                    )
                    for row in rows[start : start + BULK_BATCH]
                ],
            )


def machine_annotator_imported_find(*, study: Study, name: str, version: str) -> Annotator | None:
    """The machine annotator an imported file's (name, version) means in ``study``: the study's own,
    else a shared labeller that already answered (or stored features) in this study (a file exported
    from it and imported back); never one that only other studies know. None: none yet."""
    in_study = Exists(Annotation.objects.filter(study=study, annotator=OuterRef("pk"))) | Exists(
        ItemFeature.objects.filter(item__study=study, annotator=OuterRef("pk"))
    )
    return (
        Annotator.objects.filter(kind=Annotator.Kind.MACHINE, name=name, version=version)
        .filter(Q(study=study) | (Q(study__isnull=True) & in_study))
        .order_by(F("study_id").asc(nulls_last=True), "id")
        .first()
    )


def machine_annotator_for_import(*, study: Study, name: str, version: str) -> tuple[Annotator, bool]:
    """``machine_annotator_imported_find``, or a new machine annotator of ``study`` (no
    configuration), and whether it was made. One researcher's machine names neither show in
    another's lists nor block their imports (docs/security.md, "Imported people and labellers stay in
    their study")."""
    found = machine_annotator_imported_find(study=study, name=name, version=version)
    if found is not None:
        return found, False
    return Annotator.objects.get_or_create(
        kind=Annotator.Kind.MACHINE, study=study, name=name, version=version, defaults={"config": {}}
    )
