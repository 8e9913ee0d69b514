"""The built-in `EventSmsQueue` adapter (spec.md §11): an outbox delivered to an HTTP gateway.

`GatewaySmsQueue` writes one `SmsOutbox` row per SMS in the caller's transaction (the pass
batch: a rollback undoes them), in one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING`,
and nudges `sms.deliver_outbox` after commit. The pass's idempotency key is the row's
`reference` (scheduler, registration, scheduled date / slot): the same message is never queued
twice, and the gateway can de-duplicate a re-send by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, models
from django.utils import timezone

from events.ports import EventSmsQueue, OutgoingSms
from events.services import nudge
from sms.models import SmsOutbox

NUDGE_KEY = "sms:nudge:delivery"
DELIVERY_TASK = "sms.deliver_outbox"


class GatewaySmsQueue(EventSmsQueue):
    """Writes `SmsOutbox` rows; the `sms.deliver_outbox` task POSTs them to the gateway."""

    # sms.checks refuses start-up when this adapter is wired and EVENT_SMS_GATEWAY_URL is empty.
    needs_gateway_url = True

    def enqueue(self, *, message: OutgoingSms) -> None:
        self.enqueue_many(messages=[message])

    def enqueue_many(self, *, messages: Sequence[OutgoingSms]) -> None:
        if not messages:
            return
        insert_batch(
            [
                (m.idempotency_key, m.scheduler_id, m.registration_id, m.recipient, m.body)
                for m in messages
            ],
            now=timezone.now(),
        )
        nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)


# The columns each row gives (one array parameter per column), in the rows' order.
OUTBOX_COLUMNS = (
    ("reference", "text[]"),
    ("scheduler_id", "bigint[]"),
    ("registration_id", "bigint[]"),
    ("to", "text[]"),
    ("body", "text[]"),
)


@cache
def _statement() -> tuple[str, tuple[models.Field, ...]]:
    """The INSERT's text and the fields given one value for the whole batch (every column the
    rows do not give: a field added to the model later is written too), in placeholder
    order."""
    given = {column for column, _ in OUTBOX_COLUMNS}
    once = tuple(
        f for f in SmsOutbox._meta.concrete_fields if not f.primary_key and f.column not in given
    )
    quote = connection.ops.quote_name
    names = [quote(column) for column, _ in OUTBOX_COLUMNS] + [quote(f.column) for f in once]
    select = [f"u.c{i}" for i in range(len(OUTBOX_COLUMNS))] + ["%s"] * len(once)
    arrays = ", ".join(f"%s::{kind}" for _, kind in OUTBOX_COLUMNS)
    aliases = ", ".join(f"c{i}" for i in range(len(OUTBOX_COLUMNS)))
    sql = (
        f"INSERT INTO {quote(SmsOutbox._meta.db_table)} ({', '.join(names)}) "  # noqa: S608 — names from model meta
        f"SELECT {', '.join(select)} FROM unnest({arrays}) AS u({aliases}) "
        "ON CONFLICT DO NOTHING"
    )
    return sql, once


def _once(field: models.Field, now: datetime) -> Any:
    """A column the rows do not give: due now (`next_attempt_at`), made now (auto_now_add), or
    the field's default."""
    if field.attname == "next_attempt_at" or getattr(field, "auto_now_add", False):
        return now
    return field.get_db_prep_save(field.get_default(), connection)


def insert_batch(rows: Sequence[Sequence[Any]], *, now: datetime) -> int:
    """Queue `rows` (each one value per column of OUTBOX_COLUMNS) in one statement whatever the
    batch size, instead of bulk_create's per-value preparation (the pass's profile, bench B3).
    A row whose reference is already queued is skipped (ON CONFLICT DO NOTHING: the unique
    reference is the only guard against a message queued twice). Returns the rows inserted."""
    if not rows:
        return 0
    sql, once = _statement()
    arrays = [list(values) for values in zip(*rows, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*(_once(f, now) for f in once), *arrays])
        return cursor.rowcount
