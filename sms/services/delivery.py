"""Delivery of the SMS outbox to the HTTP gateway (spec.md §11, spec-overlay.md §4).

Invariants:
- queued rows are claimed with `FOR UPDATE SKIP LOCKED`, so two deliverers never POST the same
  row; each batch POSTs and marks its rows in one transaction. A crash between a gateway's 2xx
  and the commit re-sends those rows once with the same `reference`, which the gateway can
  de-duplicate;
- each message is one `POST EVENT_SMS_GATEWAY_URL` of JSON `{to, body, reference}` with
  `Authorization: Bearer EVENT_SMS_GATEWAY_TOKEN` and a timeout; the token is never logged;
- what can succeed later (5xx, 408, 429, a timeout, a refused or dropped connection) leaves the
  row queued with `attempts`, `last_error` and an exponential `next_attempt_at` (30 s doubling,
  capped at one hour): a gateway that is down never loses a message. A transport failure also
  ends the run: the rest of the batch is not tried against a gateway that is not answering;
- any other 4xx is a permanent refusal: the row is `failed` with the status and the response
  body, an audit row and an ERROR log, and never retried (staff may re-queue it: `retry`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from events.errors import InvalidTransition, NotFound
from events.services import audit, nudge
from events.services.delivery import DeliveryReport, backoff
from sms.adapters import DELIVERY_TASK, NUDGE_KEY
from sms.models import SmsOutbox, SmsState

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("sms.delivery")

# A slow gateway holds one worker at most this long per message (seconds: the whole exchange,
# and the connection). httpx is imported by the delivery that uses it: it costs every process
# that loads the app (web, workers, commands) a sixth of a second to import.
TIMEOUT_SECONDS = (10.0, 5.0)
# 4xx answers that say "later", not "never".
RETRYABLE_STATUSES = frozenset({408, 425, 429})
ERROR_BODY_LIMIT = 1000


def gateway_url() -> str:
    url = (settings.EVENT_SMS_GATEWAY_URL or "").strip()
    if not url:
        raise ImproperlyConfigured("EVENT_SMS_GATEWAY_URL is empty: SMS cannot be delivered.")
    return url


def deliver_outbox(*, now: datetime | None = None) -> DeliveryReport:
    """POST due queued SMS, EVENT_MAIL_BATCH per transaction, at most EVENT_MAIL_CRON_LIMIT.

    Stops at the first transport failure (the gateway is down or not answering). When due rows
    remain after the limit, delivery is nudged again after commit.
    """
    now = now or timezone.now()
    url = gateway_url()
    headers = {"Authorization": f"Bearer {settings.EVENT_SMS_GATEWAY_TOKEN}"}
    report = DeliveryReport()
    budget = settings.EVENT_MAIL_CRON_LIMIT
    import httpx

    total, connect = TIMEOUT_SECONDS
    with httpx.Client(timeout=httpx.Timeout(total, connect=connect), headers=headers) as client:
        while budget > 0:
            size = min(settings.EVENT_MAIL_BATCH, budget)
            with transaction.atomic():
                rows = list(
                    SmsOutbox.objects.select_for_update(skip_locked=True)
                    .filter(state=SmsState.QUEUED, next_attempt_at__lte=now)
                    .order_by("next_attempt_at", "pk")[:size]
                )
                if not rows:
                    return report
                budget -= len(rows)
                reachable = _post_batch(client, url, rows, now, report)
                SmsOutbox.objects.bulk_update(
                    rows, ["state", "attempts", "next_attempt_at", "last_error", "sent_at"]
                )
            if not reachable or len(rows) < size:
                return report
    report.work_remaining = True
    nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
    return report


def _post_batch(
    client: httpx.Client, url: str, rows: list[SmsOutbox], now: datetime, report: DeliveryReport
) -> bool:
    """POST each row and set its outcome; False when the gateway stopped answering."""
    import httpx

    for row in rows:
        try:
            response = client.post(
                url, json={"to": row.to, "body": row.body, "reference": row.reference}
            )
        except httpx.TransportError as exc:  # timeouts, refused / reset connections
            _retry(row, f"{type(exc).__name__}: {exc}", now, report)
            return False
        status = response.status_code
        if 200 <= status < 300:
            row.state = SmsState.SENT
            row.attempts += 1
            row.sent_at = timezone.now()
            row.last_error = ""
            report.sent += 1
        elif status >= 500 or status in RETRYABLE_STATUSES:
            _retry(row, f"HTTP {status}: {_excerpt(response)}", now, report)
        else:
            _fail(row, f"HTTP {status}: {_excerpt(response)}", report)
    return True


def _excerpt(response: httpx.Response) -> str:
    return response.text[:ERROR_BODY_LIMIT]


def _retry(row: SmsOutbox, error: str, now: datetime, report: DeliveryReport) -> None:
    row.attempts += 1
    row.last_error = error[:2000]
    row.next_attempt_at = now + backoff(row.attempts)
    report.retried += 1
    logger.warning(
        "sms %s to %s retried at %s (attempt %s): %s",
        row.reference,
        row.to,
        row.next_attempt_at.isoformat(),
        row.attempts,
        row.last_error,
    )


def _fail(row: SmsOutbox, error: str, report: DeliveryReport) -> None:
    row.state = SmsState.FAILED
    row.attempts += 1
    row.last_error = error[:2000]
    report.failed += 1
    audit.record(
        actor=audit.SYSTEM,
        verb="sms_message.failed",
        event=_event_id(row),
        data={"sms": row.pk, "reference": row.reference, "error": row.last_error[:500]},
    )
    logger.error("sms %s to %s refused by the gateway: %s", row.reference, row.to, row.last_error)


def _event_id(row: SmsOutbox) -> int | None:
    if row.registration_id is None:
        return None
    from events.models import Registration

    return (
        Registration.objects.filter(pk=row.registration_id)
        .values_list("event_id", flat=True)
        .first()
    )


def retry(*, message: SmsOutbox, actor: Any) -> SmsOutbox:
    """Re-queue a failed (or backed-off queued) SMS for delivery now; a sent one is refused.

    Audited; delivery is nudged after commit. The reference is kept, so a gateway that did
    receive it before can still de-duplicate.
    """
    with transaction.atomic():
        row = SmsOutbox.objects.select_for_update().filter(pk=message.pk).first()
        if row is None:
            raise NotFound(f"SMS {message.pk} does not exist.", sms=message.pk)
        if row.state == SmsState.SENT:
            raise InvalidTransition(
                "A sent SMS is not sent again.", sms=message.pk, state=SmsState.SENT
            )
        before = row.state
        row.state = SmsState.QUEUED
        row.next_attempt_at = timezone.now()
        row.save(update_fields=["state", "next_attempt_at"])
        audit.record(
            actor=actor,
            verb="sms_message.requeued",
            event=_event_id(row),
            data={"sms": row.pk, "reference": row.reference, "state": [before, row.state]},
        )
        nudge.after_commit(key=NUDGE_KEY, task=DELIVERY_TASK)
    return row
