"""The one S3 client rule, against moto's standalone S3 server (tests/s3_server.py)."""

from __future__ import annotations

import pytest

from common.errors import ValidationFailed
from common.object_storage import S3Location, parse_s3_url, s3_client, s3_enabled
from tests.s3_server import S3Bucket


def test_client_from_settings_talks_to_the_configured_endpoint(s3_bucket: S3Bucket) -> None:
    assert s3_enabled()
    client = s3_client()
    client.put_object(Bucket=s3_bucket.name, Key="a/b.txt", Body=b"hello")
    assert s3_bucket.keys("a/") == ["a/b.txt"]
    assert client.get_object(Bucket=s3_bucket.name, Key="a/b.txt")["Body"].read() == b"hello"


def test_s3_is_off_without_a_bucket(settings) -> None:
    settings.S3_BUCKET = ""
    assert not s3_enabled()


def test_bucket_addresses_are_parsed_or_refused() -> None:
    assert parse_s3_url("s3://lab-images/audit/2026/") == S3Location("lab-images", "audit/2026/")
    assert parse_s3_url("s3://lab-images") == S3Location("lab-images", "")
    for bad in ("http://lab/x", "s3:///x", "/tmp/x", "s3://b/x?versionId=1"):
        with pytest.raises(ValidationFailed):
            parse_s3_url(bad)
