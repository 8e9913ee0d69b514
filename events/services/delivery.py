"""Delivery of the mail outbox through Django's email backend (EMAIL_URL) (spec.md §11).

Invariants:
- queued rows are claimed with `FOR UPDATE SKIP LOCKED`, so two deliverers never send the same
  row; each batch sends and marks its rows in one transaction;
- every mail carries the row's stable Message-ID: a crash between the SMTP hand-over and the
  commit re-sends it once with the same Message-ID, which the far side can de-duplicate;
- SMTP / connection failures that can succeed later (connection refused or lost, 4xx replies)
  leave the row queued with `attempts`, `last_error` and an exponential `next_attempt_at`;
  permanent refusals (5xx, every recipient refused) and rows past MAX_ATTEMPTS are `failed`;
- a row whose message cannot be built or sent for any other reason (a newline in a header, an
  address Django refuses) is `failed` on its own: the batch goes on and the rows already handed
  to SMTP keep their `sent` marks, so they are never sent again.
- a failed row goes back to the queue only through `requeue` (staff's "retry"), audited.
- a confirmation mail carries the attendee's PDF ticket when its event says so
  (events.services.ticket_pdf.attachments, decided per batch when it is sent); a ticket that
  cannot be drawn fails its row like any message that cannot be built.
"""

from __future__ import annotations

import email.errors
import logging
import smtplib
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import transaction
from django.utils import timezone

from events.errors import InvalidTransition, NotFound
from events.models import MailOutbox, OutboxState, Registration
from events.services import audit, nudge, ticket_pdf

logger = logging.getLogger("events.delivery")

MAX_ATTEMPTS = 8
FIRST_BACKOFF = timedelta(seconds=30)
MAX_BACKOFF = timedelta(hours=1)


@dataclass
class DeliveryReport:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    work_remaining: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"sent: {self.sent}, retried: {self.retried}, failed: {self.failed}, "
            f"work remaining: {'yes' if self.work_remaining else 'no'}"
        )


def backoff(attempts: int) -> timedelta:
    """30 s, 1 min, 2 min, … capped at one hour."""
    return min(FIRST_BACKOFF * (2 ** max(attempts - 1, 0)), MAX_BACKOFF)


Ticket = tuple[Registration, bytes | None]  # (registration, its event's logo)


def _message(row: MailOutbox, connection) -> EmailMultiAlternatives:
    message = EmailMultiAlternatives(
        subject=row.subject,
        body=row.body_text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[row.recipient],
        headers={"Message-ID": row.message_id},
        connection=connection,
    )
    if row.body_html:
        message.attach_alternative(row.body_html, "text/html")
    return message


def _with_ticket(message: EmailMultiAlternatives, ticket: Ticket | None) -> EmailMultiAlternatives:
    """The message with the attendee's PDF ticket attached, when it is to carry one."""
    if ticket is not None:
        registration, logo = ticket
        message.attach(
            ticket_pdf.filename(registration),
            ticket_pdf.render(registration=registration, logo=logo),
            ticket_pdf.CONTENT_TYPE,
        )
    return message


def _permanent(exc: Exception) -> bool:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return True
    if isinstance(exc, smtplib.SMTPResponseException):
        return 500 <= exc.smtp_code < 600
    return False


# What a later attempt can cure: the server down or gone, a timeout, a 4xx reply.
RETRYABLE = (smtplib.SMTPException, OSError)
# What no attempt can cure: Django refuses to build the message (a newline in a header is a
# BadHeaderError, an unparsable address or domain a ValueError / UnicodeError).
UNSENDABLE = (ValueError, TypeError, email.errors.MessageError)


def _retry(row: MailOutbox, exc: Exception, now: datetime, report: DeliveryReport) -> None:
    row.attempts += 1
    row.last_error = f"{type(exc).__name__}: {exc}"[:2000]
    if _permanent(exc) or row.attempts >= MAX_ATTEMPTS:
        row.state = OutboxState.FAILED
        report.failed += 1
        logger.error("mail %s to %s failed: %s", row.message_id, row.recipient, row.last_error)
    else:
        row.next_attempt_at = now + backoff(row.attempts)
        report.retried += 1
        logger.warning(
            "mail %s to %s retried at %s: %s",
            row.message_id,
            row.recipient,
            row.next_attempt_at.isoformat(),
            row.last_error,
        )


def _fail(
    row: MailOutbox, exc: Exception, report: DeliveryReport, *, unexpected: bool = False
) -> None:
    row.state = OutboxState.FAILED
    row.attempts += 1
    row.last_error = f"{type(exc).__name__}: {exc}"[:2000]
    report.failed += 1
    logger.error(
        "outbox row %s (mail %s to %r) cannot be sent, marked failed: %s",
        row.pk,
        row.message_id,
        row.recipient,
        row.last_error,
        exc_info=unexpected,
    )


def deliver_outbox(*, now: datetime | None = None) -> DeliveryReport:
    """Send due queued mails, EVENT_MAIL_BATCH per transaction, at most EVENT_MAIL_CRON_LIMIT.

    Stops at the first batch whose SMTP connection cannot be opened (every row of it is
    rescheduled). When due rows remain, delivery is nudged again after commit.
    """
    now = now or timezone.now()
    report = DeliveryReport()
    budget = settings.EVENT_MAIL_CRON_LIMIT
    while budget > 0:
        size = min(settings.EVENT_MAIL_BATCH, budget)
        with transaction.atomic():
            rows = list(
                MailOutbox.objects.select_for_update(skip_locked=True)
                .filter(state=OutboxState.QUEUED, next_attempt_at__lte=now)
                .order_by("next_attempt_at", "pk")[:size]
            )
            if not rows:
                return report
            budget -= len(rows)
            reachable = _send_batch(rows, now, report)
            MailOutbox.objects.bulk_update(
                rows, ["state", "attempts", "next_attempt_at", "last_error", "sent_at"]
            )
        if not reachable:
            return report
        if len(rows) < size:
            return report
    report.work_remaining = True
    nudge.outbox_delivery()
    return report


def _send_batch(rows: list[MailOutbox], now: datetime, report: DeliveryReport) -> bool:
    """Send the rows over one connection; False when the server could not be reached."""
    tickets = ticket_pdf.attachments(rows)
    connection = get_connection(fail_silently=False)
    try:
        connection.open()
    except RETRYABLE as exc:
        for row in rows:
            _retry(row, exc, now, report)
        return False
    try:
        for row in rows:
            try:
                message = _with_ticket(_message(row, connection), tickets.get(row.pk))
                sent = connection.send_messages([message])
            except RETRYABLE as exc:
                _retry(row, exc, now, report)
                continue
            except UNSENDABLE as exc:
                _fail(row, exc, report)
                continue
            except Exception as exc:  # noqa: BLE001
                # Unforeseen, so not known to be curable: this row fails loudly (traceback)
                # instead of aborting the batch, whose earlier rows are already handed over and
                # must keep their `sent` marks.
                _fail(row, exc, report, unexpected=True)
                continue
            if sent != 1:
                _retry(row, OSError("the backend accepted no message"), now, report)
                continue
            row.state = OutboxState.SENT
            row.attempts += 1
            row.sent_at = timezone.now()
            row.last_error = ""
            report.sent += 1
    finally:
        try:
            connection.close()
        except RETRYABLE as exc:
            logger.warning("closing the mail connection failed: %s", exc)
    return True


REQUEUED = "outgoing_mail.requeued"


def requeue(*, message: MailOutbox, actor: Any) -> MailOutbox:
    """Put a failed outbox mail back in the queue, due now (staff: "retry", after fixing what
    made it fail). Lock, decide, write and audit in one transaction; delivery is nudged after
    commit. Its Message-ID is kept, so a server that did receive it can de-duplicate; attempts
    start again from zero. Only a `failed` row is re-queued (`invalid_transition` otherwise,
    nothing written)."""
    with transaction.atomic():
        row = (
            MailOutbox.objects.select_for_update(of=("self",))
            .select_related("registration", "scheduler")
            .filter(pk=message.pk)
            .first()
        )
        if row is None:
            raise NotFound(f"Outgoing mail {message.pk} does not exist.", mail=message.pk)
        if row.state != OutboxState.FAILED:
            raise InvalidTransition(
                "Only a failed mail is queued again.", mail=row.pk, state=row.state
            )
        row.state = OutboxState.QUEUED
        row.attempts = 0
        row.next_attempt_at = timezone.now()
        row.save(update_fields=["state", "attempts", "next_attempt_at"])
        event_id = (
            row.registration.event_id
            if row.registration is not None
            else (row.scheduler.event_id if row.scheduler is not None else None)
        )
        audit.record(
            actor=actor,
            verb=REQUEUED,
            event=event_id,
            registration=row.registration,
            data={
                "mail": row.pk,
                "message_id": row.message_id,
                "state": [OutboxState.FAILED, OutboxState.QUEUED],
                "last_error": row.last_error[:200],
            },
        )
        nudge.outbox_delivery()
    return row
