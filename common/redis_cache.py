"""The shared cache's backend (``WORKBENCH_CACHE_URL``): Django's Redis cache, with one Redis client
per connection pool instead of one made per call.

Django's ``RedisCacheClient.get_client`` builds a new ``redis.Redis`` around the pool for every cache
operation; with redis-py 8 that object (its response callbacks, retry and options) costs about
0.1 ms of CPU, and an API call makes three such operations (the token generation, the throttle's
read and write). A ``redis.Redis`` holds no connection of its own (each command borrows one from the
pool, which is thread-safe and reopens its connections in a forked process), so one per pool serves
every thread. Measured in docs/benchmarks.md, "Across machines (issue 28)".
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class ReusedClientRedisCacheClient(RedisCacheClient):
    """``RedisCacheClient`` whose ``get_client`` returns the same ``redis.Redis`` for a pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}
        self._clients_lock = threading.Lock()

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        base: Any = self  # Django's private pool and client class, which its stubs do not declare
        pool = base._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            with self._clients_lock:
                client = self._clients.setdefault(id(pool), base._client(connection_pool=pool))
        return client


class RedisCache(DjangoRedisCache):
    """``django.core.cache.backends.redis.RedisCache`` on :class:`ReusedClientRedisCacheClient`."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient
