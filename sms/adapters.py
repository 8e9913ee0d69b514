"""The built-in `EventSmsQueue` adapter (spec.md §11): an outbox delivered to an HTTP gateway.

`GatewaySmsQueue` writes one `SmsOutbox` row per SMS in the caller's transaction (the pass
batch: a rollback undoes them), in one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO NOTHING`
(events.db.outbox_sql), and nudges `sms.deliver_outbox` after commit. The pass's idempotency key
is the row's `reference` (scheduler, registration, scheduled date / slot): the same message is
never queued twice, and the gateway can de-duplicate a re-send by it.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from events.db import outbox_sql
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
        now = timezone.now()
        # One INSERT … SELECT FROM unnest per batch (events.db.outbox_sql), not bulk_create.
        outbox_sql.insert_batch(
            model=SmsOutbox,
            columns=OUTBOX_COLUMNS,
            rows=[
                (m.idempotency_key, m.scheduler_id, m.registration_id, m.recipient, m.body)
                for m in messages
            ],
            constants={"next_attempt_at": now},
            now=now,
        )
        nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)


OUTBOX_COLUMNS = (
    ("reference", "text"),
    ("scheduler_id", "bigint"),
    ("registration_id", "bigint"),
    ("to", "text"),
    ("body", "text"),
)
