"""File downloads that a page and the API both answer with (composition point for ``views`` and ``api``)."""

from __future__ import annotations

from django.http import StreamingHttpResponse

from annotations.models import Study
from annotations.services.exports import COCO_SUFFIX, CONTENT_TYPES, export_lines


def raw_requested(value: str | None) -> bool:
    """``?raw=1`` (or ``true``): a CSV export with text as stored, for programs (docs/import-export.md)."""
    return (value or "").strip().lower() in ("1", "true", "yes")


def streaming_export(study: Study, fmt: str, *, raw: bool = False) -> StreamingHttpResponse:
    content_type = CONTENT_TYPES[fmt]
    lines = export_lines(study, fmt, raw=raw)
    response = StreamingHttpResponse(lines, content_type=f"{content_type}; charset=utf-8")
    suffix = COCO_SUFFIX if fmt == "coco" else fmt
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}.{suffix}"'
    return response
