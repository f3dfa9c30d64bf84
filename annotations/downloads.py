"""File downloads that a page and the API both answer with (composition point for ``views`` and ``api``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from django.core.files.storage import Storage
from django.http import FileResponse, HttpResponseRedirect, StreamingHttpResponse
from django.http.response import HttpResponseBase

from annotations.interchange.exports import COCO_SUFFIX, CONTENT_TYPES, export_lines
from annotations.models import Study
from annotations.services.stored_files import stored_file_url
from common.file_storage import url_ttl_seconds

# Uploaded images and generated files are served under a sandbox so a crafted file cannot run script in
# our origin.
SANDBOX_CSP = "default-src 'none'; sandbox"


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


def stored_file_response(
    storage: Storage,
    name: str,
    *,
    content_type: str,
    filename: str,
    attachment: bool,
    headers: dict[str, str] | None = None,
) -> HttpResponseBase:
    """A stored file, answered once the caller has checked access: on S3 (``WORKBENCH_S3_SERVE``
    ``redirect``, the default) a 302 to a presigned URL that lives at most five minutes, so the bytes
    go from the bucket to the browser; else the file streamed through Django with ``headers``."""
    disposition = f'{"attachment" if attachment else "inline"}; filename="{filename}"'
    url = stored_file_url(
        storage,
        name,
        content_type=content_type,
        disposition=disposition,
        cache_control=(headers or {}).get("Cache-Control"),
    )
    if url is not None:
        redirect = HttpResponseRedirect(url)
        # The browser may reuse the redirect while the URL is certainly still valid (then it loads
        # the image from its own cache); never a shared cache: the URL is this user's.
        redirect["Cache-Control"] = f"private, max-age={url_ttl_seconds() // 2}"
        return redirect
    response = FileResponse(storage.open(name, "rb"), content_type=content_type)
    response["Content-Disposition"] = disposition
    for key, value in (headers or {}).items():
        response[key] = value
    return response
