"""The Redis client behind Django's cache backend, for the commands Django's cache API lacks.

Django's `RedisCache.get_client` builds a new `redis.Redis` object on every call (its response
callback table alone costs about as much CPU as a loopback round trip: benches B1 and B2). The
object is only a handle on the backend's connection pool and is thread-safe, so it is made once
and kept on the backend object itself (one per thread and per CACHES setting: Django's cache
handler), whose pool and socket timeouts it shares. Keys are the cache's full keys
(`cache.make_and_validate_key`), so a value written here is the cache's value under that key.
"""

from __future__ import annotations

from django.core.cache import cache

_ATTRIBUTE = "_events_redis_client"


def writer(full_key: str):
    """The cache backend's Redis client for writes (the primary)."""
    backend = cache._cache
    client = vars(backend).get(_ATTRIBUTE)
    if client is None:
        client = vars(backend)[_ATTRIBUTE] = backend.get_client(full_key, write=True)
    return client
