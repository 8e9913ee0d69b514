"""The built-in `EventSmsQueue` adapter (spec.md §11): an outbox delivered to an HTTP gateway.

`GatewaySmsQueue` writes one `SmsOutbox` row per SMS in the caller's transaction (the pass
batch: a rollback undoes them), in one bulk `INSERT … ON CONFLICT (reference) DO NOTHING`, and
nudges `sms.deliver_outbox` after commit. The pass's idempotency key is the row's `reference`
(scheduler, registration, scheduled date / slot): the same message is never queued twice, and
the gateway can de-duplicate a re-send by it.
"""

from __future__ import annotations

from collections.abc import Sequence

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
        now = timezone.now()
        SmsOutbox.objects.bulk_create(
            [
                SmsOutbox(
                    reference=m.idempotency_key,
                    scheduler_id=m.scheduler_id,
                    registration_id=m.registration_id,
                    to=m.recipient,
                    body=m.body,
                    next_attempt_at=now,
                )
                for m in messages
            ],
            ignore_conflicts=True,
        )
        nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
