"""The S3-compatible object store named by the WORKBENCH_S3_* settings: one boto3 client, one rule.

Everything that talks to a bucket directly (the storage backend's configuration, bucket sources of
imports, exports to a bucket prefix) builds its client here, so the endpoint, region and addressing
style are read in one place. Credentials are boto3's own (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, or an instance role); they are never stored by the workbench.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from common.errors import ValidationFailed


def s3_enabled() -> bool:
    """True when WORKBENCH_S3_BUCKET is set: item files and exports then live in that bucket."""
    return bool(settings.S3_BUCKET)


def s3_client_options() -> dict[str, Any]:
    """Keyword arguments for ``boto3.client("s3", ...)`` (and django-storages) from the settings."""
    from botocore.config import Config

    options: dict[str, Any] = {}
    if settings.S3_ENDPOINT_URL:
        options["endpoint_url"] = settings.S3_ENDPOINT_URL
    if settings.S3_REGION:
        options["region_name"] = settings.S3_REGION
    s3_config: dict[str, str] = {}
    if settings.S3_ADDRESSING_STYLE:
        s3_config["addressing_style"] = settings.S3_ADDRESSING_STYLE
    options["config"] = Config(signature_version="s3v4", s3=s3_config or None)
    return options


def s3_client() -> Any:
    """A boto3 S3 client for the configured endpoint (any bucket the credentials may read)."""
    import boto3

    return boto3.client("s3", **s3_client_options())


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str


def parse_s3_url(url: str) -> S3Location:
    """``s3://bucket/prefix/`` as bucket and prefix; anything else is a ValidationFailed naming it."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValidationFailed(f"Not a bucket address: {url[:200]!r} (expected s3://bucket/prefix/).")
    if parts.query or parts.fragment:
        raise ValidationFailed("A bucket address takes no '?' or '#' part.")
    return S3Location(bucket=parts.netloc, prefix=parts.path.lstrip("/"))
