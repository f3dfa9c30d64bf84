"""Uploaded files (pages and API): the checks an upload passes before it is kept in storage for its
import (``annotations.interchange.sources.upload_keep`` and ``uploads_store``), and how many rows it
holds, counted without parsing it (:func:`upload_rows`: whether it is imported within the request)."""

from __future__ import annotations

import sys
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from typing import IO, cast

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from common.checked_input import text_problem
from common.errors import ValidationFailed
from common.files import IMAGE_SUFFIXES, safe_member_path

ITEM_SUFFIXES = (".zip", ".csv", ".jsonl", ".ndjson")
ANNOTATION_SUFFIXES = (".jsonl", ".ndjson")
STUDY_SUFFIXES = (".jsonl", ".zip")
COCO_SUFFIXES = (".json",)
LABELSTUDIO_SUFFIXES = (".json", ".zip")  # an export, or a zip of it with its config and media
CONFIG_SUFFIXES = (".xml",)
CONTROL_SUFFIXES = (".csv", ".jsonl", ".ndjson")


def upload_check(upload: UploadedFile[bytes], *, suffixes: tuple[str, ...]) -> str:
    """The upload's suffix, once it is one of ``suffixes`` and the upload is within the size limit."""
    suffix = PurePosixPath(upload.name or "").suffix.lower()
    if suffix not in suffixes:
        raise ValidationFailed(
            f"{upload.name}: accepted files are {', '.join(suffixes)}", {"file": "wrong type"}
        )
    limit = settings.WORKBENCH_MAX_UPLOAD_BYTES
    if upload.size is not None and upload.size > limit:
        raise ValidationFailed(
            f"{upload.name}: larger than the {limit // (1024 * 1024)} MB limit", {"file": "too large"}
        )
    return suffix


MANIFEST_SUFFIXES = (".csv", ".jsonl", ".ndjson")
MAX_PATH_CHARS = 255  # an image's original name (ItemImage.original_name) holds 255 characters
MAX_NAME_BYTES = 255  # one file or folder name on Linux file systems (NAME_MAX)


def _name_check(name: str) -> None:
    """Refuse a path no folder can hold (``OSError: File name too long`` was a 500) or no column can
    store, naming the file; null characters and lone surrogates too (``common.checked_input``)."""
    shown = name if len(name) <= 80 else f"{name[:60]}…{name[-12:]}"
    problem = text_problem(name)
    if problem is not None:
        raise ValidationFailed(f"{shown!r}: the file name {problem}", {"images": "bad name"})
    if len(name) > MAX_PATH_CHARS or any(
        len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for part in name.split("/")
    ):
        raise ValidationFailed(
            f"{shown!r}: a file name may have at most {MAX_PATH_CHARS} characters with its folders "
            f"({len(name)} here); rename it",
            {"images": "name too long"},
        )


def uploads_plan(
    uploads: list[UploadedFile[bytes]], *, paths: list[str]
) -> tuple[list[tuple[str, UploadedFile[bytes]]], bool]:
    """Where each of several uploaded files (images, and at most one manifest) goes in the folder an
    item import reads like a folder of images (docs/import-export.md, "Several files at once"), and
    whether they are one manifest alone (read as a manifest file, not a folder).

    ``paths``: each file's path relative to the folder the researcher chose (the browser's
    ``webkitRelativePath``; the upload's own name carries no folder), used when there is one per file.
    A folder common to every path is dropped, so a manifest at the top of the chosen folder is found;
    a lone manifest of any name is read as ``manifest.<suffix>``. Refused: other file types, unsafe
    paths (``..``, absolute), the same path twice, more than the upload size limit in all."""
    if len(paths) == len(uploads):
        names = [path.strip() or (upload.name or "") for path, upload in zip(paths, uploads, strict=True)]
    else:
        names = [upload.name or "" for upload in uploads]
    for name in names:
        _name_check(name)
    relative = [PurePosixPath(safe_member_path(name)) for name in names]
    tops = {path.parts[0] for path in relative}
    if len(tops) == 1 and all(len(path.parts) > 1 for path in relative):
        relative = [PurePosixPath(*path.parts[1:]) for path in relative]
    manifests = [path for path in relative if path.suffix.lower() in MANIFEST_SUFFIXES]
    if len(manifests) > 1:
        raise ValidationFailed(
            f"{manifests[1]}: send one manifest with its images (this batch has {len(manifests)})",
            {"images": "several manifests"},
        )
    for path in relative:
        if path.suffix.lower() not in (*IMAGE_SUFFIXES, *MANIFEST_SUFFIXES):
            raise ValidationFailed(
                f"{path}: accepted files are images ({', '.join(sorted(IMAGE_SUFFIXES))}) and a manifest "
                f"({', '.join(MANIFEST_SUFFIXES)}); send a zip or a manifest on its own",
                {"images": "wrong type"},
            )
    if len(set(relative)) != len(relative):
        repeated = next(path for path in relative if relative.count(path) > 1)
        raise ValidationFailed(f"{repeated}: sent twice", {"images": "repeated"})
    limit = settings.WORKBENCH_MAX_UPLOAD_BYTES
    if sum(upload.size or 0 for upload in uploads) > limit:
        raise ValidationFailed(
            f"these files are larger than the {limit // (1024 * 1024)} MB limit together; send fewer",
            {"images": "too large"},
        )
    plan = [
        (f"manifest{path.suffix.lower()}" if path in manifests else str(path), upload)
        for path, upload in zip(relative, uploads, strict=True)
    ]
    return plan, len(relative) == 1 and bool(manifests)


ROW_SCAN_CHUNK = 1024 * 1024
# What marks one row, by file type: a line of a manifest, an object of a JSON file (a Label Studio
# task, its annotations and results, a COCO image or box: an upper bound of its records), a row of a
# spreadsheet's sheet (an .xlsx is a zip of XML sheets).
_ROW_MARKS = {".csv": b"\n", ".jsonl": b"\n", ".ndjson": b"\n", ".json": b"{", ".xml": b"<row "}
_ZIP_SUFFIXES = (".zip", ".xlsx")


def _count_marks(chunks: Iterable[bytes], mark: bytes, *, stop: int, budget: int) -> tuple[int, int]:
    """How often ``mark`` occurs in ``chunks`` (a mark split between two chunks counted once) and the
    bytes read: reading stops once the count is over ``stop`` or the bytes over ``budget``."""
    found = read = 0
    tail = b""
    for chunk in chunks:
        data = tail + chunk
        found += data.count(mark)
        tail = data[len(data) - len(mark) + 1 :] if len(mark) > 1 else b""
        read += len(chunk)
        if found > stop or read > budget:
            break
    return found, read


def _stream_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while chunk := stream.read(ROW_SCAN_CHUNK):
        yield chunk


def _zip_rows(stream: IO[bytes], *, limit: int, unpacked_limit: int) -> int:
    """The rows of a zip's members (:data:`_ROW_MARKS` by member type; any other member, an image, is
    one row), at most ``unpacked_limit`` bytes unpacked in all: past it the count is ``limit + 1``."""
    rows = unpacked = 0
    with zipfile.ZipFile(stream) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            mark = _ROW_MARKS.get(PurePosixPath(info.filename).suffix.lower())
            if mark is None:
                rows += 1
            else:
                with archive.open(info) as member:
                    found, read = _count_marks(
                        _stream_chunks(member), mark, stop=limit - rows, budget=unpacked_limit - unpacked
                    )
                unpacked += read
                if unpacked > unpacked_limit:
                    return limit + 1
                rows += found
            if rows > limit:
                return rows
    return rows


def upload_rows(upload: UploadedFile[bytes], *, limit: int, unpacked_limit: int) -> int:
    """About how many rows an upload holds, found without parsing it and counted only until there are
    more than ``limit``: the lines of a CSV or JSONL file, the objects (``{``) of a JSON file, the
    rows of a zip's members (manifests, JSON, spreadsheet sheets; an image counts one) or of an
    .xlsx's sheets, read at most ``unpacked_limit`` bytes unpacked (past that: ``limit + 1``, a small
    zip of a large manifest is as long to import as the manifest); any other file (an image) is one
    row. A file named .zip that is no zip (or a broken one) counts 0: its import refuses it."""
    suffix = PurePosixPath(upload.name or "").suffix.lower()
    mark = _ROW_MARKS.get(suffix)
    if mark is None and suffix not in _ZIP_SUFFIXES:
        return 1
    upload.seek(0)
    try:
        if mark is None:
            return _zip_rows(cast("IO[bytes]", upload), limit=limit, unpacked_limit=unpacked_limit)
        return _count_marks(upload.chunks(ROW_SCAN_CHUNK), mark, stop=limit, budget=sys.maxsize)[0]
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError):
        return 0
    finally:
        upload.seek(0)
