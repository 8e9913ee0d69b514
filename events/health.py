"""Liveness of the two services the product needs: PostgreSQL and the Redis broker.

Each probe answers "ok" or "error: <exception class>"; a failure is logged at ERROR and turns
/healthz into a 503 naming the service, never into a 500.
"""

import logging

import redis
from django.conf import settings
from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)


def probe() -> dict[str, str]:
    return {"db": _database(), "broker": _broker()}


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        logger.error("healthz: database unreachable: %s", exc)
        return f"error: {exc.__class__.__name__}"
    return "ok"


def _broker() -> str:
    client = redis.Redis.from_url(
        settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        logger.error("healthz: broker unreachable: %s", exc)
        return f"error: {exc.__class__.__name__}"
    finally:
        client.close()
    return "ok"
