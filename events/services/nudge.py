"""De-duplicated nudges of background tasks, sent after commit (spec.md §6.4).

Invariants:
- a nudge publishes its Celery task only after the surrounding transaction commits (never
  inside it), and only when no nudge of the same key is already pending: a Redis
  `SET key NX EX 5` (Django's cache `add` on the Redis cache). The task clears the key when it
  starts (`started`), so nudges that arrive while a run is under way queue exactly one more;
- tasks are published by their registered name (`publish`), so services never import a
  tasks module (no import cycle) and an overlay nudges its own task the same way:
  `nudge.after_commit(key="sms:nudge:...", task="sms.send_pass")`;
- best effort: a broker or Redis error is logged (WARNING; anything unforeseen: ERROR with its
  traceback), never raised into the committed write. Beat
  runs every pass each minute as the safety net, so a lost nudge only delays work.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import current_app
from django.core.cache import cache
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

from events import cache_client

logger = logging.getLogger("events.nudge")

DEDUP_SECONDS = 5
PASS_KEY = "events:nudge:scheduler-pass"  # noqa: S105 — a cache key
DELIVERY_KEY = "events:nudge:outbox-delivery"
PASS_TASK = "events.run_pass"  # noqa: S105 — a Celery task name
DELIVERY_TASK = "events.deliver_outbox"


def publish(task: str, args: Sequence[Any] = (), *, countdown: float | None = None) -> None:
    """The one publish point: send the task registered under `task` to the broker (with its
    positional `args`, ids only, when it takes any; `countdown`: run it that many seconds
    later)."""
    options: dict[str, Any] = {} if countdown is None else {"countdown": countdown}
    if args:
        current_app.send_task(task, args=list(args), **options)
    else:
        current_app.send_task(task, **options)


def _send(key: str, task: str, args: Sequence[Any] = (), countdown: float | None = None) -> bool:
    try:
        # Django's cache.add is this same SET NX EX on the cache's own Redis; the client is made
        # once (events.cache_client), not on every call.
        full_key = cache.make_and_validate_key(key)
        if not cache_client.writer(full_key).set(full_key, b"1", nx=True, ex=DEDUP_SECONDS):
            return False
        options: dict[str, Any] = {} if countdown is None else {"countdown": countdown}
        if args:
            publish(task, args, **options)
        else:
            publish(task, **options)
    except (BrokerError, RedisError, ConnectionError) as exc:
        logger.warning("nudge %s not sent (beat will run it): %s", task, exc)
        return False
    except Exception:
        # Runs after the write committed: an unforeseen publisher failure (a closed connection
        # pool, a misconfigured app) must not turn a committed write into an error. Logged
        # loudly with its traceback; beat still runs the task within a minute.
        logger.exception("nudge %s not sent (beat will run it)", task)
        return False
    return True


def after_commit(
    *, key: str, task: str, args: Sequence[Any] = (), countdown: float | None = None
) -> None:
    """Publish the Celery task registered as `task` once the current transaction commits,
    unless a nudge under `key` is already pending. `args`: the task's positional arguments
    (ids), for a task run per object under a key of its own (the waiting list's per event).
    `countdown`: the task runs that many seconds after the publish (a retry that must not spin)."""
    args = tuple(args)
    transaction.on_commit(lambda: _send(key, task, args, countdown))


def started(*, key: str) -> None:
    """Called by the task when it starts: later nudges may queue another run."""
    try:
        cache.delete(key)
    except RedisError as exc:
        logger.warning("nudge key %s not cleared (expires by itself): %s", key, exc)


def scheduler_pass() -> None:
    after_commit(key=PASS_KEY, task=PASS_TASK)


def outbox_delivery() -> None:
    after_commit(key=DELIVERY_KEY, task=DELIVERY_TASK)
