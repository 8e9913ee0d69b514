"""Liveness of the two services the product needs: PostgreSQL and the Redis broker."""

import logging

import redis
from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)


def probe() -> dict[str, str]:
    report = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        report["db"] = "ok"
    except Exception as exc:  # reported, not hidden: the answer is 503 naming it
        logger.error("healthz: database unreachable: %s", exc)
        report["db"] = f"error: {exc.__class__.__name__}"
    try:
        client = redis.Redis.from_url(
            settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1
        )
        client.ping()
        report["broker"] = "ok"
    except redis.RedisError as exc:
        logger.error("healthz: broker unreachable: %s", exc)
        report["broker"] = f"error: {exc.__class__.__name__}"
    return report
