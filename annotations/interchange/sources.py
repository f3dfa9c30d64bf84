"""Where an import's files come from: one file source (``common.files.FileSource``: ``names``,
``read`` and ``checked_image`` of members) for a local folder, a zip archive, an upload kept in the
deployment's storage, and a bucket prefix (docs/import-export.md, "From a bucket").

Every source keeps the checks of ``common.files``: member paths made safe (no ``..``, no absolute
names), a size limit on every read (the object's stated size is not trusted: at most ``limit + 1``
bytes are read), at most ``WORKBENCH_MAX_ARCHIVE_MEMBERS`` members, and the zip checks (links,
decompression bombs, the unpacked total). A bucket address arrives only as a
:class:`~annotations.interchange.bucket_addresses.BucketAddress`, checked for its study and account
against the entries the deployment allows (never the storage's own folders): the server's credentials
reach more than a researcher should.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile

from annotations.interchange.bucket_addresses import BucketAddress
from common.errors import ImportRefused, ValidationFailed
from common.files import FileSource, FolderSource, ZipSource, safe_member_path
from common.object_storage import S3Location, s3_client
from common.uploads import upload_check, uploads_plan

MANIFEST_SUFFIXES = (".csv", ".jsonl", ".ndjson")
UPLOADS_PREFIX = "uploads/"  # where uploads wait in storage for their import job


@dataclass(frozen=True)
class Stored:
    """An upload kept in the deployment's storage (:func:`upload_keep`, :func:`uploads_store`): the
    address every import reads it by, within the request or on a worker."""

    name: str


# What an import reads: a local file or folder (the command line), a checked bucket address
# (``s3://...``), or an upload kept in storage. Every import service takes one and reads it here.
Address = Path | BucketAddress | Stored


def _megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


@dataclass
class Opened:
    """A source, and the lone manifest the address named inside it (None: a folder or an archive,
    whose ``manifest.*`` or images are looked for)."""

    source: FileSource
    manifest: str | None = None
    manifest_limit: int | None = None  # None: WORKBENCH_MAX_UPLOAD_MB (a local file: no limit, as before)


def bucket_address_found(address: BucketAddress) -> BucketAddress:
    """A checked bucket address under which at least one object is stored: refused now, before a
    job is queued, when there is none (or no such bucket). Only an address the study may read
    reaches here, so what this says about existence stays within its own allowed place."""
    from botocore.exceptions import ClientError

    location = address.location
    try:
        listed = s3_client().list_objects_v2(Bucket=location.bucket, Prefix=location.prefix, MaxKeys=1)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise ImportRefused(f"s3://{location.bucket}/: the bucket answered {code or 'an error'}") from exc
    if not listed.get("KeyCount"):
        raise ImportRefused(f"{address.url}: nothing is stored under this prefix")
    return address


class BucketSource(FileSource):
    """The objects under a bucket prefix, read as the files of a folder (``names`` relative to it)."""

    def __init__(self, location: S3Location, client: Any | None = None) -> None:
        prefix = location.prefix
        self.bucket = location.bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else f"{prefix}/"
        self.client = client or s3_client()
        self._names: list[str] | None = None

    @property
    def address(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def names(self) -> list[str]:
        if self._names is None:
            found: list[str] = []
            paginator = self.client.get_paginator("list_objects_v2")
            try:
                for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                    for entry in page.get("Contents", []):
                        relative = entry["Key"][len(self.prefix) :]
                        if not relative or relative.endswith("/"):
                            continue
                        if any(part.startswith(".") for part in PurePosixPath(relative).parts):
                            continue
                        found.append(relative)
                        if len(found) > settings.WORKBENCH_MAX_ARCHIVE_MEMBERS:
                            raise ImportRefused(
                                f"{self.address}: more than {settings.WORKBENCH_MAX_ARCHIVE_MEMBERS} files"
                            )
            except self.client.exceptions.NoSuchBucket as exc:
                raise ImportRefused(f"{self.address}: no such bucket") from exc
            self._names = sorted(found)
        return self._names

    def open_object(self, name: str, *, limit: int) -> Any:
        """The ``get_object`` answer of a member no larger than ``limit`` (by its stated size)."""
        from botocore.exceptions import ClientError

        key = self.prefix + safe_member_path(name)
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise ImportRefused(f"{name}: no such file under {self.address}") from exc
            raise ImportRefused(f"{name}: the bucket answered {code or 'an error'}") from exc
        size = int(answer.get("ContentLength") or 0)
        if size > limit:
            answer["Body"].close()
            raise ImportRefused(f"{name}: {_megabytes(size)} is larger than the {_megabytes(limit)} limit")
        return answer

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        limit = limit or settings.WORKBENCH_MAX_IMAGE_BYTES
        body = self.open_object(name, limit=limit)["Body"]
        try:
            data: bytes = body.read(limit + 1)
        finally:
            body.close()
        if len(data) > limit:
            raise ImportRefused(f"{name}: larger than the {_megabytes(limit)} limit")
        return data


class StorageSource(FileSource):
    """Files kept under a folder of the deployment's storage (an upload of several files waiting
    for its import job): the same reads whether the storage is a disk or a bucket.

    These are the loose files a researcher dropped or chose, so a manifest's path that names none of
    them (the template's ``images/cat.jpg`` beside a dropped ``cat.jpg``) reads the one uploaded file of
    that name (:meth:`member_for`), as Label Studio matches files by name."""

    def __init__(self, folder: str) -> None:
        self.folder = folder if folder.endswith("/") else f"{folder}/"
        self._by_name: dict[str, list[str]] | None = None
        self._members: set[str] = set()
        self._read_as: dict[str, str] = {}  # uploaded file -> the manifest path that first read it

    def member_for(self, name: str) -> str:
        """The uploaded file a manifest's path reads: the file at that path; else the one uploaded file
        with the same name (its last part), wherever it was. Refused, naming both, when two uploaded
        files have that name, or when two different paths of the manifest would read one file (one row's
        image would silently be another's). A name no file has is left to the read's refusal."""
        if self._by_name is None:
            members = self.names()
            self._members = set(members)
            self._by_name = {}
            for member in members:
                self._by_name.setdefault(PurePosixPath(member).name, []).append(member)
        path = safe_member_path(name)
        if path in self._members:
            member = path
        else:
            found = self._by_name.get(PurePosixPath(path).name, [])
            if len(found) > 1:
                raise ImportRefused(
                    f"{name} is not among the uploaded files, and {len(found)} uploaded files are named "
                    f"{PurePosixPath(path).name} ({', '.join(found)}): give the path of the one you mean"
                )
            if not found:
                return path
            member = found[0]
        first = self._read_as.setdefault(member, path)
        if first != path:
            raise ImportRefused(
                f"{first} and {path} would both read the uploaded file {member} (matched by its name): "
                "upload one file for each, or give the same path in both rows"
            )
        return member

    def names(self) -> list[str]:
        found: list[str] = []

        def walk(relative: str) -> None:
            folders, files = default_storage.listdir(self.folder + relative)
            found.extend(relative + name for name in files)
            for sub in folders:
                walk(f"{relative}{sub}/")

        walk("")
        return sorted(name for name in found if not any(p.startswith(".") for p in PurePosixPath(name).parts))

    def read(self, name: str, *, limit: int | None = None) -> bytes:
        limit = limit or settings.WORKBENCH_MAX_IMAGE_BYTES
        stored = self.folder + safe_member_path(name)
        if not default_storage.exists(stored):
            raise ImportRefused(f"{name}: no such file")
        with default_storage.open(stored, "rb") as handle:
            data: bytes = handle.read(limit + 1)
        if len(data) > limit:
            raise ImportRefused(f"{name}: larger than the {_megabytes(limit)} limit")
        return data


class _SpooledZipSource(ZipSource):
    """A zip read from a stream (an object in a bucket or in storage) through a temporary file."""

    def __init__(self, stream: IO[bytes], *, name: str, limit: int) -> None:
        self.spool = tempfile.TemporaryFile()
        copied = 0
        while chunk := stream.read(1024 * 1024):
            copied += len(chunk)
            if copied > limit:
                self.spool.close()
                raise ImportRefused(f"{name}: larger than the {_megabytes(limit)} limit")
            self.spool.write(chunk)
        self.spool.seek(0)
        try:
            super().__init__(self.spool, name=name)
        except BaseException:
            self.spool.close()
            raise

    def close(self) -> None:
        super().close()
        self.spool.close()


def _suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def source_open(address: Address) -> Opened:
    """The source of an import address: a local folder, zip or manifest (``Path``), or a bucket
    address (``s3://bucket/prefix/`` for a folder of objects; ``s3://bucket/prefix/manifest.csv``
    or ``.jsonl`` for a manifest whose files are named relative to its folder; ``.zip`` for an
    archive; a :class:`Stored` upload). Refused with the reason: a bad address, a bucket not
    allowed, nothing at the address."""
    if isinstance(address, Stored):
        return stored_open(address.name)
    if isinstance(address, BucketAddress):
        return _bucket_open(address)
    path = address
    if path.is_dir():
        return Opened(FolderSource(path))
    if _suffix(path.name) == ".zip":
        if not path.is_file():
            raise ImportRefused(f"{path}: no such file")
        return Opened(ZipSource(path))
    if _suffix(path.name) in MANIFEST_SUFFIXES:
        if not path.is_file():
            raise ImportRefused(f"{path}: no such file")
        return Opened(FolderSource(path.parent), manifest=path.name, manifest_limit=sys.maxsize)
    if not path.exists():
        raise ImportRefused(f"{path}: no such file or folder")
    raise ImportRefused(f"{path.name}: give a folder, a .zip, or a .csv/.jsonl manifest")


def _bucket_open(address: BucketAddress) -> Opened:
    location = address.location
    key = location.prefix
    if not key.endswith("/") and _suffix(key) in (*MANIFEST_SUFFIXES, ".zip"):
        parent = str(PurePosixPath(key).parent)
        folder = BucketSource(S3Location(location.bucket, "" if parent == "." else parent))
        name = PurePosixPath(key).name
        if _suffix(key) == ".zip":
            limit = settings.WORKBENCH_MAX_UPLOAD_BYTES
            body = folder.open_object(name, limit=limit)["Body"]
            try:
                return Opened(_SpooledZipSource(body, name=name, limit=limit))
            finally:
                body.close()
        return Opened(folder, manifest=name)
    source = BucketSource(location)
    if not source.names():
        raise ImportRefused(f"{source.address}: no files under this prefix")
    return Opened(source)


def file_read(address: Address, *, limit: int | None = None) -> tuple[str, bytes]:
    """One file's name and bytes: a local file (no limit unless ``limit``: the command line is
    trusted, as before), an object of an allowed bucket (``s3://bucket/path/file.json``) or an
    upload kept in storage (each at most ``limit``, default ``WORKBENCH_MAX_UPLOAD_MB``). Every
    single-file import reads through here."""
    if isinstance(address, Stored):
        folder_name, _, name = address.name.rpartition("/")
        return name, StorageSource(folder_name).read(name, limit=limit or settings.WORKBENCH_MAX_UPLOAD_BYTES)
    if isinstance(address, BucketAddress):
        location = address.location
        if location.prefix.endswith("/"):
            raise ValidationFailed(f"{address.url}: name a file, not a prefix")
        key = PurePosixPath(location.prefix)
        parent = "" if str(key.parent) == "." else str(key.parent)
        folder = BucketSource(S3Location(location.bucket, parent))
        return key.name, folder.read(key.name, limit=limit or settings.WORKBENCH_MAX_UPLOAD_BYTES)
    if not address.is_file():
        raise ImportRefused(f"{address}: no such file")
    if limit is not None and address.stat().st_size > limit:
        raise ImportRefused(f"{address.name}: larger than the {limit // (1024 * 1024)} MB limit")
    return address.name, address.read_bytes()


def archive_open(address: Address) -> FileSource:
    """A zip archive, local, an object of an allowed bucket or an upload kept in storage, read member
    by member."""
    if isinstance(address, Stored):
        if _suffix(address.name) != ".zip":
            raise ValidationFailed(f"{address_name(address)}: not a .zip")
        return stored_open(address.name).source
    if isinstance(address, BucketAddress):
        opened = _bucket_open(address)
        if opened.manifest is not None or not isinstance(opened.source, ZipSource):
            raise ValidationFailed(f"{address.url}: name a .zip")
        return opened.source
    if not address.is_file():
        raise ImportRefused(f"{address}: no such file")
    return ZipSource(address)


def address_name(address: Address) -> str:
    """The file name an address ends with (refusals and study names use it)."""
    if isinstance(address, Stored):
        return PurePosixPath(address.name.rstrip("/")).name
    return address.name


def folder_open(address: Address) -> FileSource:
    """A folder of files to read members from (a Label Studio export's media root): a local folder,
    a bucket prefix or a zip (local, in a bucket, or kept in storage)."""
    if isinstance(address, Path) and not address.is_dir():
        raise ImportRefused(f"{address}: the media root is not a folder")
    opened = source_open(address)
    if opened.manifest is not None:
        raise ValidationFailed(f"{address_name(address)}: give a folder, a bucket prefix or a .zip")
    return opened.source


def stored_open(name: str) -> Opened:
    """The source of an upload kept in storage by :func:`uploads_store`: one file (a zip or a
    manifest) or a folder of files (``name`` ends with ``/``)."""
    if name.endswith("/"):
        return Opened(StorageSource(name))
    if _suffix(name) == ".zip":
        limit = settings.WORKBENCH_MAX_UPLOAD_BYTES
        with default_storage.open(name, "rb") as handle:
            return Opened(_SpooledZipSource(handle, name=PurePosixPath(name).name, limit=limit))
    parent = str(PurePosixPath(name).parent)
    return Opened(StorageSource(parent), manifest=PurePosixPath(name).name)


def uploads_store(
    uploads: list[UploadedFile[bytes]], *, paths: list[str], suffixes: tuple[str, ...], images: bool = False
) -> str:
    """Keep uploaded files in storage under ``uploads/<random>/`` for an import job, after the same
    checks as an import within the request (``common.uploads``); the name :func:`stored_open`
    reads. One file (a zip, a manifest) is stored as itself; several files (images and at most one
    manifest; ``images``: sent as the form's ``images``, even one alone) as a folder, the manifest as
    ``manifest.<suffix>``."""
    folder = f"{UPLOADS_PREFIX}{uuid.uuid4().hex}/"
    if len(uploads) == 1 and not paths and not images:
        suffix = upload_check(uploads[0], suffixes=suffixes)
        return default_storage.save(f"{folder}upload{suffix}", uploads[0])
    plan, lone_manifest = uploads_plan(uploads, paths=paths)
    saved: list[str] = []
    try:
        for relative, upload in plan:
            saved.append(default_storage.save(folder + relative, upload))
    except BaseException:
        for name in saved:
            default_storage.delete(name)
        raise
    return saved[0] if lone_manifest else folder


def upload_keep(upload: UploadedFile[bytes], *, suffixes: tuple[str, ...], stem: str = "upload") -> Stored:
    """Keep one uploaded file in storage, checked (type, size) as an import within the request checks
    it, as ``uploads/<random>/<stem><suffix>``: the name the import's refusals show, as before."""
    suffix = upload_check(upload, suffixes=suffixes)
    return Stored(default_storage.save(f"{UPLOADS_PREFIX}{uuid.uuid4().hex}/{stem}{suffix}", upload))


def stored_delete(name: str) -> None:
    """Delete an upload kept by :func:`uploads_store` (a file, or every file under a folder)."""
    if not name.startswith(UPLOADS_PREFIX):
        return
    if name.endswith("/"):
        for member in StorageSource(name).names():
            default_storage.delete(name + member)
        try:
            default_storage.delete(name.rstrip("/"))  # the emptied folder, on a disk
        except OSError:
            pass
    else:
        default_storage.delete(name)
        try:
            default_storage.delete(str(PurePosixPath(name).parent))  # the emptied folder, on a disk
        except OSError:
            pass
