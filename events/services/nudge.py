"""De-duplicated nudges of the background passes, sent after commit (spec.md §6.4).

A nudge enqueues its Celery task only after the surrounding transaction commits (never inside
it), and only when no nudge of the same kind is already pending: a Redis `SET key NX EX 5`
(Django's cache `add` on the Redis cache). The task clears the key when it starts, so nudges
that arrive while a pass runs queue exactly one more pass. Beat runs every pass each minute as
the safety net, so a nudge lost to a broker outage only delays work (it is logged).
"""

from __future__ import annotations

import logging

from django.core.cache import cache
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

logger = logging.getLogger("events.nudge")

DEDUP_SECONDS = 5
PASS_KEY = "events:nudge:scheduler-pass"  # noqa: S105 — a cache key
DELIVERY_KEY = "events:nudge:outbox-delivery"


def _send(key: str, task_name: str) -> bool:
    from events import tasks

    try:
        if not cache.add(key, "1", timeout=DEDUP_SECONDS):
            return False
        getattr(tasks, task_name).apply_async()
    except (BrokerError, RedisError, ConnectionError) as exc:
        logger.warning("nudge %s not sent (beat will run it): %s", task_name, exc)
        return False
    return True


def after_commit(*, key: str, task_name: str) -> None:
    """Enqueue `events.tasks.<task_name>` once the current transaction commits."""
    transaction.on_commit(lambda: _send(key, task_name))


def started(*, key: str) -> None:
    """Called by the task when it starts: later nudges may queue another run."""
    try:
        cache.delete(key)
    except RedisError as exc:
        logger.warning("nudge key %s not cleared (expires by itself): %s", key, exc)


def scheduler_pass() -> None:
    after_commit(key=PASS_KEY, task_name="run_pass_task")


def outbox_delivery() -> None:
    after_commit(key=DELIVERY_KEY, task_name="deliver_outbox_task")
