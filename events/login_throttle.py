"""The admin login throttle's store: django-axes' cache handler on the Redis cache, failing open,
with a limit per counter.

Two counters per failed login (settings.AXES_LOCKOUT_PARAMETERS, in this order):
- the (username, client address) pair, locked at AXES_FAILURE_LIMIT: guessing one account's
  password from one address stops there, and the real user, from any other address, still
  logs in (a flat list of parameters would lock the username everywhere: anyone could lock any
  staff account out for the cool-off by typing five wrong passwords);
- the client address alone, locked at LOGIN_THROTTLE_ADDRESS_LIMIT (higher): one address
  trying many usernames, or one username many times, is still stopped.
A login is refused while either counter is at its limit. A successful login clears its pair's
counter only: an attacker's own account cannot wipe its address's count.

When Redis does not answer, a login is neither refused nor turned into a 500: staff must reach
the admin during a Redis outage. The throttle is then off for that request, and an ERROR line
says so.
"""

from __future__ import annotations

import logging

from axes.conf import settings as axes_settings
from axes.handlers.cache import AxesCacheHandler
from axes.helpers import (
    get_cache,
    get_cache_timeout,
    get_client_cache_keys,
    get_client_str,
    get_client_username,
    get_credentials,
    get_failure_limit,
    get_lockout_parameters,
)
from axes.signals import user_locked_out
from django.conf import settings
from redis.exceptions import RedisError

logger = logging.getLogger("events.login_throttle")
axes_log = logging.getLogger("axes.handlers.cache")  # axes' own lines keep their logger

ADDRESS = "ip_address"


def counters(request, credentials=None) -> dict[str, int]:
    """Cache key → limit of each counter this attempt counts in. Without a username the pair's
    key is the address's own (axes joins the values it has): one counter, the address's limit."""
    keys = get_client_cache_keys(request, credentials)
    parameters = get_lockout_parameters(request, credentials)
    pair_limit = get_failure_limit(request, credentials)
    found: dict[str, int] = {}
    for key, parameter in zip(keys, parameters, strict=True):
        limit = settings.LOGIN_THROTTLE_ADDRESS_LIMIT if parameter == ADDRESS else pair_limit
        found[key] = max(found.get(key, 0), limit)
    return found


def _pair_keys(request, credentials=None) -> list[str]:
    keys = get_client_cache_keys(request, credentials)
    parameters = get_lockout_parameters(request, credentials)
    address_keys = {k for k, p in zip(keys, parameters, strict=True) if p == ADDRESS}
    return [k for k in keys if k not in address_keys]


class FailOpenCacheHandler(AxesCacheHandler):
    def __init__(self) -> None:
        """No cache object kept: axes holds one handler for the process, and `caches[...]` is
        per thread (and follows settings changes)."""

    @property
    def cache(self):
        return get_cache()

    def is_locked(self, request, credentials=None) -> bool:
        """Either counter at its own limit (axes compares the highest count with one limit)."""
        if not axes_settings.AXES_LOCK_OUT_AT_FAILURE:
            return False
        try:
            return any(
                self.cache.get(key, default=0) >= limit
                for key, limit in counters(request, credentials).items()
            )
        except RedisError as exc:
            logger.error("login throttle unavailable (cache): %s", type(exc).__name__)
            return False

    def get_failures(self, request, credentials=None) -> int:
        try:
            return super().get_failures(request, credentials)
        except RedisError as exc:
            logger.error("login throttle unavailable (cache): %s", type(exc).__name__)
            return 0

    def user_login_failed(self, sender, credentials, request=None, **kwargs):
        try:
            return self._count_failure(credentials, request)
        except RedisError as exc:
            logger.error("login failure not counted (cache): %s", type(exc).__name__)
            return None

    def _count_failure(self, credentials, request) -> None:
        """AxesCacheHandler.user_login_failed with a limit per counter."""
        if request is None:
            axes_log.error("AXES: user_login_failed does not function without a request.")
            return
        username = get_client_username(request, credentials)
        if (
            not axes_settings.AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT
            and request.axes_locked_out
        ):
            request.axes_credentials = credentials
            user_locked_out.send(
                "axes", request=request, username=username, ip_address=request.axes_ip_address
            )
            return
        client = get_client_str(
            username,
            request.axes_ip_address,
            request.axes_user_agent,
            request.axes_path_info,
            request,
        )
        if self.is_whitelisted(request, credentials):
            axes_log.info("AXES: Login failed from whitelisted client %s.", client)
            return
        timeout = get_cache_timeout(request)
        reached = []
        highest = 0
        for key, limit in counters(request, credentials).items():
            if self.cache.add(key=key, value=1, timeout=timeout):
                count = 1
            else:
                count = self.cache.incr(key=key, delta=1)
                self.cache.touch(key=key, timeout=timeout)
            highest = max(highest, count)
            if count >= limit:
                reached.append(key)
        request.axes_failures_since_start = highest
        axes_log.warning("AXES: Login failure by %s. Count = %d.", client, highest)
        if axes_settings.AXES_LOCK_OUT_AT_FAILURE and reached:
            axes_log.warning("AXES: Locking out %s after repeated login failures.", client)
            request.axes_locked_out = True
            request.axes_credentials = credentials
            user_locked_out.send(
                "axes", request=request, username=username, ip_address=request.axes_ip_address
            )

    def user_logged_in(self, sender, request, user, **kwargs):
        """Clears the pair's counter only (axes would clear the address's too)."""
        try:
            if axes_settings.AXES_RESET_ON_SUCCESS:
                credentials = get_credentials(user.get_username())
                for key in _pair_keys(request, credentials):
                    self.cache.delete(key)
        except RedisError as exc:
            logger.error("login failures not reset (cache): %s", type(exc).__name__)
