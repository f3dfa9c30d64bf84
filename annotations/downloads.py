"""File downloads that a page and the API both answer with (composition point for ``views`` and ``api``)."""

from __future__ import annotations

from django.http import StreamingHttpResponse

from annotations.models import Study
from annotations.services.exports import COCO_SUFFIX, CONTENT_TYPES, export_lines


def streaming_export(study: Study, fmt: str) -> StreamingHttpResponse:
    content_type = CONTENT_TYPES[fmt]
    lines = export_lines(study, fmt)
    response = StreamingHttpResponse(lines, content_type=f"{content_type}; charset=utf-8")
    suffix = COCO_SUFFIX if fmt == "coco" else fmt
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}.{suffix}"'
    return response
