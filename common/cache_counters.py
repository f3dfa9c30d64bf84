"""Counters in Django's cache that cost one round trip to a shared cache: a fixed-window count (the API
throttle's, ``annotations/api/throttling.py``), alone or together with the read of one more key (the
token generation that every API call reads, ``annotations/api/authentication.py``).

On the shared cache (``WORKBENCH_CACHE_URL``, ``common.redis_cache.RedisCache``) the commands go in
one pipeline: ``GET`` the key read, ``SET counter 0 EX seconds NX`` (the window's counter is made with
its expiry, so it never outlives its window and nothing has to be read first) and ``INCR counter``.
Elsewhere (the per-process cache of the embedded default) the same through the cache's ``add`` and
``incr``. A counter is a plain integer in the cache, so ``cache.get`` reads it as any other value.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import caches

from common.redis_cache import RedisCache


def counter_hit(key: str, seconds: int) -> int:
    """Add one to the counter ``key`` (made with a life of ``seconds`` when missing); the new count."""
    return read_and_count(None, key, seconds)[1]


def read_and_count(read_key: str | None, counter_key: str, seconds: int) -> tuple[Any, int]:
    """``cache.get(read_key)`` (None without a key) and :func:`counter_hit` of ``counter_key``, in one
    round trip on the shared cache."""
    cache = caches["default"]
    if isinstance(cache, RedisCache):
        return _redis_read_and_count(cache, read_key, counter_key, seconds)
    value = cache.get(read_key) if read_key is not None else None
    cache.add(counter_key, 0, seconds)
    try:
        return value, int(cache.incr(counter_key))
    except ValueError:  # expired between the add and the incr
        cache.add(counter_key, 1, seconds)
        return value, 1


def _redis_read_and_count(
    backend: RedisCache, read_key: str | None, counter_key: str, seconds: int
) -> tuple[Any, int]:
    shared: Any = backend  # Django's RedisCache keeps its client in ``_cache`` (not in its stubs)
    client = shared._cache.get_client(counter_key, write=True)
    pipeline = client.pipeline(transaction=False)
    if read_key is not None:
        pipeline.get(backend.make_and_validate_key(read_key))
    counter = backend.make_and_validate_key(counter_key)
    pipeline.set(counter, 0, ex=max(1, int(seconds)), nx=True)
    pipeline.incr(counter)
    replies = pipeline.execute()
    value = None
    if read_key is not None and replies[0] is not None:
        value = shared._cache._serializer.loads(replies[0])
    return value, int(replies[-1])
