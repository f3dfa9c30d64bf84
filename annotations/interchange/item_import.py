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
(``protocols.manifests``: ``options_from`` lists, ``applies_if`` fields) is checked per
row, and a refusal names the missing field and points to the manifest template (docs/import-export.md,
"Missing metadata").
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, JSONField
from django.utils import timezone

from annotations.interchange.records import jsonl_objects
from annotations.interchange.sources import Address, Opened, source_open
from annotations.models import Item, ItemImage, Study
from annotations.selectors.item_counts import forget_eligible_count
from annotations.services.stored_files import item_files_store, stored_files_delete
from common.checked_input import InputRefused, MalformedJSON, json_loads, text_problem
from common.errors import ImportRefused
from common.files import (
    IMAGE_SUFFIXES,
    CheckedImage,
    FileSource,
    MemorySource,
    safe_member_path,
)
from common.planner_statistics import statistics_refresh
from protocols.schema import Protocol, slugify_option

MANIFEST_NAMES = ("manifest.jsonl", "manifest.csv", "manifest.ndjson")


def _no_tick() -> None:
    return None


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
# Conditions already matched by CONDITION_RE (a few per study), each one string shared by its rows.
_CONDITIONS: dict[str, str] = {}
INSERT_BATCH = 2_000  # rows per multi-row INSERT (fewer when the database's parameter limit says so)
LOOKUP_CHUNK = 2_000  # ids or hashes per IN (...) lookup: under SQLite's and PostgreSQL's parameter limits


@dataclass(slots=True)
class ItemRow:
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


class _RowRefused(Exception):
    """A row's problem without the row's name: the caller names the row, so a name is made only for a
    refusal, not for each of a million rows."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


def csv_records(
    name: str, lines: Iterable[str], *, check_cells: bool = True
) -> Iterator[tuple[int, dict[str | None, Any]]]:
    """(line number, row) of a CSV text with a header row (``lines``: read with ``newline=""``), as
    ``csv.DictReader`` gives them (blank rows skipped, extra cells under the key None, missing ones
    None, its line numbers); a row the csv module cannot read (a cell longer than
    ``csv.field_size_limit()``, a null character) stops with ImportRefused naming it.

    ``check_cells``: each cell is checked for what a database cannot store (``text_problem``); a
    caller that knows the whole text has no such character (a cell is a piece of the text, unquoted:
    a clean text has clean cells) leaves it out."""
    reader = csv.reader(lines)
    line_num = 0  # DictReader's line_num: a row's last line, or where a failed read began
    try:
        header = next(reader, None)
        line_num = reader.line_num
        if not header:
            raise ImportRefused(f"{name}: has no header row")
        width = len(header)
        blank = False
        for cells in reader:
            if not blank:
                line_num = reader.line_num
            if not cells:
                blank = True
                continue
            blank = False
            line_num = reader.line_num
            row: dict[str | None, Any] = dict(zip(header, cells, strict=False))
            if len(cells) > width:
                row[None] = cells[width:]
            elif len(cells) < width:
                row.update(dict.fromkeys(header[len(cells) :]))
            if check_cells:
                for key, value in row.items():
                    found = [cell for cell in (key, value) if isinstance(cell, str)]
                    problem = next((p for p in map(text_problem, found) if p is not None), None)
                    if problem is not None:
                        raise ImportRefused(f"{name} row {line_num}: column {key!r} {problem}")
            yield line_num, row
    except csv.Error as exc:
        reason = str(exc)
        if "field larger than field limit" in reason:
            reason = f"a cell is longer than {csv.field_size_limit()} characters"
        raise ImportRefused(f"{name} row {line_num + 1}: {reason}") from exc


def _manifest_records(
    name: str, data: bytes
) -> tuple[Iterator[tuple[int, dict[str, Any]]], Callable[[Any], str]]:
    """A manifest's records, each with its line number, and how a line number is named in refusals."""
    try:
        text = data.decode("utf-8-sig")  # the whole file first: one that is not UTF-8 is refused as such
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc
    if name.lower().endswith(".csv"):
        del text
        # Lines decoded as they are read: a StringIO of the whole text holds four bytes a character.
        # Strict UTF-8 has no lone surrogates, so only a null character makes a cell worth checking.
        lines = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline="")
        return _csv_manifest(name, csv_records(name, lines, check_cells=b"\x00" in data)), (
            lambda line: f"{name} row {line}"
        )
    return _jsonl_manifest(name, text), lambda line: f"{name} line {line}"


def _csv_manifest(
    name: str, rows: Iterable[tuple[int, dict[str | None, Any]]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of a CSV manifest's rows: cells by their column's name, empty ones left out."""
    for line_num, row in rows:
        if None in row:
            raise ImportRefused(f"{name} row {line_num}: more cells than header columns")
        record: dict[str, Any] = {}
        for key, value in row.items():
            if value and (value := value.strip()):
                assert key is not None
                record[key.strip()] = (
                    value if value[0] not in "[{" else _csv_cell(value, f"{name} row {line_num}")
                )
        yield line_num, record


def _jsonl_manifest(name: str, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    return jsonl_objects(text, where=f"{name} ")


def manifest_records_read(name: str, data: bytes) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, record) of a CSV or JSONL manifest: the one record reader of item and control imports."""
    records, where_of = _manifest_records(name, data)
    for key, record in records:
        yield where_of(key), record


def _row(record: dict[str, Any], unit: str) -> ItemRow:
    """A record's item, checked; a refusal (``_RowRefused``) says what is wrong, the caller which row."""
    get = record.get
    files_raw = get("files", get("file"))
    if "files" in record and "file" in record:
        raise _RowRefused("give 'file' or 'files', not both")
    if files_raw is None or files_raw == "":
        files: list[str] = []
    elif isinstance(files_raw, list):
        files = [str(name).strip() for name in files_raw if str(name).strip()]
    else:
        files = [part.strip() for part in str(files_raw).split(";") if part.strip()]
    files = [safe_member_path(name) for name in files]
    text = str(get("text", "") or "").strip()
    external_id = str(get("external_id") or (files[0] if files else text)).strip()
    if not external_id:
        raise _RowRefused("needs an external_id (or a file or text to name it by)")
    if len(external_id) > 255:
        raise _RowRefused("external_id is longer than 255 characters")
    if unit == "text":
        if not text:
            raise _RowRefused("this study judges text items; the row has no 'text'")
        if files:
            raise _RowRefused("this study judges text items; files are not accepted")
    elif unit == "image" and len(files) > 1:
        raise _RowRefused("this study judges single images; use one 'file'")
    condition = str(get("condition", "") or "base").strip()
    if condition not in _CONDITIONS:
        if not CONDITION_RE.match(condition):
            raise _RowRefused(
                f"condition {condition!r} is not of the form 'base', 'DIMENSION:GROUP', 'initial'..."
            )
        if len(_CONDITIONS) < 10_000:
            _CONDITIONS[condition] = condition
    condition = _CONDITIONS.get(condition, condition)  # one string for every row of a condition
    seed_raw = get("seed")
    seed = None
    if seed_raw not in (None, ""):
        try:
            seed = int(str(seed_raw))
        except ValueError as exc:
            raise _RowRefused(f"seed {seed_raw!r} is not an integer") from exc
        if not -(2**63) <= seed < 2**63:
            raise _RowRefused(f"seed {seed} does not fit in 64 bits")
    settings_value = get("settings") or {}
    if not isinstance(settings_value, dict):
        raise _RowRefused("'settings' must be a JSON object")
    metadata = get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _RowRefused("'metadata' must be a JSON object")
    metadata = {**{key: value for key, value in record.items() if key not in KNOWN_COLUMNS}, **metadata}
    expert = get("expert_only")
    expert_raw = "" if expert is None else str(expert).strip().lower()
    if expert_raw not in _TRUE and expert_raw not in _FALSE:
        raise _RowRefused(f"expert_only must be true or false, got {expert_raw!r}")
    original_names = get("original_names") or files
    if not isinstance(original_names, list) or len(original_names) != len(files):
        raise _RowRefused("'original_names' must list one name per file")
    return ItemRow(
        original_names=[str(name) for name in original_names],
        external_id=external_id,
        files=files,
        text=text,
        prompt=str(get("prompt", "") or ""),
        model=str(get("model", "") or ""),
        condition=condition,
        seed=seed,
        settings=settings_value,
        metadata=metadata,
        expert_only=expert_raw in _TRUE,
    )


def _check_option_fields(protocol: Protocol, row: ItemRow) -> None:
    """The metadata the protocol needs to ask this item its questions (``protocols.manifests``):
    a field that selects its questions (``applies_if``), and the options of ``options_from`` questions.
    A refusal (``_RowRefused``) names the field and says how to give it (a manifest; pages link its
    template)."""
    selectors = sorted({q.applies_if["field"] for q in protocol.questions if q.applies_if})
    missing = [name for name in selectors if row.metadata.get(name) in (None, "")]
    if missing:
        raise _RowRefused(
            f"metadata field '{missing[0]}' is missing: it selects the questions this "
            f"protocol asks ({_MANIFEST_HINT})"
        )
    questions = protocol.questions_for(row.metadata)
    if not questions:
        raise _RowRefused(
            "no question of this protocol applies to the item: "
            + ", ".join(f"{name} {row.metadata.get(name)!r}" for name in selectors)
            + " is none of the values the protocol asks about (see the manifest template)"
        )
    for question in questions:
        if question.options_from is None:
            continue
        values = row.metadata.get(question.options_from)
        if values in (None, "", []):
            raise _RowRefused(
                f"metadata field '{question.options_from}' is missing: question "
                f"'{question.key}' shows its options, a non-empty list of texts ({_MANIFEST_HINT})"
            )
        if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
            raise _RowRefused(
                f"question '{question.key}' takes its options from '{question.options_from}', "
                'which must be a non-empty list of texts (in CSV, a JSON list such as ["hat", "poncho"])'
            )
        slugs = [slugify_option(value) for value in values]
        if len(set(slugs)) != len(slugs):
            raise _RowRefused(f"'{question.options_from}' names the same option twice")


def _records_and_source(
    opened: Opened,
) -> tuple[Iterator[tuple[Any, dict[str, Any]]], Callable[[Any], str], FileSource]:
    """Manifest records (read as the import goes), how their keys are named in refusals, and where
    their files are, for a folder, a zip, a bucket prefix, or a lone manifest file
    (``annotations.interchange.sources``)."""
    source = opened.source
    names = [opened.manifest] if opened.manifest else source.names()
    manifest = opened.manifest or next((name for name in MANIFEST_NAMES if name in names), None)
    if manifest is not None:
        try:
            records, where_of = _manifest_records(
                manifest,
                source.read(manifest, limit=opened.manifest_limit or settings.WORKBENCH_MAX_UPLOAD_BYTES),
            )
        except BaseException:
            source.close()
            raise
        return records, where_of, source
    images = [name for name in names if Path(name).suffix.lower() in IMAGE_SUFFIXES]
    others = [name for name in names if Path(name).suffix.lower() not in IMAGE_SUFFIXES]
    if others:
        source.close()
        raise ImportRefused(f"{others[0]}: is not an image (without a manifest, only images are accepted)")
    named = [
        (f"{name} (an image without a manifest)", {"external_id": name, "file": name}) for name in images
    ]
    return iter(named), str, source


def items_import(*, study: Study, address: Address, tick: Callable[[], None] = _no_tick) -> ImportReport:
    """Import every item from ``path`` into ``study``; all or nothing. See the module docstring.
    ``path``: a local folder, zip or manifest, or a bucket address ``s3://bucket/prefix/``
    (``annotations.interchange.sources.source_open``). ``tick`` is called as rows and files go by
    (an import job's heartbeat: raising there stops the import, nothing written)."""
    return items_import_opened(study=study, opened=source_open(address), tick=tick)


def items_import_opened(*, study: Study, opened: Opened, tick: Callable[[], None] = _no_tick) -> ImportReport:
    """Import every item of an opened source (an upload kept in storage, a bucket prefix...)."""
    records, where_of, source = _records_and_source(opened)
    try:
        return _import_records(study=study, records=records, where_of=where_of, source=source, tick=tick)
    finally:
        source.close()


def items_import_records(
    *, study: Study, records: list[tuple[str, dict[str, Any]]], source: FileSource | None = None
) -> ImportReport:
    """Import already-parsed manifest records (used by study import and the demo)."""
    return _import_records(study=study, records=records, where_of=str, source=source)


@dataclass
class _Checked:
    """What the checks of an import keep: the items to insert, each as its ``ITEM_COLUMNS`` values
    (a tuple, not the parsed record: a million rows must fit in memory), the rows with files, and
    the first refusals of each stage."""

    values: list[tuple[Any, ...]] = field(default_factory=list)
    with_files: list[tuple[int, ItemRow, list[CheckedImage], str]] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)  # external id -> the key of its first row
    study_empty: bool | None = None  # asked once a chunk is full: a big import into a new study
    row_refusal: ImportRefused | None = None  # the first row that cannot be read as an item
    check_refusal: ImportRefused | None = None  # the first refusal of the checks after (ids, metadata, files)


def _import_records(
    *,
    study: Study,
    records: Iterable[tuple[Any, dict[str, Any]]],
    where_of: Callable[[Any], str],
    source: FileSource | None,
    tick: Callable[[], None] = _no_tick,
) -> ImportReport:
    """Check every record, store their files, then write the rows in one transaction (see
    ``_records_stage``); on any failure the stored files are deleted."""
    return _records_stage(study=study, records=records, where_of=where_of, source=source, tick=tick).commit()


def items_import_stage(
    *,
    study: Study,
    records: list[tuple[str, dict[str, Any]]],
    source: FileSource | None = None,
    tick: Callable[[], None] = _no_tick,
) -> StagedItems:
    """Check already-parsed manifest records and store their files, outside any transaction; the
    caller inserts the rows in its own transaction (``StagedItems.insert``) and discards the files
    if that fails (the Label Studio import, whose answers are written with the items). ``tick``: an
    import job's heartbeat, as in :func:`items_import`."""
    return _records_stage(study=study, records=records, where_of=str, source=source, tick=tick)


def _records_stage(
    *,
    study: Study,
    records: Iterable[tuple[Any, dict[str, Any]]],
    where_of: Callable[[Any], str],
    source: FileSource | None,
    tick: Callable[[], None] = _no_tick,
) -> StagedItems:
    """Check every record, then store their files (nothing is stored before every row passed, and
    no file is written inside a transaction: SQLite's write lock is held only for the inserts).

    The records are read once, as a stream, each turned into the values its insert needs; the
    refusal is the one the stages would give one after another on the whole file: a record that
    cannot be read (raised as it is met), then too many or no rows, then the first row that is not
    an item, then the first row the later checks refuse (a repeated id, missing metadata, a file)."""
    protocol = study.protocol_obj
    unit = protocol.unit
    # Only protocols whose questions depend on an item's metadata need the per-row check.
    check_options = any(
        question.options_from is not None or question.applies_if for question in protocol.questions
    )
    kind = str(
        (
            Item.Kind.TEXT
            if unit == "text"
            else (Item.Kind.IMAGE_SET if unit == "image_set" else Item.Kind.IMAGE)
        ).value
    )
    dumps_settings = _json_dumps("generation_settings")
    dumps_metadata = _json_dumps("metadata")
    report = ImportReport()
    state = _Checked()

    def check(chunk: list[tuple[Any, ItemRow]]) -> None:
        # Only the ids this import names are looked up (not every item of the study): a generation
        # job adds its images one item at a time, and must not read the whole study each time. A big
        # import first asks whether the study has any item: into a new study, a million ids need no
        # lookup (500 queries of 2,000 ids).
        if state.study_empty is None and len(chunk) >= LOOKUP_CHUNK:
            state.study_empty = not Item.objects.filter(study=study).exists()
        existing_ids = (
            set()
            if state.study_empty
            else set(
                _lookup(
                    Item.objects.filter(study=study),
                    "external_id",
                    [row.external_id for _k, row in chunk],
                    "external_id",
                )
            )
        )
        for key, row in chunk:
            first = state.seen.get(row.external_id)
            if first is not None:
                raise ImportRefused(
                    f"{where_of(key)}: external_id {row.external_id!r} repeats {where_of(first)}"
                )
            state.seen[row.external_id] = key
            if check_options:
                try:
                    _check_option_fields(protocol, row)
                except _RowRefused as exc:
                    raise ImportRefused(f"{where_of(key)}: {exc.reason}") from exc
            if row.external_id in existing_ids:
                report.duplicates.append({"external_id": row.external_id, "reason": "already in the study"})
                continue
            images = _row_images(source, row, where_of, key) if row.files else []
            digest = _item_digest(images)
            if images:
                state.with_files.append((len(state.values), row, images, digest))
            state.values.append(
                (
                    row.external_id,
                    kind,
                    row.text,
                    row.prompt,
                    row.model,
                    row.condition,
                    row.seed,
                    dumps_settings(row.settings),
                    dumps_metadata(row.metadata),
                    digest,
                    unit != "text" and not images,
                    row.expert_only,
                )
            )

    def check_or_keep_refusal(chunk: list[tuple[Any, ItemRow]]) -> None:
        try:
            check(chunk)
        except ImportRefused as exc:
            state.check_refusal = exc
            state.values, state.with_files = [], []

    count = 0
    chunk: list[tuple[Any, ItemRow]] = []
    for key, record in records:  # a record that cannot be read raises here: the first refusal
        count += 1
        tick()
        if state.row_refusal is not None or count > MAX_ROWS:
            continue  # only reading on: an unreadable record further on is still the refusal
        try:
            row = _row(record, unit)
        except _RowRefused as exc:
            state.row_refusal = ImportRefused(f"{where_of(key)}: {exc.reason}")
        except ImportRefused as exc:
            state.row_refusal = exc
        if state.row_refusal is not None:
            chunk, state.values, state.with_files = [], [], []
            continue
        if state.check_refusal is not None:
            continue
        chunk.append((key, row))
        if len(chunk) >= LOOKUP_CHUNK:
            check_or_keep_refusal(chunk)
            chunk = []
    if count > MAX_ROWS:
        raise ImportRefused(f"more than {MAX_ROWS} rows; split the import")
    if not count:
        raise ImportRefused("nothing to import: no rows and no images found")
    if state.row_refusal is not None:
        raise state.row_refusal
    if chunk and state.check_refusal is None:
        check_or_keep_refusal(chunk)
    if state.check_refusal is not None:
        raise state.check_refusal
    del chunk
    _files_report(study, state.with_files, report)
    values, with_files = state.values, state.with_files
    state = _Checked()  # the seen ids are no longer needed
    # The files are stored before the transaction (on S3 each is a network round trip, which must
    # not hold the transaction or SQLite's write lock) and deleted again if the rows are not written.
    names = item_files_store(
        study=study,
        files=(
            (name, _read(source, name, tick))
            for _index, row, _images, _digest in with_files
            for name in row.files
        ),
    )
    return StagedItems(study=study, values=values, with_files=with_files, names=names, report=report)


def _row_images(
    source: FileSource | None, row: ItemRow, where_of: Callable[[Any], str], key: Any
) -> list[CheckedImage]:
    """The row's files, read and checked; its paths become the members read (loose uploaded files are
    also found by their name: ``StorageSource.member_for``), so the stored files are those checked. A
    refusal names the row (``where_of(key)``, made only then)."""
    if source is None:
        raise ImportRefused(f"{where_of(key)}: {row.files[0]} cannot be found (upload a zip with the files)")
    try:
        row.files = [source.member_for(name) for name in row.files]
    except ImportRefused as exc:
        raise ImportRefused(f"{where_of(key)}: {exc.message}") from exc
    return [source.checked_image(name) for name in row.files]


def _read(source: FileSource | None, name: str, tick: Callable[[], None] = _no_tick) -> bytes:
    assert source is not None  # rows with files were refused without a source
    tick()  # an import job's heartbeat: storing a file may take a network round trip
    return source.read(name)


@dataclass
class StagedItems:
    """An import whose rows passed every check and whose files are stored: ``insert`` writes its
    rows (inside the caller's transaction), ``discard`` deletes its files (when the rows are not
    written), ``commit`` does the one or, on any failure or cancellation, the other."""

    study: Study
    values: list[tuple[Any, ...]]
    with_files: list[tuple[int, ItemRow, list[CheckedImage], str]]
    names: list[str]  # the stored files, in the order of ``with_files`` and their rows' files
    report: ImportReport

    def insert(self) -> ImportReport:
        study, report = self.study, self.report
        try:
            # Items without the ORM's per-value work (``_items_insert``: COPY on PostgreSQL, multi-row
            # inserts elsewhere; a million reference items in under a minute, docs/benchmarks.md),
            # then their images in multi-row inserts.
            with transaction.atomic():
                item_ids = _items_insert(study=study, rows=self.values)
                stored = iter(self.names)
                image_records: list[ItemImage] = []
                for index, row, images, _digest in self.with_files:
                    for position, image in enumerate(images):
                        image_records.append(
                            ItemImage(
                                item_id=item_ids[index],
                                position=position,
                                file=next(stored),
                                original_name=row.original_names[position][-255:],
                                sha256=image.sha256,
                                width=image.width,
                                height=image.height,
                                content_type=image.content_type,
                                is_blank=bool(image.single_colour),
                                blank_colour=image.single_colour,
                            )
                        )
                ItemImage.objects.bulk_create(image_records, batch_size=INSERT_BATCH)
        except IntegrityError as exc:  # the ids were looked up before the transaction began
            raise ImportRefused(
                "items with some of these external ids were added to the study while the file was "
                "checked (another import at the same time?); nothing was imported: import the file "
                "again and the items now there are reported as duplicates"
            ) from exc
        report.created = len(item_ids)
        report.references = sum(1 for item in self.values if item[_IS_REFERENCE])
        report.item_ids = item_ids
        statistics_refresh(Item, ItemImage, rows=report.created)  # claims on a fresh study need them at once
        forget_eligible_count(study.pk)  # progress's "left" counts the new items at once
        return report

    def discard(self) -> None:
        stored_files_delete(self.names)
        self.names = []

    def commit(self) -> ImportReport:
        try:
            return self.insert()
        except BaseException:
            self.discard()
            raise


def _files_report(
    study: Study, with_files: list[tuple[int, ItemRow, list[CheckedImage], str]], report: ImportReport
) -> None:
    """The rows with files: which have the same files as an earlier item (of the study or of this
    import) and which have a blank image, into ``report``."""
    existing_hashes: dict[str, str] = {}  # file hash -> the first item (by id) that has it
    for digest, external_id in _lookup(
        Item.objects.filter(study=study).order_by("id"),
        "sha256",
        [digest for _i, _r, _images, digest in with_files if digest],
        "sha256",
        "external_id",
    ):
        existing_hashes.setdefault(digest, external_id)
    for _index, row, images, digest in with_files:
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


def _json_dumps(name: str) -> Callable[[Any], str]:
    """How the JSON field ``name`` of Item writes a value: ``json.dumps`` with the field's encoder (what
    the database backends' JSON adapters send), ``{}`` without the call."""
    model_field = Item._meta.get_field(name)
    assert isinstance(model_field, JSONField)
    encoder = model_field.encoder

    def dumps(value: Any) -> str:
        return "{}" if value == {} and type(value) is dict else json.dumps(value, cls=encoder)

    return dumps


# The values of an item the import gives, in this order (``_import_records`` builds the tuples);
# JSON fields as their JSON text.
ITEM_COLUMNS = (
    "external_id", "kind", "text", "prompt", "model_name", "condition", "seed",
    "generation_settings", "metadata", "sha256", "is_reference", "expert_only",
)  # fmt: skip
_IS_REFERENCE = ITEM_COLUMNS.index("is_reference")


def _items_insert(*, study: Study, rows: Sequence[tuple[Any, ...]]) -> list[int]:
    """Insert items (``rows``: each a tuple of ``ITEM_COLUMNS``' values, already checked, JSON as
    text) and give their ids, in order. On PostgreSQL one ``COPY`` with ids taken from the table's
    sequence beforehand; elsewhere multi-row ``INSERT ... RETURNING id`` statements. It stores what
    ``bulk_create`` would, without its per-value work (a model instance per row and a compiler call
    per cell were 70% of a 100,000-row import's time; docs/benchmarks.md).

    Every other field takes its model default: a callable default (the shuffle key) is called per
    row, any other default (``dict``, ``list`` too), a field without one (``get_default``: "" for
    text) and ``auto_now_add`` are converted once (JSON as its text, as the given JSON values).
    """
    if not rows:
        return []
    now = timezone.now()
    given = [
        model_field for name in ITEM_COLUMNS if isinstance(model_field := Item._meta.get_field(name), Field)
    ]
    per_row: list[Field[Any, Any]] = []
    constant: list[Field[Any, Any]] = []
    constants: list[Any] = []
    for model_field in Item._meta.concrete_fields:
        if (
            not isinstance(model_field, Field)
            or model_field.primary_key
            or model_field.attname in ITEM_COLUMNS
        ):
            continue
        if model_field.attname == "study_id":
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
        elif isinstance(model_field, JSONField):
            constant.append(model_field)
            constants.append(json.dumps(model_field.get_default(), cls=model_field.encoder))
        else:
            constant.append(model_field)
            constants.append(model_field.get_db_prep_save(model_field.get_default(), connection))
    defaults = [(column, column.default) for column in per_row]
    fields = [*given, *per_row, *constant]
    table = connection.ops.quote_name(Item._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(str(column.column)) for column in fields)
    pk = connection.ops.quote_name(str(Item._meta.pk.column))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY is PostgreSQL's bulk load: no statement to parse or plan per batch, and psycopg
            # writes each row in C. Ids come from the table's sequence, as an INSERT would take them.
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s) ORDER BY 1",
                [Item._meta.db_table, str(Item._meta.pk.column), len(rows)],
            )
            ids = [row_id for (row_id,) in cursor.fetchall()]
            with (
                connection.wrap_database_errors,  # a broken constraint is Django's IntegrityError
                cursor.cursor.copy(f"COPY {table} ({pk}, {columns}) FROM STDIN") as copy,
            ):
                write_row = copy.write_row
                for item_id, row in zip(ids, rows, strict=True):
                    write_row(
                        (
                            item_id,
                            *row,
                            *[_int_or_prepared(column, default()) for column, default in defaults],
                            *constants,
                        )
                    )
            return ids
        one_row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        batch = max(1, min(INSERT_BATCH, _max_query_params() // len(fields)))
        ids = []
        for start in range(0, len(rows), batch):
            pending = rows[start : start + batch]
            params: list[Any] = []
            for row in pending:
                params.extend(row)
                params.extend(_int_or_prepared(column, default()) for column, default in defaults)
                params.extend(constants)
            values = ", ".join([one_row] * len(pending))
            cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {values} RETURNING {pk}", params)
            ids.extend(row_id for (row_id,) in cursor.fetchall())
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
        where_of=str,
        source=MemorySource(files, checked),
    )


def item_add_files(*, study: Study, record: dict[str, Any], files: dict[str, bytes]) -> ImportReport:
    """Add one item whose image files are in memory (a generation job's output), through the same
    checks as any import: image type and size; an id already there is reported and skipped, identical
    or blank images are kept and reported.

    ``record`` is a manifest record naming the files (``file`` or ``files``) by keys of ``files``.
    """
    return _import_records(
        study=study,
        records=[(f"item {record.get('external_id', '')}", record)],
        where_of=str,
        source=MemorySource(files),
    )
