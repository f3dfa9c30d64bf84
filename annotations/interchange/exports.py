"""Exporting a study: JSONL (lossless, re-importable), CSV (one row per annotation), or a zip
(the JSONL plus the image files). Generators stream row by row in constant memory.

JSONL records, one per line, in this order: ``study`` (protocol and settings), ``annotator``
(each annotator that answered, with their pool and demographic answers in this study; of a
labeller only its kind and model, ``presenters.labeller_summary``), ``item`` (provenance, file
hashes, expert-only, control marks),
``annotation`` (with its revisions), ``consensus`` (stored labels with their rule and support, and
adjudicated decisions with who made them), ``exclusion`` (annotators excluded from the study, with
the history of reinstatements). ``import_study`` rebuilds a study from it (see ``study_import.py``).

The CSV is read in spreadsheets, and its text comes from annotators and imports: a cell that starts
like a formula (``=``, ``+``, ``-``, ``@``, tab, carriage return) gets a leading apostrophe
(``common.spreadsheet.csv_cell``), unless ``raw`` asks for the text as stored (for programs).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Func, Prefetch, Q, TextField
from django.utils import timezone

from annotations.interchange.bucket_addresses import BucketAddress, bucket_address_check
from annotations.interchange.labelstudio.exporter import export_labelstudio
from annotations.interchange.parquet_export import export_parquet
from annotations.models import (
    Annotation,
    AnnotationRevision,
    Annotator,
    AnnotatorExclusion,
    ConsensusLabel,
    ExportJob,
    Item,
    ItemImage,
    Pool,
    Study,
)
from annotations.presenters import labeller_summary
from annotations.selectors.pools import attributes_in_study, pools_in_study
from annotations.selectors.study_options import study_options
from annotations.services.stored_files import export_file_store, item_file_open
from common.errors import ValidationFailed, WorkbenchError
from common.jobs import (
    Heartbeat,
    JobStopped,
    job_enqueue,
    job_finish,
    job_heartbeat,
    job_run,
    jobs_resume_stale,
)
from common.spreadsheet import csv_cell

FORMAT_VERSION = 1
FORMATS = ("jsonl", "csv", "zip", "coco", "labelstudio", "parquet")
FILE_FORMATS = ("zip", "labelstudio", "parquet")  # zips: written to a file (a background job), never streamed
CONTENT_TYPES = {"jsonl": "application/x-ndjson", "csv": "text/csv", "coco": "application/json"}
COCO_SUFFIX = "coco.json"
SUFFIXES = {"coco": COCO_SUFFIX, "labelstudio": "labelstudio.zip", "parquet": "parquet.zip"}
CHUNK = 2000  # rows read from the database at a time
CSV_PIECE_CHARS = 64 * 1024  # the CSV is yielded in pieces of about this size, not row by row
CSV_COLUMNS = [
    "item",
    "item_kind",
    "condition",
    "model",
    "prompt",
    "seed",
    "text",
    "annotator",
    "annotator_kind",
    "annotator_version",
    "pool",
    "question",
    "value",
    "reason",
    "shown",
    "time_spent_ms",
    "source",
    "created_at",
    "updated_at",
]


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n"


def _iso(value: Any) -> str | None:
    """A timestamp as ``datetime.isoformat()`` writes it; a text is the database's (``_IsoTimestamp``),
    which always has the six digits of microseconds that ``isoformat()`` leaves out when they are 0."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.replace(".000000+", "+", 1)
    return str(value.isoformat())


class _IsoTimestamp(Func):
    """A stored (UTC) timestamp as the text ``datetime.isoformat()`` gives for it, less the dropping
    of zero microseconds that ``_iso`` does, written by PostgreSQL (independent of the session's
    DateStyle and TimeZone). Django reads a timestamp through its own time-zone loader, in Python (two
    a row: a sixth of a million-annotation export's CPU); a text comes through psycopg's C loader."""

    template = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
    output_field = TextField()


def _file_path(image: ItemImage) -> str:
    return f"files/{image.sha256}{PurePosixPath(image.original_name).suffix.lower()[:8]}"


def _annotators(study: Study) -> Iterator[Annotator]:
    ids = Annotation.objects.filter(study=study).values("annotator_id").distinct()
    return Annotator.objects.filter(pk__in=ids).order_by("kind", "name", "version").iterator(chunk_size=CHUNK)


def export_jsonl(study: Study) -> Iterator[str]:
    """The study as JSONL lines (see the module docstring)."""
    yield _json_line(
        {
            "type": "study",
            "format_version": FORMAT_VERSION,
            "name": study.name,
            "description": study.description,
            "preset": study.preset,
            "protocol": study.protocol,
            "overlap": study.overlap,
            # The overlap policy and the question it reads (empty: fixed:overlap; docs/overlap.md).
            "overlap_policy": study.overlap_policy,
            "overlap_question": study.overlap_question,
            "lease_minutes": study.lease_minutes,
            "status": study.status,
            "options": study_options(study),
            # Rater pools: the attribute whose values are the pools, and each pool's quota per item.
            "rater_pools": {"attribute": study.rater_pool_attribute, "quotas": study.rater_pool_quotas},
        }
    )
    # Pool and demographic answers as they are in this study; of a labeller, only its kind and model
    # (its configuration may hold API keys and internal addresses: docs/security.md).
    pools = pools_in_study(study.pk)
    attributes = attributes_in_study(study.pk)
    for annotator in _annotators(study):
        yield _json_line(
            {
                "type": "annotator",
                "kind": annotator.kind,
                "name": annotator.name,
                "version": annotator.version,
                "pool": pools.get(annotator.pk, Pool.CROWD),
                "config": labeller_summary(annotator),
                "attributes": attributes.get(annotator.pk, {}),
            }
        )
    items = (
        Item.objects.filter(study=study)
        .order_by("id")
        .prefetch_related(Prefetch("images", queryset=ItemImage.objects.order_by("position")))
    )
    for item in (item for page in _pages(items) for item in page):
        yield _json_line(
            {
                "type": "item",
                "external_id": item.external_id,
                "kind": item.kind,
                "text": item.text,
                "prompt": item.prompt,
                "model": item.model_name,
                "condition": item.condition,
                "seed": item.seed,
                "settings": item.generation_settings,
                "metadata": item.metadata,
                "sha256": item.sha256,
                "is_reference": item.is_reference,
                "expert_only": item.expert_only,
                "note": item.note,
                "control": (
                    {"kind": item.control_kind, "answers": item.control_answers}
                    if item.control_kind
                    else None
                ),
                "files": [
                    {
                        "name": image.original_name,
                        "sha256": image.sha256,
                        "width": image.width,
                        "height": image.height,
                        "content_type": image.content_type,
                        "path": _file_path(image),
                    }
                    for image in item.images.all()
                ],
            }
        )
    annotators = _annotator_names(study)
    for chunk in _annotation_chunks(study, _JSONL_ANNOTATION_COLUMNS):
        revisions = _revisions_of(study, chunk)
        for pk, item, annotator_id, question, value, shown, reason, spent, source, created, updated in chunk:
            name, kind, version = annotators[annotator_id]
            yield _json_line(
                {
                    "type": "annotation",
                    "item": item,
                    "annotator": name,
                    "annotator_kind": kind,
                    "annotator_version": version,
                    "question": question,
                    "value": value,
                    "shown": shown,
                    "reason": reason,
                    "time_spent_ms": spent,
                    "source": source,
                    "created_at": _iso(created),
                    "updated_at": _iso(updated),
                    "revisions": revisions.get(pk, []),
                }
            )
    yield from _consensus_lines(study)
    for exclusion in (
        AnnotatorExclusion.objects.filter(study=study)
        .order_by("excluded_at", "id")
        .select_related("annotator", "excluded_by", "reinstated_by")
    ):
        yield _json_line(
            {
                "type": "exclusion",
                "annotator": exclusion.annotator.name,
                "annotator_kind": exclusion.annotator.kind,
                "annotator_version": exclusion.annotator.version,
                "reason": exclusion.reason,
                "excluded_by": _username(exclusion.excluded_by),
                "excluded_at": _iso(exclusion.excluded_at),
                "reinstated_by": _username(exclusion.reinstated_by),
                "reinstated_at": _iso(exclusion.reinstated_at),
                "reinstate_note": exclusion.reinstate_note,
            }
        )


def _username(user: Any) -> str | None:
    return None if user is None else user.username


def _consensus_lines(study: Study) -> Iterator[str]:
    """Stored consensus labels; their support (annotation ids) as the supporting annotators, which
    a rebuilt study can find again. Each chunk of labels looks up the annotators of the annotations
    it names (of this study), so memory stays flat however many annotations the study has."""
    annotators = _annotator_names(study)
    labels = (
        ConsensusLabel.objects.filter(study=study)
        .order_by("item_id", "question_key")
        .values_list(
            "item_id",
            "item__external_id",
            "question_key",
            "value",
            "resolved",
            "rule",
            "params",
            "support",
            "confidence",
            "reason",
            "n_votes",
            "adjudicated_by__username",
            "note",
            "pending",
        )
    )
    last: tuple[int, str] = (0, "")
    # Pages by (item, question), unique per study: one query each, as for annotations. The redundant
    # ``item_id >= last`` bounds the index range, so a page reads its own labels rather than every
    # label before it (on PostgreSQL the OR alone walked the index from the start: quadratic).
    while chunk := list(
        labels.filter(
            Q(item_id__gt=last[0]) | Q(item_id=last[0], question_key__gt=last[1]), item_id__gte=last[0]
        )[:CHUNK]
    ):
        last = (chunk[-1][0], chunk[-1][2])
        named = {pk for row in chunk for pk in row[7] or [] if isinstance(pk, int)}
        answers = Annotation.objects.filter(study=study)
        who: dict[int, list[str]] = {}
        if connection.vendor == "postgresql":
            # A label's support is answers to its item: the answers of the page's items in one range
            # query (psycopg spent more on the 2,000-parameter id lists than the server did), then any
            # id named that is not among them by its id. SQLite would read that range through its
            # study index (every answer of the study, each page), so it looks the ids up directly.
            page_answers = answers.filter(item_id__gte=chunk[0][0], item_id__lte=chunk[-1][0])
            who = {
                pk: list(annotators[annotator_id])
                for pk, annotator_id in page_answers.values_list("id", "annotator_id")
                if pk in named
            }
        for pk, annotator_id in _in_chunks(answers, named - who.keys(), "id", "annotator_id"):
            who[pk] = list(annotators[annotator_id])
        for (
            _item_id,
            item,
            question,
            value,
            resolved,
            rule,
            params,
            support,
            confidence,
            reason,
            votes,
            by,
            note,
            pending,
        ) in chunk:
            yield _json_line(
                {
                    "type": "consensus",
                    "item": item,
                    "question": question,
                    "value": value,
                    "resolved": resolved,
                    "rule": rule,
                    "params": params,
                    "support": [who[pk] for pk in support if pk in who],
                    "confidence": confidence,
                    "reason": reason,
                    "n_votes": votes,
                    "pending": pending,
                    "adjudicated_by": by,
                    "note": note,
                }
            )


_JSONL_ANNOTATION_COLUMNS = (
    "id",
    "item__external_id",
    "annotator_id",
    "question_key",
    "value",
    "shown",
    "reason",
    "time_spent_ms",
    "source",
    "created_at",
    "updated_at",
)
_CSV_ANNOTATION_COLUMNS = (
    "id",
    "item__external_id",
    "item__kind",
    "item__condition",
    "item__model_name",
    "item__prompt",
    "item__seed",
    "item__text",
    "annotator_id",
    "question_key",
    "value",
    "reason",
    "shown",
    "time_spent_ms",
    "source",
    "created_at",
    "updated_at",
)


class _AnnotatorNames(dict[int, tuple[str, str, str]]):
    """Annotator id -> (name, kind, version); an annotator who first answered after the export began
    is read when first met."""

    def __missing__(self, pk: int) -> tuple[str, str, str]:
        self[pk] = Annotator.objects.values_list("name", "kind", "version").get(pk=pk)
        return self[pk]


def _annotator_names(study: Study) -> _AnnotatorNames:
    """Name, kind and version of every annotator who answered in the study (a handful of rows)."""
    ids = Annotation.objects.filter(study=study).values("annotator_id").distinct()
    rows = Annotator.objects.filter(pk__in=ids).values_list("id", "name", "kind", "version")
    return _AnnotatorNames((pk, (name, kind, version)) for pk, name, kind, version in rows)


def _pages(queryset: Any) -> Iterator[list[Any]]:
    """A queryset's model instances by id, ``CHUNK`` at a time, each page its own query (``id >`` the
    last one seen; prefetches run per page). No database cursor stays open between pages: see
    ``_annotation_chunks``."""
    last = 0
    while page := list(queryset.filter(pk__gt=last).order_by("pk")[:CHUNK]):
        yield page
        last = page[-1].pk


def _annotation_chunks(study: Study, columns: tuple[str, ...]) -> Iterator[list[tuple[Any, ...]]]:
    """The study's annotations by id as tuples of ``columns`` (the first is ``id``), ``CHUNK`` at a
    time, never a list of all and no model instance per row.

    Each chunk is its own query (keyset: ``id >`` the last id seen, an index range scan), not one
    cursor held open while the export is written: on SQLite an open read keeps its snapshot, and the
    export job's heartbeat, written between rows, is then refused ("database is locked") as soon as
    its keep-alive thread has stamped the job from another connection; on PostgreSQL a cursor kept
    outside a transaction is copied whole into the server's temporary storage before its first row.
    """
    annotations = Annotation.objects.filter(study=study).order_by("id")
    if connection.vendor == "postgresql":  # timestamps as their ISO text (``_IsoTimestamp``)
        stamps = {column: f"{column}_iso" for column in columns if column in ("created_at", "updated_at")}
        annotations = annotations.annotate(
            **{alias: _IsoTimestamp(F(column)) for column, alias in stamps.items()}
        )
        columns = tuple(stamps.get(column, column) for column in columns)
    rows = annotations.values_list(*columns)
    last = 0
    while chunk := list(rows.filter(id__gt=last)[:CHUNK]):
        yield chunk
        last = chunk[-1][0]


def _revisions_of(study: Study, chunk: list[tuple[Any, ...]]) -> dict[int, list[dict[str, Any]]]:
    """The earlier versions of a chunk's annotations (rows starting with the annotation id), oldest
    first: one query over the chunk's id range."""
    revisions: dict[int, list[dict[str, Any]]] = {}
    rows = (
        AnnotationRevision.objects.filter(
            annotation__study=study, annotation_id__gte=chunk[0][0], annotation_id__lte=chunk[-1][0]
        )
        .order_by("id")
        .values_list("annotation_id", "value", "shown", "reason", "replaced_at")
    )
    for annotation_id, value, shown, reason, replaced_at in rows:
        revisions.setdefault(annotation_id, []).append(
            {"value": value, "shown": shown, "reason": reason, "replaced_at": _iso(replaced_at)}
        )
    return revisions


def _in_chunks(queryset: Any, ids: set[int], *columns: str) -> Iterator[tuple[Any, ...]]:
    """``queryset.filter(id__in=ids).values_list(*columns)`` in queries of at most CHUNK ids."""
    ordered = sorted(ids)
    for start in range(0, len(ordered), CHUNK):
        yield from queryset.filter(pk__in=ordered[start : start + CHUNK]).values_list(*columns)


def export_csv(study: Study, *, raw: bool = False) -> Iterator[str]:
    """One CSV row per annotation, with the item's provenance; lists and objects as JSON. Text that a
    spreadsheet would run as a formula gets a leading apostrophe, unless ``raw`` (see the module's
    docstring)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    cell: Callable[[Any], Any] = (lambda value: value) if raw else csv_cell

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(CSV_COLUMNS)
    yield flush()
    pools = pools_in_study(study.pk)
    annotators = _annotator_names(study)
    for chunk in _annotation_chunks(study, _CSV_ANNOTATION_COLUMNS):
        for row in chunk:
            (item, item_kind, condition, model, prompt, seed, text, annotator_id, question) = row[1:10]
            value, reason, shown, spent, source, created, updated = row[10:]
            writer.writerow(
                [
                    cell(cell_value)
                    for cell_value in (
                        item,
                        item_kind,
                        condition,
                        model,
                        prompt,
                        seed,
                        text,
                        *annotators[annotator_id],
                        pools.get(annotator_id, Pool.CROWD),
                        question,
                        value if isinstance(value, str | int) else json.dumps(value),
                        reason,
                        json.dumps(shown) if shown is not None else "",
                        spent,
                        source,
                        _iso(created),
                        _iso(updated),
                    )
                ]
            )
            if buffer.tell() >= CSV_PIECE_CHARS:
                yield flush()
    yield flush()


def export_zip(study: Study, out: Path, *, tick: Callable[[], None] = lambda: None) -> None:
    """Write ``study.jsonl`` and every image file (under ``files/<sha256>``) to a zip at ``out``.
    ``tick`` is called for every line and file (a background job's heartbeat)."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("study.jsonl", "w") as handle:
            for line in export_jsonl(study):
                tick()
                handle.write(line.encode("utf-8"))
        written: set[str] = set()
        images = ItemImage.objects.filter(item__study=study).exclude(file="")
        for image in (image for page in _pages(images) for image in page):
            path = _file_path(image)
            if path in written:
                continue
            written.add(path)
            tick()
            with item_file_open(image) as source, archive.open(path, "w") as target:
                while chunk := source.read(1024 * 1024):
                    target.write(chunk)


def coco_categories(study: Study) -> list[dict[str, Any]]:
    """COCO categories: the options that boxes are linked to, in protocol order (ids from 1).

    For a linked question whose options come from each item's metadata (``options_from``), the
    categories are every option any item of the study offers, in order of first appearance.
    """
    protocol = study.protocol_obj
    categories: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for question in protocol.questions:
        if question.kind != "boxes" or not question.linked_question:
            continue
        linked = protocol.question(question.linked_question)
        if linked.options_from is None:
            option_lists = [linked.options]
        else:
            option_lists = [
                linked.options_for(metadata)
                for metadata in Item.objects.filter(study=study)
                .order_by("id")
                .values_list("metadata", flat=True)
                .iterator(chunk_size=CHUNK)
            ]
        for options in option_lists:
            for option in options:
                if (question.key, option.key) in seen:
                    continue
                seen.add((question.key, option.key))
                categories.append(
                    {
                        "id": len(categories) + 1,
                        "name": option.key,
                        "label": option.label,
                        "supercategory": linked.key,
                        "boxes_question": question.key,
                    }
                )
    return categories


def export_coco(study: Study) -> dict[str, Any]:
    """Boxes as a COCO object-detection document.

    ``images``: every image file of the study (``file_name`` as in the zip export, plus the item's
    external id and the image's position in it); ``categories``: see ``coco_categories``;
    ``annotations``: one per box, ``bbox`` = [x, y, width, height] in original image pixels, with the
    annotator's name, kind and version (human and machine boxes alike; filter on ``annotator_kind``);
    ``import_annotations --format coco`` reads it back (``coco_import.py``).
    """
    categories = coco_categories(study)
    category_ids = {(c["boxes_question"], c["name"]): c["id"] for c in categories}
    images: list[dict[str, Any]] = []
    image_ids: dict[tuple[int, int], int] = {}
    for image in (
        ItemImage.objects.filter(item__study=study)
        .exclude(file="")
        .select_related("item")
        .order_by("item_id", "position")
        .iterator(chunk_size=CHUNK)
    ):
        image_ids[(image.item_id, image.position)] = image.pk
        images.append(
            {
                "id": image.pk,
                "file_name": _file_path(image),
                "width": image.width,
                "height": image.height,
                "item": image.item.external_id,
                "position": image.position,
            }
        )
    boxes_questions = {c["boxes_question"] for c in categories}
    annotations: list[dict[str, Any]] = []
    rows = (
        Annotation.objects.filter(study=study, question_key__in=boxes_questions)
        .select_related("annotator")
        .order_by("id")
        .iterator(chunk_size=CHUNK)
    )
    for annotation in rows:
        for box in annotation.value if isinstance(annotation.value, list) else []:
            image_id = image_ids.get((annotation.item_id, int(box.get("image", 0))))
            category_id = category_ids.get((annotation.question_key, box.get("option")))
            if image_id is None or category_id is None:
                continue  # a box on an image that has no file here, or an option no longer offered
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category_id,
                    "bbox": [box["x"], box["y"], box["w"], box["h"]],
                    "area": box["w"] * box["h"],
                    "iscrowd": 0,
                    "annotator": annotation.annotator.name,
                    "annotator_kind": annotation.annotator.kind,
                    "annotator_version": annotation.annotator.version,
                }
            )
    return {
        "info": {
            "description": study.name,
            "version": str(FORMAT_VERSION),
            "year": timezone.now().year,
            "date_created": timezone.now().isoformat(),
            "contributor": "Stereotype Audit Workbench",
        },
        "licenses": [],
        "images": images,
        "categories": categories,
        "annotations": annotations,
    }


def export_lines(study: Study, fmt: str, *, raw: bool = False) -> Iterator[str]:
    """A text export (jsonl, csv, coco) as a stream of strings; ``raw``: CSV text as stored."""
    if fmt == "jsonl":
        return export_jsonl(study)
    if fmt == "csv":
        return export_csv(study, raw=raw)
    if fmt == "coco":
        return iter([json.dumps(export_coco(study), ensure_ascii=False)])
    raise ValueError(f"{fmt} is not a text export format")


def export_filename(study_id: int, fmt: str) -> str:
    """The download name of an export: ``study-3.jsonl``, ``study-3.labelstudio.zip``..."""
    return f"study-{study_id}.{SUFFIXES.get(fmt, fmt)}"


def export_refusal(study: Study, fmt: str) -> str | None:
    """Why ``study`` cannot be exported in ``fmt``, or None: only an unknown format is refused (every
    protocol has a Label Studio config)."""
    del study
    if fmt not in FORMATS:
        return f"format must be one of {', '.join(FORMATS)}"
    return None


def export_to_file(
    study: Study, fmt: str, out: Path, *, raw: bool = False, tick: Callable[[], None] = lambda: None
) -> None:
    """Write an export in ``fmt`` (jsonl, csv, zip, coco, labelstudio, parquet) to ``out``; ``raw``: CSV
    text as stored; ``tick`` is called for every line or file written (a background job's heartbeat)."""
    if fmt == "zip":
        export_zip(study, out, tick=tick)
        return
    if fmt == "labelstudio":
        tick()
        export_labelstudio(study, out)
        return
    if fmt == "parquet":
        tick()
        export_parquet(study, out)
        return
    lines = export_lines(study, fmt, raw=raw)
    with out.open("w", encoding="utf-8", newline="") as handle:
        for line in lines:
            tick()
            handle.write(line)


def export_to_bucket(
    study: Study,
    fmt: str,
    address: str,
    *,
    raw: bool = False,
    user_id: int | None = None,
    tick: Callable[[], None] = lambda: None,
) -> str:
    """Write an export in ``fmt`` under a bucket prefix this study (and account) may write
    (``s3://bucket/prefix/``, :func:`bucket_address_check`) as ``<prefix>/study-<id>.<suffix>``, or the
    next free name (:func:`_bucket_put`); the object's address."""
    checked = bucket_address_check(address, study_id=study.pk, user_id=user_id, write=True)
    folder = Path(settings.DATA_DIR) / "tmp" / "exports" / f"bucket-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    try:
        out = folder / export_filename(study.pk, fmt)
        export_to_file(study, fmt, out, raw=raw, tick=tick)
        return _bucket_put(out, checked, mark=uuid.uuid4().hex)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


EXPORT_MARK = "workbench-export"  # the object metadata naming the export run that wrote it
MAX_BUCKET_PUT = 5 * 1024**3  # one PUT request's limit on S3
_NAME_TRIES = 100


def _bucket_put(path: Path, address: BucketAddress, *, mark: str) -> str:
    """Store a written export file under a checked bucket prefix, never replacing an object this run
    did not write: the first free name of ``study-<id>.<suffix>``, ``study-<id>-2.<suffix>``, ... is
    taken by a conditional PUT (``If-None-Match: *``, so two exports racing for one name cannot both
    have it); an object that carries this run's ``mark`` (a job's run that was taken over) is
    replaced. The object's address."""
    from common.object_storage import s3_client

    if path.stat().st_size > MAX_BUCKET_PUT:
        raise ValidationFailed("the export is larger than 5 GB, more than one request may store in a bucket")
    location = address.location
    prefix = location.prefix if location.prefix.endswith("/") else f"{location.prefix}/"
    stem, dot, suffix = path.name.partition(".")
    client = s3_client()
    for attempt in range(1, _NAME_TRIES + 1):
        key = prefix + (path.name if attempt == 1 else f"{stem}-{attempt}{dot}{suffix}")
        try:
            found = client.head_object(Bucket=location.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
            found = None
        ours = found is not None and found.get("Metadata", {}).get(EXPORT_MARK) == mark
        if found is not None and not ours:
            continue
        condition = {} if ours else {"IfNoneMatch": "*"}
        try:
            with path.open("rb") as body:
                client.put_object(
                    Bucket=location.bucket, Key=key, Body=body, Metadata={EXPORT_MARK: mark}, **condition
                )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in (
                "PreconditionFailed",
                "412",
                "ConditionalRequestConflict",
            ):
                continue  # another writer took this name between the look and the PUT
            raise
        return f"s3://{location.bucket}/{key}"
    raise ValidationFailed(f"{address.url}: {_NAME_TRIES} export names are taken under this prefix")


def export_size(study: Study) -> int:
    return Annotation.objects.filter(study=study).count() + Item.objects.filter(study=study).count()


EXPORT_TASK = "annotations.tasks.run_export_job_task"


@transaction.atomic
def export_job_create(*, study: Study, user: Any, fmt: str, raw: bool = False, target: str = "") -> ExportJob:
    """Queue a background export; the task runs after this transaction commits. ``raw``: CSV text as
    stored (no apostrophes before formula-like text). ``target``: a bucket prefix to write the file
    under instead of the deployment's storage (checked now: the bucket must be allowed)."""
    if target.strip():
        target = bucket_address_check(target, study_id=study.pk, user_id=user.pk, write=True).url
    job = ExportJob.objects.create(study=study, requested_by=user, format=fmt, raw=raw, target=target.strip())
    job_enqueue(task_name=EXPORT_TASK, job_id=job.pk)
    return job


def export_job_file_name(job: ExportJob) -> str:
    """The storage name of a job's file: one per job, the same on every run of it."""
    suffix = SUFFIXES.get(job.format, job.format)
    return f"{ExportJob.file.field.upload_to}study-{job.study_id}-export-{job.pk}.{suffix}"


def export_job_workdir(job: ExportJob) -> Path:
    """Where a run writes the job's file before storing it (``DATA_DIR/tmp/exports/job-<id>``):
    a fixed place, so a run that takes over from a lost worker removes what that one left."""
    return Path(settings.DATA_DIR) / "tmp" / "exports" / f"job-{job.pk}"


def export_job_run(*, job_id: int) -> ExportJob:
    """Claim a pending export job, or take over a stale one (compare-and-set), and write its file.

    The file is written from scratch on every run, in :func:`export_job_workdir` (emptied first:
    what a lost worker left there goes), and stored once, at the end, under
    :func:`export_job_file_name` (a file a lost run stored before it could finish is replaced, not
    kept beside the new one). While the run lasts a thread stamps the heartbeat
    (``job_keepalive``); the writing asks every few seconds whether to stop: a job whose
    cancellation is requested before or while it writes ends cancelled, and a run that was taken
    over stops without touching the job."""
    return job_run(ExportJob, job_id, _export_job_run_claimed)


def _export_job_run_claimed(job: ExportJob, token: str) -> ExportJob:
    """The run of a claimed export job (see ``export_job_run``)."""
    if job_heartbeat(ExportJob, job.pk, token):
        return job_finish(ExportJob, job.pk, status=ExportJob.Status.CANCELLED, token=token)
    folder = export_job_workdir(job)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        out = folder / export_filename(job.study_id, job.format)
        try:
            export_to_file(job.study, job.format, out, raw=job.raw, tick=Heartbeat(ExportJob, job.pk, token))
        except JobStopped:
            return job_finish(ExportJob, job.pk, status=ExportJob.Status.CANCELLED, token=token)
        except (OSError, ValueError) as exc:
            return job_finish(ExportJob, job.pk, status=ExportJob.Status.FAILED, error=str(exc), token=token)
        if job.target:
            try:
                checked = bucket_address_check(
                    job.target, study_id=job.study_id, user_id=job.requested_by_id, write=True
                )
                written = _bucket_put(out, checked, mark=f"job-{job.pk}")
            except (WorkbenchError, OSError, ValueError, BotoCoreError, ClientError) as exc:
                message = exc.message if isinstance(exc, WorkbenchError) else str(exc)
                return job_finish(
                    ExportJob, job.pk, status=ExportJob.Status.FAILED, error=message, token=token
                )
            return job_finish(ExportJob, job.pk, status=ExportJob.Status.DONE, target=written, token=token)
        # A lost run's file under the same name, if it stored one, is replaced.
        stored = export_file_store(name=export_job_file_name(job), path=out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return job_finish(ExportJob, job.pk, status=ExportJob.Status.DONE, file=stored, token=token)


def export_jobs_resume_stale() -> list[int]:
    """Queue again every export job whose worker was lost (``common.jobs.jobs_resume_stale``)."""
    return jobs_resume_stale(ExportJob, task_name=EXPORT_TASK)
