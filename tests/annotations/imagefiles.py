"""Small real image files for import tests."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image


def png_bytes(colour: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (32, 24)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def write_png(
    path: Path, colour: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (32, 24)
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(colour, size))
    return path


def drawn_png_bytes(
    background: tuple[int, int, int] = (250, 250, 250), ink: tuple[int, int, int] = (30, 70, 200)
) -> bytes:
    """A 32x24 PNG with a filled rectangle: an image that is not single-colour."""
    image = Image.new("RGB", (32, 24), background)
    image.paste(ink, (8, 6, 24, 18))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
