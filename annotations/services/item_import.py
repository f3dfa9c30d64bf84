"""Importing items: a folder of images, a zip, or a CSV/JSONL manifest (with files beside it).

One transaction: every row and file is checked before anything is written, and a bad one stops the
import with its row number and reason. An external id already in the study is reported and skipped
(``duplicates``). Items with distinct ids are always kept, even when their files are byte-identical
to another item's (a safety-filtered model returns the same black frame for many prompts; dropping
those would shift every distribution): the report lists them under ``identical`` (a warning), and
each item stores its own copy of its file, so no stored file is shared. Images whose pixels are all
(nearly) one colour (``common.files.single_colour_of``) are flagged on the image
(``ItemImage.is_blank``, ``blank_colour``) and listed under ``blank``; the items page filters them,
so a researcher can exclude them on purpose. Files are stored under generated names. Manifest
columns: ``external_id``, ``file`` or ``files`` (an image set; in CSV separated by ``;``), or
``text``; ``prompt``, ``model``, ``condition``, ``seed``, ``settings`` (JSON); every other column is
kept as metadata (CSV cells starting with ``[`` or ``{`` are read as JSON). A row of an image
protocol with no file is a reference item (the image was not released): it keeps its name and
provenance and the task page says the image is missing. The metadata a protocol needs
(``annotations.protocols.manifests``: ``options_from`` lists, ``applies_if`` fields) is checked per
row, and a refusal names the missing field and points to the manifest template (docs/import-export.md,
"Missing metadata").
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import Field, JSONField
from django.utils import timezone

from annotations.models import Item, ItemImage, Study
from annotations.protocols.schema import slugify_option
from annotations.selectors.item_counts import forget_eligible_count
from common.checked_input import InputRefused, MalformedJSON, json_loads, text_problem
from common.errors import ImportRefused
from common.files import (
    IMAGE_SUFFIXES,
    CheckedImage,
    FileSource,
    FolderSource,
    MemorySource,
    ZipSource,
    safe_member_path,
)
from common.planner_statistics import statistics_refresh

MANIFEST_NAMES = ("manifest.jsonl", "manifest.csv", "manifest.ndjson")
KNOWN_COLUMNS = {
    "external_id",
    "file",
    "files",
    "text",
    "prompt",
    "model",
    "condition",
    "seed",
    "settings",
    "metadata",
    "kind",
    "original_names",
    "expert_only",
}
# How to give an item's metadata, said in every refusal about a missing field (pages add the template's link).
_MANIFEST_HINT = "give it in a manifest.csv or manifest.jsonl beside the images: see the manifest template"
_TRUE = {"1", "true", "yes"}
_FALSE = {"", "0", "false", "no"}
CONDITION_RE = re.compile(r"^[A-Za-z0-9_.\- ]{1,60}(:[A-Za-z0-9_.\- ]{1,60})?$")
MAX_ROWS = 1_000_000
INSERT_BATCH = 2_000  # rows per multi-row INSERT (fewer when the database's parameter limit says so)
INSERT_BATCH_ARRAYS = 10_000  # rows per INSERT ... SELECT FROM UNNEST(arrays) on PostgreSQL
LOOKUP_CHUNK = 2_000  # ids or hashes per IN (...) lookup: under SQLite's and PostgreSQL's parameter limits


@dataclass
class ItemRow:
    where: str
    external_id: str
    files: list[str]
    text: str = ""
    prompt: str = ""
    model: str = ""
    condition: str = "base"
    seed: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    original_names: list[str] = field(default_factory=list)
    expert_only: bool = False


@dataclass
class ImportReport:
    """What an import did. ``duplicates``: rows skipped (their external id is already in the study).
    ``identical``: items created whose file(s) are byte-identical to an earlier item's (kept; a warning).
    ``blank``: items created with a blank or single-colour image (flagged; a warning)."""

    created: int = 0
    references: int = 0
    duplicates: list[dict[str, str]] = field(default_factory=list)
    identical: list[dict[str, str]] = field(default_factory=list)
    blank: list[dict[str, Any]] = field(default_factory=list)
    item_ids: list[int] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """The report's warnings in words (for pages and command output), with up to 10 examples each."""
        out = []
        if self.identical:
            examples = ", ".join(f"{e['external_id']} = {e['same_as']}" for e in self.identical[:10])
            out.append(
                f"{len(self.identical)} items have the same file(s) as another item; all are kept "
                f"(identical content, e.g. a safety filter's black frame): {examples}"
            )
        if self.blank:
            examples = ", ".join(f"{e['external_id']} ({', '.join(e['colours'])})" for e in self.blank[:10])
            out.append(
                f"{len(self.blank)} items have a blank or single-colour image, flagged on the items page "
                f"(filter 'blank') so you can exclude them on purpose: {examples}"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "references": self.references,
            "duplicates": self.duplicates,
            "identical": self.identical,
            "blank": self.blank,
            "warnings": self.warnings(),
            "item_ids": self.item_ids,
        }


def _csv_cell(value: str, where: str) -> Any:
    """A CSV cell: JSON when it starts with ``[`` or ``{`` and parses (checked: finite numbers, not
    too deep), else the text."""
    value = value.strip()
    if value[:1] in ("[", "{"):
        try:
            return json_loads(value)
        except MalformedJSON:
            return value
        except InputRefused as exc:
            raise ImportRefused(f"{where}: {exc.message}") from exc
    return value


def csv_records(name: str, text: str) -> Iterator[tuple[int, dict[str, str | None]]]:
    """(line number, row) of a CSV text with a header row; a row the csv module cannot read (a cell
    longer than ``csv.field_size_limit()``, a null character) stops with ImportRefused naming it."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        if not reader.fieldnames:
            raise ImportRefused(f"{name}: has no header row")
        for row in reader:
            for key, value in row.items():
                cells = [cell for cell in (key, value) if isinstance(cell, str)]
                problem = next((p for p in map(text_problem, cells) if p is not None), None)
                if problem is not None:
                    raise ImportRefused(f"{name} row {reader.line_num}: column {key!r} {problem}")
            yield reader.line_num, row
    except csv.Error as exc:
        reason = str(exc)
        if "field larger than field limit" in reason:
            reason = f"a cell is longer than {csv.field_size_limit()} characters"
        raise ImportRefused(f"{name} row {reader.line_num + 1}: {reason}") from exc


def _read_manifest(name: str, data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc
    if name.lower().endswith(".csv"):
        for line_num, row in csv_records(name, text):
            where = f"{name} row {line_num}"
            if None in row:
                raise ImportRefused(f"{where}: more cells than header columns")
            yield (
                where,
                {
                    key.strip(): _csv_cell(value, where)
                    for key, value in row.items()
                    if value is not None and value.strip()
                },
            )
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json_loads(line, where=f"{name} line {number}")
            except InputRefused as exc:
                raise ImportRefused(exc.message) from exc
            if not isinstance(record, dict):
                raise ImportRefused(f"{name} line {number}: each line must be a JSON object")
            yield f"{name} line {number}", record


def _row(where: str, record: dict[str, Any], unit: str) -> ItemRow:
    files_raw = record.get("files", record.get("file"))
    if "files" in record and "file" in record:
        raise ImportRefused(f"{where}: give 'file' or 'files', not both")
    if files_raw is None or files_raw == "":
        files: list[str] = []
    elif isinstance(files_raw, list):
        files = [str(name).strip() for name in files_raw if str(name).strip()]
    else:
        files = [part.strip() for part in str(files_raw).split(";") if part.strip()]
    files = [safe_member_path(name) for name in files]
    text = str(record.get("text", "") or "").strip()
    external_id = str(record.get("external_id") or (files[0] if files else text)).strip()
    if not external_id:
        raise ImportRefused(f"{where}: needs an external_id (or a file or text to name it by)")
    if len(external_id) > 255:
        raise ImportRefused(f"{where}: external_id is longer than 255 characters")
    if unit == "text":
        if not text:
            raise ImportRefused(f"{where}: this study judges text items; the row has no 'text'")
        if files:
            raise ImportRefused(f"{where}: this study judges text items; files are not accepted")
    else:
        if unit == "image" and len(files) > 1:
            raise ImportRefused(f"{where}: this study judges single images; use one 'file'")
    condition = str(record.get("condition", "") or "base").strip()
    if not CONDITION_RE.match(condition):
        raise ImportRefused(
            f"{where}: condition {condition!r} is not of the form 'base', 'DIMENSION:GROUP', 'initial'..."
        )
    seed_raw = record.get("seed")
    seed = None
    if seed_raw not in (None, ""):
        try:
            seed = int(str(seed_raw))
        except ValueError as exc:
            raise ImportRefused(f"{where}: seed {seed_raw!r} is not an integer") from exc
        if not -(2**63) <= seed < 2**63:
            raise ImportRefused(f"{where}: seed {seed} does not fit in 64 bits")
    settings_value = record.get("settings") or {}
    if not isinstance(settings_value, dict):
        raise ImportRefused(f"{where}: 'settings' must be a JSON object")
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ImportRefused(f"{where}: 'metadata' must be a JSON object")
    metadata = {**{key: value for key, value in record.items() if key not in KNOWN_COLUMNS}, **metadata}
    expert_raw = (
        str(record.get("expert_only", "") if record.get("expert_only") is not None else "").strip().lower()
    )
    if expert_raw not in _TRUE | _FALSE:
        raise ImportRefused(f"{where}: expert_only must be true or false, got {expert_raw!r}")
    original_names = record.get("original_names") or files
    if not isinstance(original_names, list) or len(original_names) != len(files):
        raise ImportRefused(f"{where}: 'original_names' must list one name per file")
    return ItemRow(
        original_names=[str(name) for name in original_names],
        where=where,
        external_id=external_id,
        files=files,
        text=text,
        prompt=str(record.get("prompt", "") or ""),
        model=str(record.get("model", "") or ""),
        condition=condition,
        seed=seed,
        settings=settings_value,
        metadata=metadata,
        expert_only=expert_raw in _TRUE,
    )


def _check_option_fields(study: Study, row: ItemRow) -> None:
    """The metadata the protocol needs to ask this item its questions (``annotations.protocols.manifests``):
    a field that selects its questions (``applies_if``), and the options of ``options_from`` questions.
    A refusal names the field and says how to give it (a manifest; pages link its template)."""
    protocol = study.protocol_obj
    selectors = sorted({q.applies_if["field"] for q in protocol.questions if q.applies_if})
    missing = [name for name in selectors if row.metadata.get(name) in (None, "")]
    if missing:
        raise ImportRefused(
            f"{row.where}: metadata field '{missing[0]}' is missing: it selects the questions this "
            f"protocol asks ({_MANIFEST_HINT})"
        )
    questions = protocol.questions_for(row.metadata)
    if not questions:
        raise ImportRefused(
            f"{row.where}: no question of this protocol applies to the item: "
            + ", ".join(f"{name} {row.metadata.get(name)!r}" for name in selectors)
            + " is none of the values the protocol asks about (see the manifest template)"
        )
    for question in questions:
        if question.options_from is None:
            continue
        values = row.metadata.get(question.options_from)
        if values in (None, "", []):
            raise ImportRefused(
                f"{row.where}: metadata field '{question.options_from}' is missing: question "
                f"'{question.key}' shows its options, a non-empty list of texts ({_MANIFEST_HINT})"
            )
        if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
            raise ImportRefused(
                f"{row.where}: question '{question.key}' takes its options from '{question.options_from}', "
                'which must be a non-empty list of texts (in CSV, a JSON list such as ["hat", "poncho"])'
            )
        slugs = [slugify_option(value) for value in values]
        if len(set(slugs)) != len(slugs):
            raise ImportRefused(f"{row.where}: '{question.options_from}' names the same option twice")


def _records_and_source(path: Path) -> tuple[list[tuple[str, dict[str, Any]]], FileSource]:
    """Manifest records and where their files are, for a folder, a zip, or a lone manifest file."""
    if path.is_dir():
        source: FileSource = FolderSource(path)
    elif path.suffix.lower() == ".zip":
        source = ZipSource(path)
    elif path.suffix.lower() in (".csv", ".jsonl", ".ndjson"):
        if not path.is_file():
            raise ImportRefused(f"{path}: no such file")
        return list(_read_manifest(path.name, path.read_bytes())), FolderSource(path.parent)
    elif not path.exists():
        raise ImportRefused(f"{path}: no such file or folder")
    else:
        raise ImportRefused(f"{path.name}: give a folder, a .zip, or a .csv/.jsonl manifest")
    names = source.names()
    manifest = next((name for name in MANIFEST_NAMES if name in names), None)
    if manifest is not None:
        data = source.read(manifest, limit=settings.WORKBENCH_MAX_UPLOAD_BYTES)
        return list(_read_manifest(manifest, data)), source
    images = [name for name in names if Path(name).suffix.lower() in IMAGE_SUFFIXES]
    others = [name for name in names if Path(name).suffix.lower() not in IMAGE_SUFFIXES]
    if others:
        source.close()
        raise ImportRefused(f"{others[0]}: is not an image (without a manifest, only images are accepted)")
    return [
        (f"{name} (an image without a manifest)", {"external_id": name, "file": name}) for name in images
    ], source


def items_import(*, study: Study, path: Path) -> ImportReport:
    """Import every item from ``path`` into ``study``; all or nothing. See the module docstring."""
    records, source = _records_and_source(path)
    try:
        return _import_records(study=study, records=records, source=source)
    finally:
        source.close()


def items_import_records(
    *, study: Study, records: list[tuple[str, dict[str, Any]]], source: FileSource | None = None
) -> ImportReport:
    """Import already-parsed manifest records (used by study import and the demo)."""
    return _import_records(study=study, records=records, source=source)


def _import_records(
    *, study: Study, records: list[tuple[str, dict[str, Any]]], source: FileSource | None
) -> ImportReport:
    if len(records) > MAX_ROWS:
        raise ImportRefused(f"more than {MAX_ROWS} rows; split the import")
    if not records:
        raise ImportRefused("nothing to import: no rows and no images found")
    unit = study.protocol_obj.unit
    rows = [_row(where, record, unit) for where, record in records]
    report = ImportReport()
    # Only the ids and hashes this import names are looked up (not every item of the study): a
    # generation job adds its images one item at a time, and must not read the whole study each time.
    existing_ids = set(
        _lookup(
            Item.objects.filter(study=study), "external_id", [row.external_id for row in rows], "external_id"
        )
    )
    seen_ids: dict[str, str] = {}
    candidates: list[tuple[ItemRow, list[CheckedImage], str]] = []
    # Only a protocol with a question whose options come from item metadata has anything to check per row.
    # Only protocols whose questions depend on an item's metadata need the per-row check.
    check_options = any(
        question.options_from is not None or question.applies_if for question in study.protocol_obj.questions
    )
    for row in rows:
        if row.external_id in seen_ids:
            raise ImportRefused(
                f"{row.where}: external_id {row.external_id!r} repeats {seen_ids[row.external_id]}"
            )
        seen_ids[row.external_id] = row.where
        if check_options:
            _check_option_fields(study, row)
        if row.external_id in existing_ids:
            report.duplicates.append({"external_id": row.external_id, "reason": "already in the study"})
            continue
        images: list[CheckedImage] = []
        for name in row.files:
            if source is None:
                raise ImportRefused(f"{row.where}: {name} cannot be found (upload a zip with the files)")
            images.append(source.checked_image(name))
        candidates.append((row, images, _item_digest(images)))
    existing_hashes: dict[str, str] = {}  # file hash -> the first item (by id) that has it
    for digest, external_id in _lookup(
        Item.objects.filter(study=study).order_by("id"),
        "sha256",
        [digest for _r, _i, digest in candidates if digest],
        "sha256",
        "external_id",
    ):
        existing_hashes.setdefault(digest, external_id)
    checked: list[tuple[ItemRow, list[Any], str]] = []
    for row, images, digest in candidates:
        if digest and digest in existing_hashes:
            report.identical.append(
                {
                    "external_id": row.external_id,
                    "same_as": existing_hashes[digest],
                    "reason": f"same file(s) as item {existing_hashes[digest]!r}; kept",
                }
            )
        elif digest:
            existing_hashes[digest] = row.external_id
        colours = [image.single_colour for image in images if image.single_colour]
        if colours:
            report.blank.append(
                {
                    "external_id": row.external_id,
                    "positions": [i for i, image in enumerate(images) if image.single_colour],
                    "colours": colours,
                }
            )
        checked.append((row, images, digest))
    kind = (
        Item.Kind.TEXT
        if unit == "text"
        else (Item.Kind.IMAGE_SET if unit == "image_set" else Item.Kind.IMAGE)
    )
    saved: list[str] = []
    try:
        with transaction.atomic():
            # Multi-row inserts (items, then their images): a large import or a generation job's batch
            # costs a few statements, not two per item; items skip the ORM's per-value work
            # (``_items_insert``: a million reference items in well under a minute, docs/benchmarks.md).
            item_ids = _items_insert(
                study=study,
                rows=(
                    {
                        "external_id": row.external_id,
                        "kind": kind,
                        "text": row.text,
                        "prompt": row.prompt,
                        "model_name": row.model,
                        "condition": row.condition,
                        "seed": row.seed,
                        "generation_settings": row.settings,
                        "metadata": row.metadata,
                        "sha256": digest,
                        "is_reference": unit != "text" and not images,
                        "expert_only": row.expert_only,
                    }
                    for row, images, digest in checked
                ),
            )
            image_records: list[ItemImage] = []
            for item_id, (row, images, _digest) in zip(item_ids, checked, strict=True):
                if not images:
                    continue
                item = Item(pk=item_id, study=study)  # the file name reads the item's study, not the database
                for position, (name, image) in enumerate(zip(row.files, images, strict=True)):
                    record = ItemImage(
                        item=item,
                        position=position,
                        original_name=row.original_names[position][-255:],
                        sha256=image.sha256,
                        width=image.width,
                        height=image.height,
                        content_type=image.content_type,
                        is_blank=bool(image.single_colour),
                        blank_colour=image.single_colour,
                    )
                    assert source is not None
                    record.file.save(Path(name).name, ContentFile(source.read(name)), save=False)
                    if record.file.name:
                        saved.append(record.file.name)
                    image_records.append(record)
            ItemImage.objects.bulk_create(image_records, batch_size=INSERT_BATCH)
    except BaseException:
        for name in saved:
            default_storage.delete(name)
        raise
    report.created = len(item_ids)
    report.references = sum(unit != "text" and not images for _row, images, _digest in checked)
    report.item_ids = item_ids
    statistics_refresh(Item, ItemImage, rows=report.created)  # claims on a fresh study need them at once
    forget_eligible_count(study.pk)  # progress's "left" counts the new items at once
    return report


_ITEM_ROW_FIELDS = {
    "external_id", "kind", "text", "prompt", "model_name", "condition", "seed",
    "generation_settings", "metadata", "sha256", "is_reference", "expert_only",
}  # fmt: skip


def _items_insert(*, study: Study, rows: Iterable[dict[str, Any]]) -> list[int]:
    """Insert items (``rows``: a value for each of ``_ITEM_ROW_FIELDS``, already checked) with
    multi-row ``INSERT ... RETURNING id`` statements (on PostgreSQL ``INSERT ... SELECT * FROM
    UNNEST(one array per column)``, like Django's own ``bulk_create`` there); their ids, in order.
    It stores what ``bulk_create`` would, without its per-value work (a model instance per row and a
    compiler call per cell were 70% of a 100,000-row import's time; docs/benchmarks.md).

    Every other field takes its model default: a callable default (the shuffle key) is called per
    row, any other default (``dict``, ``list`` too), a field without one (``get_default``: "" for
    text) and ``auto_now_add`` are converted once. JSON
    values go through the database's JSON adapter, as the field does; the other values are the text,
    numbers and booleans the row checks made.
    """
    now = timezone.now()
    plain: list[Field[Any, Any]] = []
    json_fields: list[JSONField] = []
    per_row: list[Field[Any, Any]] = []
    constant: list[Field[Any, Any]] = []
    constants: list[Any] = []
    for model_field in Item._meta.concrete_fields:
        if not isinstance(model_field, Field) or model_field.primary_key:
            continue
        if isinstance(model_field, JSONField) and model_field.attname in _ITEM_ROW_FIELDS:
            json_fields.append(model_field)
        elif model_field.attname in _ITEM_ROW_FIELDS:
            plain.append(model_field)
        elif model_field.attname == "study_id":
            constant.append(model_field)
            constants.append(study.pk)
        elif getattr(model_field, "auto_now_add", False) or getattr(model_field, "auto_now", False):
            constant.append(model_field)
            constants.append(model_field.get_db_prep_save(now, connection))
        elif (
            model_field.has_default()
            and callable(model_field.default)
            and model_field.default not in (dict, list)
        ):
            per_row.append(model_field)
        else:
            constant.append(model_field)
            constants.append(model_field.get_db_prep_save(model_field.get_default(), connection))
    fields = [*plain, *json_fields, *per_row, *constant]
    plain_names = [column.attname for column in plain]
    json_names = [(column.attname, column.encoder) for column in json_fields]
    defaults = [(column, column.default) for column in per_row]
    adapt_json = connection.ops.adapt_json_value

    table = connection.ops.quote_name(Item._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(str(column.column)) for column in fields)
    pk = connection.ops.quote_name(str(Item._meta.pk.column))
    if connection.vendor == "postgresql":
        # One array per column (as Django's bulk_create does on PostgreSQL): a short statement that
        # psycopg need not parse for each batch, whatever the number of rows.
        arrays = ", ".join(f"(%s)::{str(column.db_type(connection)).split('(')[0]}[]" for column in fields)
        sql = f"INSERT INTO {table} ({columns}) SELECT * FROM UNNEST({arrays}) RETURNING {pk}"
        batch = INSERT_BATCH_ARRAYS
    else:
        one_row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        batch = max(1, min(INSERT_BATCH, _max_query_params() // len(fields)))
    ids: list[int] = []
    pending: list[list[Any]] = []
    with connection.cursor() as cursor:

        def flush() -> None:
            if not pending:
                return
            if connection.vendor == "postgresql":
                cursor.execute(sql, [list(column) for column in zip(*pending, strict=True)])
            else:
                values = ", ".join([one_row] * len(pending))
                cursor.execute(
                    f"INSERT INTO {table} ({columns}) VALUES {values} RETURNING {pk}",
                    [value for row in pending for value in row],
                )
            ids.extend(row_id for (row_id,) in cursor.fetchall())
            pending.clear()

        for row in rows:
            pending.append(
                [row[name] for name in plain_names]
                + [adapt_json(row[name], encoder) for name, encoder in json_names]
                + [_int_or_prepared(column, default()) for column, default in defaults]
                + constants
            )
            if len(pending) >= batch:
                flush()
        flush()
    return ids


def _int_or_prepared(field: Field[Any, Any], value: Any) -> Any:
    """A callable default's value for the database: a whole number as it is, anything else prepared."""
    return value if type(value) is int else field.get_db_prep_save(value, connection)


def _max_query_params() -> int:
    """How many parameters one statement may carry: SQLite's compiled-in limit (32,766 since 3.32;
    Django assumes 999), PostgreSQL's 65,535."""
    if connection.vendor == "sqlite":
        import sqlite3

        connection.ensure_connection()
        return int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    return connection.features.max_query_params or 65_535


def _lookup(queryset: Any, field: str, values: list[str], *columns: str) -> list[Any]:
    """``queryset.filter(<field>__in=values).values_list(*columns)``, in chunks that stay under the
    databases' limits on query parameters."""
    found: list[Any] = []
    distinct = sorted(set(values))
    for start in range(0, len(distinct), LOOKUP_CHUNK):
        chunk = distinct[start : start + LOOKUP_CHUNK]
        found.extend(queryset.filter(**{f"{field}__in": chunk}).values_list(*columns, flat=len(columns) == 1))
    return found


def _item_digest(images: list[CheckedImage]) -> str:
    if not images:
        return ""
    if len(images) == 1:
        return images[0].sha256
    return hashlib.sha256("\n".join(image.sha256 for image in images).encode()).hexdigest()


def items_add_files(
    *,
    study: Study,
    records: list[dict[str, Any]],
    files: dict[str, bytes],
    checked: dict[str, CheckedImage] | None = None,
) -> ImportReport:
    """``item_add_files`` for several items at once (one transaction; a generation job's batch):
    all are added, or the import is refused and none is. ``checked``: ``image_check`` results the
    caller already has for these bytes (see ``MemorySource``)."""
    return _import_records(
        study=study,
        records=[(f"item {r.get('external_id', '')}", r) for r in records],
        source=MemorySource(files, checked),
    )


def item_add_files(*, study: Study, record: dict[str, Any], files: dict[str, bytes]) -> ImportReport:
    """Add one item whose image files are in memory (a generation job's output), through the same
    checks as any import: image type and size; an id already there is reported and skipped, identical
    or blank images are kept and reported.

    ``record`` is a manifest record naming the files (``file`` or ``files``) by keys of ``files``.
    """
    return _import_records(
        study=study, records=[(f"item {record.get('external_id', '')}", record)], source=MemorySource(files)
    )
