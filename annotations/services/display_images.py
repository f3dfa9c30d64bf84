"""Resized display versions of item images (the task page shows these; boxes use original pixels).

A display version is at most ``DISPLAY_SIZE`` pixels on its longer side, generated once with
Pillow and kept in the default storage under ``display/<sha256>-<size>.<ext>`` (item files never
change, so their hash names the version). Images already small enough are served as they are.
"""

from __future__ import annotations

import io

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from PIL import Image, ImageOps, UnidentifiedImageError

from annotations.models import ItemImage
from common.errors import NotFoundError

DISPLAY_SIZE = 1024


def display_image_name(image: ItemImage, size: int = DISPLAY_SIZE) -> str:
    """The storage name of an image's display version (generated on first use)."""
    stored_name = image.file.name
    if not stored_name:  # what ``not image.file`` tests
        raise NotFoundError("this image has no file")
    if image.width and image.height and max(image.width, image.height) <= size:
        return stored_name
    key = image.sha256 or f"image{image.pk}"
    lossless = (image.content_type or "").split("/")[-1] in (
        "png",
        "gif",
        "webp",
    ) or stored_name.lower().endswith((".png", ".gif", ".webp"))
    name = f"display/{key}-{size}.{'png' if lossless else 'jpg'}"
    if default_storage.exists(name):
        return name
    with image.file.open("rb") as handle:
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
    # Two requests may race to create it; both write the same bytes and either copy will do.
    return default_storage.save(name, ContentFile(buffer.getvalue()))
