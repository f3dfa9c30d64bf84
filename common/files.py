"""Checking uploaded files: images (type, size, decompression bombs) and archives (paths, bombs).

Every refusal names the file. Limits come from settings at call time:
``WORKBENCH_MAX_IMAGE_BYTES``, ``WORKBENCH_MAX_IMAGE_PIXELS``, ``WORKBENCH_MAX_UPLOAD_BYTES``,
``WORKBENCH_MAX_ARCHIVE_MEMBERS``.
"""

from __future__ import annotations

import hashlib
import io
import stat
import warnings
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import IO, cast

from django.conf import settings
from PIL import Image, UnidentifiedImageError

from common.errors import ImportRefused

IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif"}
# An archive member that inflates more than this many times its stored size is treated as a bomb.
MAX_COMPRESSION_RATIO = 200
# An image is "single-colour" (blank) when, in each of its R, G and B channels, the darkest and the
# brightest pixel differ by at most this many levels of 255: a safety filter's all-black frame, a blank
# render or a flat placeholder, with room for compression noise; any drawn shape differs by far more.
SINGLE_COLOUR_TOLERANCE = 8


@dataclass(frozen=True)
class CheckedImage:
    """What ``image_check`` found: the file's hash, size and type; ``single_colour`` is the image's one
    colour as ``#rrggbb`` when every pixel has (nearly) that colour (``single_colour_of``), else ""."""

    name: str
    sha256: str
    width: int
    height: int
    format: str
    content_type: str
    size: int
    single_colour: str = ""


def single_colour_of(image: Image.Image, tolerance: int = SINGLE_COLOUR_TOLERANCE) -> str:
    """``#rrggbb`` (the middle of each channel's range) when every pixel of ``image`` (its first frame, as
    RGB) lies within ``tolerance`` levels per channel, else "". Transparency is ignored (RGB values only)."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    extrema = cast(tuple[tuple[int, int], ...], rgb.getextrema())  # one (low, high) per band of RGB
    if any(high - low > tolerance for low, high in extrema):
        return ""
    return "#" + "".join(f"{(low + high) // 2:02x}" for low, high in extrema)


def _megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def image_check(data: bytes, *, name: str) -> CheckedImage:
    """Refuse anything that is not a PNG/JPEG/WebP/GIF image within the size and pixel limits."""
    max_bytes = settings.WORKBENCH_MAX_IMAGE_BYTES
    max_pixels = settings.WORKBENCH_MAX_IMAGE_PIXELS
    if len(data) > max_bytes:
        raise ImportRefused(
            f"{name}: {_megabytes(len(data))} is larger than the {_megabytes(max_bytes)} limit"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                image_format = image.format or ""
                if width * height > max_pixels:
                    raise ImportRefused(
                        f"{name}: {width}x{height} pixels is over the {max_pixels:,}-pixel limit "
                        "(possible decompression bomb)"
                    )
                if image_format not in IMAGE_FORMATS:
                    raise ImportRefused(
                        f"{name}: {image_format or 'unknown'} images are not accepted "
                        f"(allowed: {', '.join(sorted(IMAGE_FORMATS))})"
                    )
                image.load()
                single_colour = single_colour_of(image)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise ImportRefused(f"{name}: refused as a decompression bomb ({exc})") from exc
    except UnidentifiedImageError as exc:
        raise ImportRefused(f"{name}: is not an image") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImportRefused(f"{name}: the image is damaged ({exc})") from exc
    return CheckedImage(
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        width=width,
        height=height,
        format=image_format,
        content_type=IMAGE_FORMATS[image_format],
        size=len(data),
        single_colour=single_colour,
    )


def safe_member_path(name: str) -> str:
    """A relative, normalised path for an archive member or manifest reference, or a refusal."""
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ImportRefused(f"{name!r} is outside the target folder")
    path = PurePosixPath(name)
    if any(part == ".." for part in path.parts) or not path.parts:
        raise ImportRefused(f"{name!r} is outside the target folder")
    return str(path)


class FileSource:
    """Where an import's files come from: a folder or a zip archive."""

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        """The file's bytes; refused when larger than ``limit`` (default: the image size limit)."""
        raise NotImplementedError

    def names(self) -> list[str]:
        raise NotImplementedError

    def checked_image(self, name: str) -> CheckedImage:
        """The file, read and put through ``image_check``."""
        return image_check(self.read(name), name=name)

    def member_for(self, name: str) -> str:
        """The member a manifest's path ``name`` reads: the path itself here; a source of loose
        uploaded files also finds a file by its name alone (``StorageSource``)."""
        return name

    def close(self) -> None:
        return None


class FolderSource(FileSource):
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _resolve(self, name: str) -> Path:
        path = (self.root / safe_member_path(name)).resolve()
        if not path.is_relative_to(self.root):
            raise ImportRefused(f"{name!r} is outside the target folder")
        return path

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        path = self._resolve(name)
        if not path.is_file():
            raise ImportRefused(f"{name}: no such file")
        size = path.stat().st_size
        limit = limit or settings.WORKBENCH_MAX_IMAGE_BYTES
        if size > limit:
            raise ImportRefused(f"{name}: {_megabytes(size)} is larger than the {_megabytes(limit)} limit")
        return path.read_bytes()

    def names(self) -> list[str]:
        found = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(self.root).parts):
                found.append(path.relative_to(self.root).as_posix())
        return found


class MemorySource(FileSource):
    """Files held in memory (images a generation job just made), read through the same checks.

    ``checked`` may carry ``image_check``'s result for some of the files, computed on these very
    bytes elsewhere (a generation job checks each PNG in the thread that encodes it); those are not
    decoded a second time.
    """

    def __init__(self, files: dict[str, bytes], checked: dict[str, CheckedImage] | None = None) -> None:
        self.files = {safe_member_path(name): data for name, data in files.items()}
        self.checked = {safe_member_path(name): result for name, result in (checked or {}).items()}

    def checked_image(self, name: str) -> CheckedImage:
        result = self.checked.get(safe_member_path(name))
        if result is None or result.sha256 != hashlib.sha256(self.read(name)).hexdigest():
            return super().checked_image(name)
        return replace(result, name=name)

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        data = self.files.get(safe_member_path(name))
        if data is None:
            raise ImportRefused(f"{name}: no such file")
        limit = limit or settings.WORKBENCH_MAX_IMAGE_BYTES
        if len(data) > limit:
            raise ImportRefused(
                f"{name}: {_megabytes(len(data))} is larger than the {_megabytes(limit)} limit"
            )
        return data

    def names(self) -> list[str]:
        return sorted(self.files)


class ZipSource(FileSource):
    """A zip archive read member by member, never extracted; refuses unsafe members by name."""

    def __init__(self, path: Path | IO[bytes], *, name: str | None = None) -> None:
        """``path``: a zip file, or a seekable file object (an upload in storage) named ``name``."""
        label = name or (path.name if isinstance(path, Path) else "archive")
        try:
            self.archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise ImportRefused(f"{label}: is not a valid zip archive") from exc
        infos = [info for info in self.archive.infolist() if not info.is_dir()]
        if len(infos) > settings.WORKBENCH_MAX_ARCHIVE_MEMBERS:
            raise ImportRefused(f"{label}: more than {settings.WORKBENCH_MAX_ARCHIVE_MEMBERS} files")
        self.members: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in infos:
            name = safe_member_path(info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ImportRefused(f"{info.filename!r} is a symbolic link; links are not accepted")
            if (
                info.compress_size
                and info.file_size / info.compress_size > MAX_COMPRESSION_RATIO
                and info.file_size > 1024 * 1024
            ):
                raise ImportRefused(
                    f"{info.filename!r} inflates {info.file_size / info.compress_size:.0f} "
                    "times its size (possible zip bomb)"
                )
            total += info.file_size
            self.members[name] = info
        if total > settings.WORKBENCH_MAX_UPLOAD_BYTES:
            raise ImportRefused(
                f"{label}: unpacks to {_megabytes(total)}, over the "
                f"{_megabytes(settings.WORKBENCH_MAX_UPLOAD_BYTES)} limit"
            )

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        info = self.members.get(safe_member_path(name))
        if info is None:
            raise ImportRefused(f"{name}: not in the archive")
        limit = limit or settings.WORKBENCH_MAX_IMAGE_BYTES
        with self.archive.open(info) as handle:
            data = handle.read(limit + 1)  # the header's size is not trusted
        if len(data) > limit:
            raise ImportRefused(f"{name}: larger than the {_megabytes(limit)} limit")
        return data

    def names(self) -> list[str]:
        return sorted(
            name
            for name in self.members
            if not any(p.startswith(".") or p == "__MACOSX" for p in PurePosixPath(name).parts)
        )

    def close(self) -> None:
        self.archive.close()
