"""Uploaded files (pages and API) go to a temporary file before an import reads them."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from common.errors import ValidationFailed

ITEM_SUFFIXES = (".zip", ".csv", ".jsonl", ".ndjson")
ANNOTATION_SUFFIXES = (".jsonl", ".ndjson")
STUDY_SUFFIXES = (".jsonl", ".zip")
COCO_SUFFIXES = (".json",)
LABELSTUDIO_SUFFIXES = (".json", ".zip")  # an export, or a zip of it with its config and media
CONFIG_SUFFIXES = (".xml",)


@contextlib.contextmanager
def upload_to_temp(upload: UploadedFile[bytes], *, suffixes: tuple[str, ...]) -> Iterator[Path]:
    """Write an upload to a temporary file with a checked suffix; removed afterwards."""
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
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"upload{suffix}"
        with path.open("wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
        yield path
