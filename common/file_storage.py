"""The default file storage, chosen from the settings when it is made: the local filesystem
(``MEDIA_ROOT``, the embedded default) or, when ``S3_BUCKET`` is set, django-storages' S3 backend
configured from the WORKBENCH_S3_* settings (``common.object_storage``).

``STORAGES["default"]`` names :func:`storage_from_settings`; Django's ``default_storage`` (the
storage of every ``FileField`` that names none) is a lazy object made from it on first use. A
change of the S3 settings (tests point them at a fresh bucket) drops the made storage, as Django
does itself for ``STORAGES``, so the next use follows the new settings.

The bucket is private: no ACL is ever sent (objects get the bucket's own, private by default),
reads go through presigned URLs (``querystring_auth``), and a name already taken is never
overwritten (``file_overwrite`` off: Django picks a free name, as on the filesystem).
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.functional import empty

from common.object_storage import s3_client_options, s3_enabled

logger = logging.getLogger(__name__)

# Settings whose change makes a new default storage (and a new bucket origin).
STORAGE_SETTINGS = frozenset(
    {"S3_BUCKET", "S3_ENDPOINT_URL", "S3_REGION", "S3_ADDRESSING_STYLE", "S3_URL_TTL_SECONDS", "S3_SERVE"}
)
SERVE_MODES = ("redirect", "proxy")
MAX_URL_TTL_SECONDS = 300  # a presigned URL lives at most five minutes (docs/deploy.md)


def s3_storage_options() -> dict[str, Any]:
    """django-storages' ``S3Storage`` options for the configured bucket (never public)."""
    client = s3_client_options()
    return {
        "bucket_name": settings.S3_BUCKET,
        "endpoint_url": client.get("endpoint_url"),
        "region_name": client.get("region_name"),
        "client_config": client["config"],
        "default_acl": None,  # no ACL header: objects stay as private as the bucket
        "querystring_auth": True,  # every URL is presigned
        "querystring_expire": url_ttl_seconds(),
        "file_overwrite": False,  # a taken name gets a suffix, as FileSystemStorage does
        "custom_domain": None,
        "object_parameters": {},
    }


def storage_from_settings(**options: Any) -> Storage:
    """The ``STORAGES["default"]`` backend: S3 when ``S3_BUCKET`` is set, else the filesystem."""
    if s3_enabled():
        bucket: Storage = _s3_storage_class()(**{**s3_storage_options(), **options})
        return bucket
    return FileSystemStorage(**options)


_LOADER_LOCK = threading.Lock()
_LOADERS: list[Any] = []


def _data_loader() -> Any:
    """One botocore data loader for the process (it caches the JSON models it reads)."""
    with _LOADER_LOCK:
        if not _LOADERS:
            import botocore.session

            _LOADERS.append(botocore.session.Session().get_component("data_loader"))
        return _LOADERS[0]


@lru_cache(maxsize=1)
def _s3_storage_class() -> type[Storage]:
    from storages.backends.s3 import S3Storage

    class SharedModelsS3Storage(S3Storage):  # type: ignore[misc]  # django-storages has no stubs
        """django-storages' ``S3Storage``, whose boto3 session (one per thread: a boto3 resource is not
        thread-safe) reads botocore's service models through one loader per process: a web thread's
        first presigned URL then costs ~15 ms of CPU to make its client instead of ~80-130 ms of
        reading and decoding the same JSON files again (each gunicorn thread makes one;
        docs/benchmarks.md, "Claim path at the limit")."""

        def _create_session(self) -> Any:
            if self.session_profile:
                return super()._create_session()
            import boto3
            import botocore.session

            core = botocore.session.Session()
            core.register_component("data_loader", _data_loader())
            with _LOADER_LOCK:  # boto3 adds its own data folder to the loader's paths: keep one of each
                session = boto3.Session(
                    aws_access_key_id=self.access_key,
                    aws_secret_access_key=self.secret_key,
                    aws_session_token=self.security_token,
                    botocore_session=core,
                )
                paths = session._loader.search_paths
                paths[:] = list(dict.fromkeys(paths))
            return session

    return SharedModelsS3Storage


def storage_is_s3(storage: Storage) -> bool:
    from storages.backends.s3 import S3Storage

    return isinstance(storage, S3Storage)  # a lazy default_storage answers for what it wraps


def url_ttl_seconds() -> int:
    """How long a presigned URL lives (``WORKBENCH_S3_URL_TTL_SECONDS``, 1 to 300)."""
    return int(settings.S3_URL_TTL_SECONDS)


def serve_by_redirect() -> bool:
    """Files in the bucket are answered with a redirect to a presigned URL (else streamed through)."""
    return s3_enabled() and settings.S3_SERVE == "redirect"


@lru_cache(maxsize=1)
def _bucket_origin(bucket: str, endpoint: str, region: str, style: str) -> str:
    probe: Any = _s3_storage_class()(**s3_storage_options())
    url = probe.url("origin-probe")  # signed locally: no request is made
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def bucket_origin() -> str | None:
    """The scheme and host that presigned URLs point at (pages' ``img-src`` must allow it), or None
    when files are not served by redirect."""
    if not serve_by_redirect():
        return None
    try:
        return _bucket_origin(
            settings.S3_BUCKET, settings.S3_ENDPOINT_URL, settings.S3_REGION, settings.S3_ADDRESSING_STYLE
        )
    except Exception:  # no credentials to sign with: pages still render; the images' own redirects fail
        logger.exception(
            "cannot sign a URL for bucket %r; images from it are not allowed on pages", settings.S3_BUCKET
        )
        return None


@receiver(setting_changed)
def _storage_settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting not in STORAGE_SETTINGS:
        return
    from django.core.files.storage import default_storage, storages

    # What django.test.signals.storages_changed does for STORAGES.
    handler: Any = storages
    lazy: Any = default_storage
    handler._storages = {}
    lazy._wrapped = empty
