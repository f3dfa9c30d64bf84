"""File downloads that a page and the API both answer with (composition point for ``views`` and ``api``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from django.http import StreamingHttpResponse

from annotations.interchange.exports import COCO_SUFFIX, CONTENT_TYPES, export_lines
from annotations.models import Study


def raw_requested(value: str | None) -> bool:
    """``?raw=1`` (or ``true``): a CSV export with text as stored, for programs (docs/import-export.md)."""
    return (value or "").strip().lower() in ("1", "true", "yes")


def streaming_export(study: Study, fmt: str, *, raw: bool = False) -> StreamingHttpResponse:
    content_type = CONTENT_TYPES[fmt]
    lines = export_lines(study, fmt, raw=raw)
    response = StreamingHttpResponse(grouped(lines), content_type=f"{content_type}; charset=utf-8")
    suffix = COCO_SUFFIX if fmt == "coco" else fmt
    response["Content-Disposition"] = f'attachment; filename="study-{study.pk}.{suffix}"'
    return response


PIECE_CHARS = 64 * 1024


def grouped(lines: Iterable[str], size: int = PIECE_CHARS) -> Iterator[bytes]:
    """``lines`` as UTF-8 pieces of about ``size`` characters: a million-line export goes to the
    client in some thousand writes instead of a million, still without holding more than a piece."""
    piece: list[str] = []
    length = 0
    for line in lines:
        piece.append(line)
        length += len(line)
        if length >= size:
            yield "".join(piece).encode("utf-8")
            piece, length = [], 0
    if piece:
        yield "".join(piece).encode("utf-8")
