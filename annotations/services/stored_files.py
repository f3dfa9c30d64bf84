"""The files the workbench keeps: item images, their display versions, export and report files. The one
module that saves, opens, deletes and hands out URLs for them, always through the field's storage
(``common.file_storage``: the filesystem, or an S3 bucket).

Files are written outside database transactions: an import stores its files first
(:func:`item_files_store`), then writes its rows in one transaction, and deletes what it stored
(:func:`stored_files_delete`) when anything fails or is cancelled, so no object is left that no row
names. A display version (at most ``DISPLAY_SIZE`` pixels on its longer side, made once with Pillow
under ``display/<sha256>-<size>.<ext>``) is named on its image row (``ItemImage.display_name``), so
serving it asks the storage nothing.
"""

from __future__ import annotations

import io
import mimetypes
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from PIL import Image, ImageOps, UnidentifiedImageError

from annotations.models import ExportJob, Item, ItemImage, Study
from common.errors import NotFoundError
from common.file_storage import serve_by_redirect, storage_is_s3, url_ttl_seconds

DISPLAY_SIZE = 1024
# An item image may stay in the browser's own cache (never a shared one) ten minutes: long enough
# for the task page's prefetch of the next item, short enough that a shared computer does not keep
# an annotator's images for the next person (never a year, never ``immutable``).
IMAGE_CACHE_MAX_AGE = 600
IMAGE_CACHE_CONTROL = f"private, max-age={IMAGE_CACHE_MAX_AGE}"

# The names item files were stored under inside each open ``item_files_kept_on_success`` block.
_watching: ContextVar[tuple[list[str], ...]] = ContextVar("stored_files_watching", default=())


def item_storage() -> Storage:
    """Where item images and their display versions live (``ItemImage.file``'s storage)."""
    return ItemImage.file.field.storage


def export_storage() -> Storage:
    return ExportJob.file.field.storage


def item_file_store(*, study: Study, original_name: str, data: bytes) -> str:
    """Store one item image's bytes under a generated name (``items/<study>/<uuid><suffix>``: a
    user's file name never reaches the storage) and return that name. Call it outside a
    transaction; the caller deletes the name again if its rows are not written."""
    field = ItemImage.file.field
    name = field.generate_filename(ItemImage(item=Item(study=study)), Path(original_name).name)
    stored = item_storage().save(name, ContentFile(data), max_length=field.max_length)
    for names in _watching.get():
        names.append(stored)
    return stored


@contextmanager
def item_files_kept_on_success() -> Iterator[None]:
    """Delete every item file stored inside the block if the block raises (or is cancelled): for
    an import whose files are stored inside its own transaction (the study import), so a failure
    after them still leaves no object that no row names."""
    names: list[str] = []
    token = _watching.set((*_watching.get(), names))
    try:
        yield
    except BaseException:
        stored_files_delete(names)
        raise
    finally:
        _watching.reset(token)


def item_files_store(*, study: Study, files: Iterable[tuple[str, bytes]]) -> list[str]:
    """Store several item images in order; if one fails (or the run is cancelled) those already
    stored are deleted before the error goes on."""
    names: list[str] = []
    try:
        for original_name, data in files:
            names.append(item_file_store(study=study, original_name=original_name, data=data))
    except BaseException:
        stored_files_delete(names)
        raise
    return names


def stored_files_delete(names: Iterable[str], storage: Storage | None = None) -> None:
    """Delete stored files by name (a failed import's, a replaced export's); a missing one is fine."""
    target = storage if storage is not None else item_storage()
    for name in names:
        if name:
            target.delete(name)


def item_file_open(image: ItemImage) -> IO[Any]:
    """An item image's bytes, read from the storage (labellers, exports, refinement)."""
    if not image.file.name:
        raise NotFoundError("this image has no file")
    return item_storage().open(image.file.name, "rb")


def display_image_name(image: ItemImage, size: int = DISPLAY_SIZE) -> str:
    """The storage name of an image's display version: the file itself when it is small enough,
    else the version named on the row, made (and named there) on first use."""
    stored_name = image.file.name
    if not stored_name:  # what ``not image.file`` tests
        raise NotFoundError("this image has no file")
    if image.width and image.height and max(image.width, image.height) <= size:
        return stored_name
    if image.display_name:
        return image.display_name
    key = image.sha256 or f"image{image.pk}"
    lossless = (image.content_type or "").split("/")[-1] in (
        "png",
        "gif",
        "webp",
    ) or stored_name.lower().endswith((".png", ".gif", ".webp"))
    name = f"display/{key}-{size}.{'png' if lossless else 'jpg'}"
    storage = item_storage()
    # Once per image: a version made for another image with the same bytes (or before display
    # names were kept on the row) is used as it is.
    if not storage.exists(name):
        name = storage.save(name, ContentFile(_display_bytes(image, size, lossless=lossless)))
    # Two requests may race to make it: the first name kept on the row wins.
    if ItemImage.objects.filter(pk=image.pk, display_name="").update(display_name=name) == 0:
        kept = ItemImage.objects.filter(pk=image.pk).values_list("display_name", flat=True).first()
        if kept and kept != name and not name.startswith(f"display/{key}-{size}."):
            storage.delete(name)
        name = kept or name
    image.display_name = name
    return name


def _display_bytes(image: ItemImage, size: int, *, lossless: bool) -> bytes:
    with item_file_open(image) as handle:
        try:
            source: Image.Image = Image.open(handle)
            source.load()
        except (UnidentifiedImageError, OSError) as exc:
            raise NotFoundError("the image file cannot be read") from exc
    source = ImageOps.exif_transpose(source)
    source.thumbnail((size, size), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    if lossless:
        source.save(buffer, format="PNG", optimize=True)
    else:
        source.convert("RGB").save(buffer, format="JPEG", quality=85, optimize=True)
    return buffer.getvalue()


def export_file_store(*, name: str, path: Path) -> str:
    """Store a finished export file under ``name``, replacing what a lost run stored there."""
    storage = export_storage()
    storage.delete(name)
    with path.open("rb") as handle:
        return storage.save(name, File(handle))


def file_bytes_store(*, storage: Storage, name: str, data: bytes) -> str:
    """Store finished bytes under ``name`` in ``storage`` (another app's file field's: a report job's),
    replacing what a lost run stored there; the name stored under."""
    storage.delete(name)
    return storage.save(name, ContentFile(data))


def stored_file_url(
    storage: Storage, name: str, *, content_type: str, disposition: str, cache_control: str | None = None
) -> str | None:
    """A presigned GET URL for ``name`` that lives ``WORKBENCH_S3_URL_TTL_SECONDS`` (at most five
    minutes) and makes the bucket answer with ``content_type``, ``disposition`` (and
    ``cache_control``, when given); None when files
    are streamed through Django instead (the filesystem, or ``WORKBENCH_S3_SERVE=proxy``). Only
    call it after the access check: whoever holds the URL can read the file until it expires."""
    if not serve_by_redirect() or not storage_is_s3(storage):
        return None
    parameters = {"ResponseContentType": content_type, "ResponseContentDisposition": disposition}
    if cache_control:
        parameters["ResponseCacheControl"] = cache_control
    s3: Any = storage  # django-storages' S3Storage.url takes parameters and a lifetime
    url: str = s3.url(name, parameters=parameters, expire=url_ttl_seconds())
    return url


@dataclass(frozen=True)
class ServedImage:
    """How an item image is answered: the stored name, its content type and the download name."""

    name: str
    content_type: str
    filename: str

    @property
    def disposition(self) -> str:
        return f'inline; filename="{self.filename}"'


def item_image_served(image: ItemImage, *, display: bool = False) -> ServedImage:
    """The original file of an image (``display``: its display version, made on first use)."""
    original = image.file.name
    if not original:  # what ``not image.file`` tests
        raise NotFoundError("this item has no image there")
    name = display_image_name(image) if display else original
    content_type = (image.content_type if name == original else None) or mimetypes.guess_type(name)[0]
    suffix = PurePosixPath(name).suffix
    return ServedImage(
        name=name,
        content_type=content_type or "application/octet-stream",
        filename=f"item-{image.item_id}-{image.position}{'-display' if display else ''}{suffix}",
    )


def item_image_direct_url(image: ItemImage) -> str | None:
    """The presigned URL of an image's original file that the image page would redirect to, for an
    answer that has already checked access (the claim and task API: the annotator's own task), so a
    client loads the image from the bucket without another request to a web node; None where files
    are streamed through Django (the filesystem, ``WORKBENCH_S3_SERVE=proxy``) or there is no file."""
    if not image.file.name or not serve_by_redirect():
        return None
    served = item_image_served(image)
    return stored_file_url(
        image.file.storage,
        served.name,
        content_type=served.content_type,
        disposition=served.disposition,
        cache_control=IMAGE_CACHE_CONTROL,
    )
