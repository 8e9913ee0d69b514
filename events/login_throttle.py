"""The admin login throttle's store: django-axes' cache handler on the Redis cache, failing open.

Failures are counted per username and per client address (settings.AXES_*). When Redis does
not answer, a login is neither refused nor turned into a 500: staff must reach the admin during
a Redis outage (issue 9: "other pages keep answering"). The throttle is then off for that
request, and an ERROR line says so.
"""

from __future__ import annotations

import logging

from axes.handlers.cache import AxesCacheHandler
from axes.helpers import get_cache
from redis.exceptions import RedisError

logger = logging.getLogger("events.login_throttle")


class FailOpenCacheHandler(AxesCacheHandler):
    def __init__(self) -> None:
        """No cache object kept: axes holds one handler for the process, and `caches[...]` is
        per thread (and follows settings changes)."""

    @property
    def cache(self):
        return get_cache()

    def get_failures(self, request, credentials=None) -> int:
        try:
            return super().get_failures(request, credentials)
        except RedisError as exc:
            logger.error("login throttle unavailable (cache): %s", type(exc).__name__)
            return 0

    def user_login_failed(self, sender, credentials, request=None, **kwargs):
        try:
            return super().user_login_failed(sender, credentials, request, **kwargs)
        except RedisError as exc:
            logger.error("login failure not counted (cache): %s", type(exc).__name__)
            return None

    def user_logged_in(self, sender, request, user, **kwargs):
        try:
            return super().user_logged_in(sender, request, user, **kwargs)
        except RedisError as exc:
            logger.error("login failures not reset (cache): %s", type(exc).__name__)
            return None
