"""What the management commands of every app share: study and user arguments, file or bucket
addresses, JSON output and clear errors (importable by any app above `annotations`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from annotations.interchange.bucket_addresses import BucketAddress, bucket_address_check
from annotations.models import Study, User
from common.errors import WorkbenchError


def file_arg(value: str) -> Path | str:
    """A local file or folder, or a bucket address (``s3://bucket/path``, read through
    ``annotations.interchange.sources``; another scheme is refused there)."""
    return value if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", value) else Path(value)


def source_arg(value: Path | str, *, study: Study | None) -> Path | BucketAddress:
    """A :func:`file_arg` ready to import: a bucket address checked as a page checks it, for
    ``study`` (None: a study the command makes) with no account (entries naming ``{user}`` do not
    apply on the command line); a refusal is the command's error."""
    if isinstance(value, Path):
        return value
    try:
        return bucket_address_check(value, study_id=study.pk if study else None, user_id=None)
    except WorkbenchError as exc:
        raise fail(exc) from exc


def source_arg_or_none(value: Path | str | None, *, study: Study | None) -> Path | BucketAddress | None:
    """:func:`source_arg` of an optional argument."""
    return None if value is None else source_arg(value, study=study)


def study_arg(value: str) -> Study:
    """A study by id or exact name."""
    study = Study.objects.filter(pk=int(value)).first() if value.isdigit() else None
    if study is None:
        matches = list(Study.objects.filter(name=value)[:2])
        if len(matches) > 1:
            raise CommandError(f"several studies are named {value!r}; give the id")
        study = matches[0] if matches else None
    if study is None:
        raise CommandError(f"no study {value!r} (give its id or exact name)")
    return study


def user_arg(value: str | None) -> User:
    """The named user, or the only admin/researcher when none is named."""
    if value:
        user = User.objects.filter(username=value).first()
        if user is None:
            raise CommandError(f"no user {value!r}")
        return user
    candidates = list(User.objects.filter(role__in=[User.Role.RESEARCHER, User.Role.ADMIN])[:2]) or list(
        User.objects.filter(is_superuser=True)[:2]
    )
    if len(candidates) != 1:
        raise CommandError("name the owner with --owner USERNAME")
    return candidates[0]


def fail(exc: WorkbenchError) -> CommandError:
    return CommandError(exc.message)


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)
