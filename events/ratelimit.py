"""Per-client fixed-window rate limits in the shared Redis cache (spec.md §7.5).

One counter per (scope, window start, client): INCR and EXPIRE run in one server-side script
(atomic, one round trip: EVALSHA of a script object made once for the process), so concurrent
requests never lose a count and every counter expires with its window. Limits come from
settings.EVENT_RATE_LIMITS = {scope: (requests, window_seconds)}, set explicitly there.
A Redis failure raises `LimiterUnavailable` (the caller decides: the token routes answer 503,
the intake API 503 JSON `service_unavailable` with `Retry-After`, the form a 503 page).
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache
from django.utils.translation import gettext as _
from redis.commands.core import Script
from redis.exceptions import RedisError

from events import cache_client
from events.errors import RateLimited

SCOPES = ("intake", "token")
clock = time.time  # tests pin the window by replacing this


INCR_WITH_TTL = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


# One script object for the process: it holds the SHA1 (computed from the bytes, no client
# needed) and, called with a client, runs EVALSHA, loading the script once when that server
# does not know it yet. The client is the cache backend's own, kept once per backend object
# (events.cache_client: Django's get_client would build a new one on every call).
INCR_SCRIPT = Script(None, INCR_WITH_TTL.encode())


class LimiterUnavailable(Exception):
    """The shared cache holding the counters did not answer (never carries the client key)."""


def _incr(key: str, ttl: int) -> int:
    full_key = cache.make_and_validate_key(key)
    # Django's RedisCache.incr is exists-then-incr (two round trips, not atomic with the TTL);
    # the cache backend's own Redis client runs one atomic script instead.
    client = cache_client.writer(full_key)
    try:
        return int(INCR_SCRIPT(keys=[full_key], args=[ttl], client=client))
    except RedisError as error:
        raise LimiterUnavailable(type(error).__name__) from error


def hit(*, scope: str, client: str, now: float | None = None) -> int:
    """Count one request of `client` in `scope`; raise RateLimited (retry_after) over the limit.

    Returns the count in the current window.
    """
    limit, window = settings.EVENT_RATE_LIMITS[scope]
    now = clock() if now is None else now
    start = int(now // window) * window
    count = _incr(f"rl:{scope}:{start}:{client[:64]}", window + 1)
    if count > limit:
        retry_after = max(1, math.ceil(start + window - now))
        raise RateLimited(_("Too many requests; try again later."), retry_after=retry_after)
    return count
