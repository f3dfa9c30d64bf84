"""Which ``s3://`` addresses an import may read and an export may write (docs/import-export.md,
"From a bucket"; docs/security.md, "Buckets by tenant").

A bucket address reaches files with the server's credentials, which can read and write every
object of the workbench's own bucket. So an address is used only when it lies under an entry a
deployment lists explicitly: ``WORKBENCH_S3_IMPORT_BUCKETS`` for reading, ``WORKBENCH_S3_EXPORT_BUCKETS``
for writing (default: the import entries). Nothing is allowed by default. An entry is ``bucket``
(any prefix of it) or ``bucket/prefix/`` (that prefix and below), and its prefix may name the study
(``{study}``: the study's id) or the requesting account (``{user}``: the account's id), so one lab's
folder is not another's: ``lab-exchange/studies/{study}/`` lets study 7 read and write
``s3://lab-exchange/studies/7/`` only.

Whatever the entries say, an address never reaches the workbench's own namespaces in its storage
bucket (``STORAGE_NAMESPACES``: item images, display copies, uploads waiting for a job, export and
report files): those hold every tenant's files. The check runs before any request to the bucket, so a
refused address gets the same answer whether or not objects exist under it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings

from common.errors import ValidationFailed
from common.object_storage import S3Location, parse_s3_url

# The first path segment of every name the workbench stores in its own bucket: item images
# (``items/<study>/``), their display copies (``display/``), uploads kept for an import job
# (``uploads/``), export and report job files (``exports/``, ``reports/``). A test checks that every
# file field's folder and every stored name of a demo, its exports and its report are listed here.
STORAGE_NAMESPACES = frozenset({"items", "display", "uploads", "exports", "reports"})

PLACEHOLDERS = ("{study}", "{user}")
_SEGMENT = re.compile(r"^[A-Za-z0-9._~@+=-]+$")
_MAX_ADDRESS = 1024


@dataclass(frozen=True)
class BucketAddress:
    """An ``s3://`` address checked against the deployment's entries for one study and account
    (:func:`bucket_address_check`): the only form in which a bucket address reaches the file
    sources and the export writer."""

    location: S3Location

    @property
    def url(self) -> str:
        return f"s3://{self.location.bucket}/{self.location.prefix}"

    @property
    def name(self) -> str:
        """The last segment (the file name of an object address)."""
        return PurePosixPath(self.location.prefix.rstrip("/")).name


@dataclass(frozen=True)
class BucketEntry:
    """One allowed entry, its placeholders filled in for a study and an account."""

    bucket: str
    prefix: str  # "" (the whole bucket) or "folder/.../" ending with a slash

    def covers(self, location: S3Location) -> bool:
        return location.bucket == self.bucket and location.prefix.startswith(self.prefix)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def _entries_setting(write: bool) -> list[str]:
    if write and settings.WORKBENCH_S3_EXPORT_BUCKETS is not None:
        return list(settings.WORKBENCH_S3_EXPORT_BUCKETS)
    return list(settings.WORKBENCH_S3_IMPORT_BUCKETS)


def _own_namespace(bucket: str, prefix: str) -> bool:
    """Whether ``prefix`` of ``bucket`` is (or lies in, or holds) one of the storage's own namespaces."""
    if not settings.S3_BUCKET or bucket != settings.S3_BUCKET:
        return False
    first = prefix.split("/", 1)[0]
    return first == "" or first in STORAGE_NAMESPACES


def entry_parse(raw: str) -> tuple[str, str]:
    """``bucket`` or ``bucket/prefix/`` (placeholders left in), refused with the reason when it is
    not one: a deployment's mistake is told, never guessed around."""
    text = raw.strip().removeprefix("s3://")
    bucket, _, prefix = text.partition("/")
    if not bucket or not _SEGMENT.match(bucket):
        raise ValidationFailed(f"bucket entry {raw!r}: name a bucket, then optionally a prefix")
    prefix = prefix.strip("/")
    for segment in prefix.split("/") if prefix else []:
        plain = segment.replace("{study}", "x").replace("{user}", "x")
        if segment in (".", "..") or not _SEGMENT.match(plain):
            raise ValidationFailed(f"bucket entry {raw!r}: the prefix is not a plain path")
    return bucket, f"{prefix}/" if prefix else ""


def bucket_settings_problems() -> list[str]:
    """What is wrong with the deployment's bucket entries (a system check shows each at start-up):
    an entry that is not ``bucket[/prefix/]``, or one that names the storage's own folders."""
    problems: list[str] = []
    for name, raws in (
        ("WORKBENCH_S3_IMPORT_BUCKETS", settings.WORKBENCH_S3_IMPORT_BUCKETS),
        ("WORKBENCH_S3_EXPORT_BUCKETS", settings.WORKBENCH_S3_EXPORT_BUCKETS or []),
    ):
        for raw in raws:
            try:
                bucket, prefix = entry_parse(raw)
            except ValidationFailed as exc:
                problems.append(f"{name}: {exc.message}")
                continue
            if _own_namespace(bucket, prefix):
                problems.append(
                    f"{name}: {raw!r} reaches the workbench's own storage (every study's files); "
                    f"name a folder of the bucket other than {', '.join(sorted(STORAGE_NAMESPACES))}, "
                    "or another bucket. It is ignored."
                )
    return problems


def bucket_entries(*, study_id: int | None, user_id: int | None, write: bool = False) -> list[BucketEntry]:
    """The entries an address for this study and account may lie under. An entry naming ``{study}``
    or ``{user}`` counts only when that one is known (the command line has no account); an entry that
    would reach the storage's own namespaces (the storage bucket whole, or one of its folders) is
    left out, and so is an entry that is not one (:func:`bucket_settings_problems` names both)."""
    found: list[BucketEntry] = []
    for raw in _entries_setting(write):
        try:
            bucket, prefix = entry_parse(raw)
        except ValidationFailed:
            continue
        if "{study}" in prefix:
            if study_id is None:
                continue
            prefix = prefix.replace("{study}", str(study_id))
        if "{user}" in prefix:
            if user_id is None:
                continue
            prefix = prefix.replace("{user}", str(user_id))
        if _own_namespace(bucket, prefix):
            continue
        found.append(BucketEntry(bucket, prefix))
    return found


def _canonical(address: str) -> S3Location:
    text = address.strip()
    if len(text) > _MAX_ADDRESS:
        raise ValidationFailed(f"a bucket address has at most {_MAX_ADDRESS} characters")
    location = parse_s3_url(text)
    segments = location.prefix.split("/")
    body = segments[:-1] if location.prefix.endswith("/") else segments
    if not location.prefix.strip("/"):
        raise ValidationFailed(f"{text}: give a prefix (s3://{location.bucket}/folder/), not a whole bucket")
    if any(segment in ("", ".", "..") or "\\" in segment for segment in body):
        raise ValidationFailed(f"{text}: the prefix is not a plain path")
    return location


def bucket_address_check(
    address: str, *, study_id: int | None, user_id: int | None, write: bool = False
) -> BucketAddress:
    """``address`` as a :class:`BucketAddress` when it lies under an entry the deployment allows for
    this study and account (``write``: the export entries); otherwise ValidationFailed. Nothing is
    asked of the bucket: the answer is the same whether or not anything is stored there."""
    location = _canonical(address)
    entries = bucket_entries(study_id=study_id, user_id=user_id, write=write)
    if _own_namespace(location.bucket, location.prefix) or not any(
        entry.covers(location) for entry in entries
    ):
        doing = "write to" if write else "read from"
        named = ", ".join(str(entry) for entry in entries) if entries else "none"
        shown = f"s3://{location.bucket}/{location.prefix}"[:200]
        raise ValidationFailed(f"{shown}: not a place this study may {doing}; allowed: {named}")
    return BucketAddress(location)
