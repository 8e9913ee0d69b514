"""The scheduler pass (spec.md §6.2): the only sender.

Invariants:
- Each batch is one transaction that claims its scheduler with `FOR NO KEY UPDATE SKIP
  LOCKED`, renders, hands every message to the queue port and marks the rows sent / advances
  the cursor, so two passes never take the same scheduler and a crash loses nothing and sends
  nothing twice at this layer. A claim is never held across batches.
- Errors are per scheduler: the failing batch is rolled back, the scheduler is parked in error
  (error_datetime / error_message; audit row and ERROR log when the error is new or changed)
  and the pass goes on; a later successful batch clears the error.
- When work remains (the cron limit stopped it) the pass nudges its successor after commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from events import ports
from events.errors import DomainError
from events.models import (
    Event,
    IntervalType,
    KanbanState,
    Mail,
    MailOutcome,
    MailRegistration,
    MailSlot,
    NotificationType,
    Registration,
    RegistrationState,
    Slot,
)
from events.services import audit, nudge, seats
from events.services.contacts import is_valid_email, usable_phone
from events.services.scheduler import dates, verbs

logger = logging.getLogger("events.scheduler")

HOLDING = (RegistrationState.OPEN, RegistrationState.DONE)


@dataclass
class PassReport:
    schedulers_processed: int = 0
    messages_queued: int = 0
    skipped: int = 0  # messages not sent for want of a usable email / phone (not retried)
    errors: int = 0
    schedulers_skipped: int = 0  # stale start-relative reminders marked skipped
    work_remaining: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"schedulers processed: {self.schedulers_processed}, "
            f"messages queued: {self.messages_queued}, skipped: {self.skipped}, "
            f"errors: {self.errors}, schedulers skipped: {self.schedulers_skipped}, "
            f"work remaining: {'yes' if self.work_remaining else 'no'}"
        )


@dataclass
class _Step:
    queued: int = 0
    skipped: int = 0
    schedulers_skipped: int = 0
    more: bool = False

    @property
    def used(self) -> int:
        return self.queued + self.skipped


class _Pass:
    """The state of one pass: its time, budget and the ports it resolved."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.batch = settings.EVENT_MAIL_BATCH
        self.budget = settings.EVENT_MAIL_CRON_LIMIT
        self.report = PassReport()
        self._renderer: ports.EventTemplateRenderer | None = None
        self._mail_queue: ports.EventMailQueue | None = None
        self._sms_queue: ports.EventSmsQueue | None = None

    def renderer(self) -> ports.EventTemplateRenderer:
        if self._renderer is None:
            self._renderer = ports.template_renderer()
        return self._renderer

    def mail_queue(self) -> ports.EventMailQueue:
        if self._mail_queue is None:
            self._mail_queue = ports.mail_queue()
        return self._mail_queue

    def sms_queue(self) -> ports.EventSmsQueue:
        if self._sms_queue is None:
            self._sms_queue = ports.sms_queue()
        return self._sms_queue


def _due(now: datetime) -> Q:
    return (
        Q(event__active=True)
        & ~Q(event__kanban_state=KanbanState.CANCEL)
        & Q(mail_done=False, skipped_reason="", scheduled_date__lte=now)
        & (~Q(interval_type=IntervalType.AFTER_SUB) | Q(event__date_end__gt=now))
    )


def run_pass(*, now: datetime | None = None) -> PassReport:
    """Send what is due: at most EVENT_MAIL_CRON_LIMIT messages, in EVENT_MAIL_BATCH batches.

    When work remains the pass nudges its successor after commit.
    """
    ctx = _Pass(now or timezone.now())
    due = list(
        Mail.objects.filter(_due(ctx.now))
        .order_by("scheduled_date", "pk")
        .values_list("pk", flat=True)
    )
    for mail_id in due:
        if ctx.budget <= 0:
            ctx.report.work_remaining = True
            break
        _run_scheduler(ctx, mail_id)
    if ctx.report.work_remaining:
        nudge.scheduler_pass()
    return ctx.report


def _claim(mail_id: int, now: datetime) -> Mail | None:
    return (
        Mail.objects.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .select_related("event")
        .filter(_due(now), pk=mail_id)
        .first()
    )


def _run_scheduler(ctx: _Pass, mail_id: int) -> None:
    first = True
    while True:
        try:
            with transaction.atomic():
                mail = _claim(mail_id, ctx.now)
                if mail is None:
                    return  # taken by another pass, or no longer due
                step = _step(ctx, mail, first=first)
        # Any failure of a port, a template or the data parks this scheduler loudly (error
        # state, audit row, ERROR log) and the pass goes on with the others; the rolled-back
        # batch is retried on the next pass.
        except Exception as exc:  # noqa: BLE001
            _park(ctx, mail_id, exc)
            return
        if first:
            ctx.report.schedulers_processed += 1
            first = False
        ctx.budget -= step.used
        ctx.report.messages_queued += step.queued
        ctx.report.skipped += step.skipped
        ctx.report.schedulers_skipped += step.schedulers_skipped
        if not step.more:
            return
        if ctx.budget <= 0:
            ctx.report.work_remaining = True
            return


def _park(ctx: _Pass, mail_id: int, exc: Exception) -> None:
    """Put the scheduler in error. The audit row and the ERROR log are written when it enters
    error or its error changes; a pass that meets the same error again only moves
    `error_datetime` and logs a WARNING, so a scheduler broken for days is not an audit row and
    an ERROR a minute."""
    code = exc.code if isinstance(exc, DomainError) else type(exc).__name__
    message = exc.message if isinstance(exc, DomainError) else str(exc)
    error_message = f"[{code}] {message}"[:2000]
    ctx.report.errors += 1
    with transaction.atomic():
        mail = (
            Mail.objects.select_for_update(no_key=True, of=("self",))
            .filter(pk=mail_id)
            .only("pk", "event_id", "template_ref", "error_datetime", "error_message")
            .first()
        )
        if mail is None:
            return
        repeated = mail.error_datetime is not None and mail.error_message == error_message
        Mail.objects.filter(pk=mail_id).update(error_datetime=ctx.now, error_message=error_message)
        if not repeated:
            audit.record(
                actor=audit.SYSTEM,
                verb="scheduler.error",
                event=mail.event_id,
                data={"scheduler": mail_id, "code": code, "message": message[:500]},
            )
    if repeated:
        logger.warning(
            "scheduler %s (event %s, template %s) still in error: [%s] %s",
            mail_id,
            mail.event_id,
            mail.template_ref,
            code,
            message,
        )
        return
    logger.error(
        "scheduler %s (event %s, template %s) parked in error: [%s] %s",
        mail_id,
        mail.event_id,
        mail.template_ref,
        code,
        message,
        exc_info=not isinstance(exc, DomainError | ImproperlyConfigured),
    )


def _step(ctx: _Pass, mail: Mail, *, first: bool) -> _Step:
    limit = min(ctx.batch, ctx.budget)
    if mail.interval_type == IntervalType.AFTER_SUB:
        step, fields = _step_after_sub(ctx, mail, limit, first=first)
    elif mail.event.is_multi_slots:
        step, fields = _step_slots(ctx, mail, limit, first=first)
    else:
        step, fields = _step_event(ctx, mail, limit)
    if mail.error_datetime is not None:
        fields.update(error_datetime=None, error_message="")
        audit.record(
            actor=audit.SYSTEM,
            verb="scheduler.recovered",
            event=mail.event_id,
            data={"scheduler": mail.pk, "error": mail.error_message[:500]},
        )
    if fields:
        Mail.objects.filter(pk=mail.pk).update(**fields)
    return step


def _send(
    ctx: _Pass,
    mail: Mail,
    registrations: Sequence[Registration],
    key: Callable[[Registration], str],
    slot: Slot | None = None,
) -> dict[int, str]:
    """Render and enqueue one batch; returns {registration id: outcome}."""
    renderer = ctx.renderer()
    verbs.check_channel(renderer, mail.template_ref, mail.notification_type)
    event = mail.event
    outcomes: dict[int, str] = {}
    mails: list[ports.OutgoingMail] = []
    texts: list[ports.OutgoingSms] = []
    sms = mail.notification_type == NotificationType.SMS
    for reg in registrations:
        reg.event = event
        if sms:
            recipient = usable_phone(reg.phone, country=event.country)
            if recipient is None:
                outcomes[reg.pk] = MailOutcome.SKIPPED_NO_PHONE
                continue
        else:
            recipient = reg.email.strip()
            if not recipient or not is_valid_email(recipient):
                outcomes[reg.pk] = MailOutcome.SKIPPED_NO_EMAIL
                continue
        rendered = renderer.render(template_ref=mail.template_ref, registration=reg, slot=slot)
        if sms:
            texts.append(
                ports.OutgoingSms(
                    idempotency_key=key(reg),
                    recipient=recipient,
                    body=rendered.body_text,
                    scheduler_id=mail.pk,
                    registration_id=reg.pk,
                )
            )
        else:
            mails.append(
                ports.OutgoingMail(
                    idempotency_key=key(reg),
                    recipient=recipient,
                    subject=rendered.subject,
                    body_text=rendered.body_text,
                    body_html=rendered.body_html,
                    scheduler_id=mail.pk,
                    registration_id=reg.pk,
                )
            )
        outcomes[reg.pk] = MailOutcome.SENT
    if registrations and sms:
        ctx.sms_queue().enqueue_many(messages=texts)
    elif registrations:
        ctx.mail_queue().enqueue_many(messages=mails)
    return outcomes


def _tally(outcomes: dict[int, str]) -> tuple[int, int]:
    queued = sum(1 for o in outcomes.values() if o == MailOutcome.SENT)
    return queued, len(outcomes) - queued


def _audit_batch(mail: Mail, data: dict[str, Any]) -> None:
    audit.record(
        actor=audit.SYSTEM,
        verb="scheduler.sent",
        event=mail.event_id,
        data={"scheduler": mail.pk, **data},
    )


# after_sub -------------------------------------------------------------------------------------


def _sweep_after_sub(mail: Mail) -> int:
    """Create the missing attendee rows and drop unsent rows of draft/cancelled registrations.

    Rows are normally created in the registration transaction (`verbs.registrations_opened`);
    this sweep catches the rest (a new scheduler, `include_existing`). `last_registration_id` is the
    sweep's cursor on after_sub schedulers. Returns the number of rows dropped.
    """
    top = Registration.objects.filter(event_id=mail.event_id).aggregate(top=Max("pk"))["top"] or 0
    if top > mail.last_registration_id:
        # One set-based insert behind the unique (scheduler, registration) index; raw SQL
        # because the ORM has no INSERT … SELECT. The interval is PostgreSQL's own arithmetic
        # (same month clamping as relativedelta).
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO {MailRegistration._meta.db_table}
                    (scheduler_id, registration_id, scheduled_date, mail_sent, outcome)
                SELECT %(mail)s, r.id, COALESCE(r.confirmed_at, r.created_at) + %(delta)s::interval,
                       false, ''
                FROM {Registration._meta.db_table} r
                WHERE r.event_id = %(event)s AND r.id > %(cursor)s AND r.id <= %(top)s
                  AND r.active AND r.state IN ('open', 'done')
                  AND (%(include)s OR COALESCE(r.confirmed_at, r.created_at) >= %(created)s)
                ORDER BY r.id
                ON CONFLICT (scheduler_id, registration_id) DO NOTHING
                """,  # noqa: S608 — table names from model meta; values are parameters
                {
                    "mail": mail.pk,
                    "delta": dates.pg_interval(mail.interval_nbr, mail.interval_unit),
                    "event": mail.event_id,
                    "cursor": mail.last_registration_id,
                    "top": top,
                    "include": mail.include_existing,
                    "created": mail.created_at,
                },
            )
        mail.last_registration_id = top
    dropped, _ = (
        MailRegistration.objects.filter(scheduler=mail, mail_sent=False)
        .filter(
            Q(registration__state__in=(RegistrationState.DRAFT, RegistrationState.CANCEL))
            | Q(registration__active=False)
        )
        .delete()
    )
    return dropped


def _step_after_sub(
    ctx: _Pass, mail: Mail, limit: int, *, first: bool
) -> tuple[_Step, dict[str, Any]]:
    fields: dict[str, Any] = {}
    dropped = 0
    if first:
        cursor = mail.last_registration_id
        dropped = _sweep_after_sub(mail)
        if mail.last_registration_id != cursor:
            fields["last_registration_id"] = mail.last_registration_id
    # No ORDER BY: every due row goes out in this pass unless the cron limit stops it, and an
    # unordered LIMIT lets PostgreSQL stop after `limit` rows instead of sorting every unsent
    # row of the scheduler on each batch (which made a 100k-attendee pass quadratic).
    rows = list(
        MailRegistration.objects.filter(
            scheduler=mail,
            mail_sent=False,
            scheduled_date__lte=ctx.now,
            registration__state__in=HOLDING,
            registration__active=True,
        )
        .select_related("registration", "registration__ticket", "registration__slot")
        .order_by()[:limit]
    )
    registrations = [row.registration for row in rows]
    outcomes = _send(ctx, mail, registrations, key=lambda reg: f"s{mail.pk}-r{reg.pk}")
    by_outcome: dict[str, list[int]] = {}
    for row in rows:
        by_outcome.setdefault(outcomes[row.registration_id], []).append(row.pk)
    for outcome, ids in by_outcome.items():
        MailRegistration.objects.filter(pk__in=ids).update(
            mail_sent=True, sent_at=ctx.now, outcome=outcome
        )
    queued, skipped = _tally(outcomes)
    if rows:
        fields["mail_count_done"] = F("mail_count_done") + len(rows)
    if rows or dropped:
        _audit_batch(mail, {"queued": queued, "skipped": skipped, "rows_dropped": dropped})
    return _Step(queued=queued, skipped=skipped, more=len(rows) == limit), fields


# event-based, single slot ----------------------------------------------------------------------


def _step_event(ctx: _Pass, mail: Mail, limit: int) -> tuple[_Step, dict[str, Any]]:
    event = mail.event
    if dates.is_stale(mail, event.date_end, ctx.now):
        if mail.mail_count_done:
            # Partly sent before the event ended: close it, reminding now makes no sense.
            _audit_batch(mail, {"queued": 0, "skipped": 0, "done": True, "closed": "ended"})
            return _Step(), {"mail_done": True}
        reason = dates.stale_reason(mail, event.date_end, dates.due(mail))
        audit.record(
            actor=audit.SYSTEM,
            verb="scheduler.skipped",
            event=event,
            data={"scheduler": mail.pk, "reason": reason},
        )
        return _Step(schedulers_skipped=1), {"skipped_reason": reason}
    registrations = list(
        Registration.objects.filter(
            event=event, active=True, state__in=HOLDING, pk__gt=mail.last_registration_id
        )
        .select_related("ticket", "slot")
        .order_by("pk")[:limit]
    )
    stamp = int(dates.due(mail).timestamp())
    outcomes = _send(ctx, mail, registrations, key=lambda reg: f"s{mail.pk}-r{reg.pk}-{stamp}")
    queued, skipped = _tally(outcomes)
    count = mail.mail_count_done + len(registrations)
    more = len(registrations) == limit
    done = not more and count >= seats.event_summary(event=event).taken
    fields: dict[str, Any] = {"mail_count_done": count, "mail_done": done}
    if registrations:
        fields["last_registration_id"] = registrations[-1].pk
    if registrations or done:
        _audit_batch(mail, {"queued": queued, "skipped": skipped, "done": done})
    return _Step(queued=queued, skipped=skipped, more=more), fields


# event-based, multi-slot -----------------------------------------------------------------------


def _ensure_slot_rows(mail: Mail) -> None:
    slots = list(Slot.objects.filter(event_id=mail.event_id))
    have = set(MailSlot.objects.filter(scheduler=mail).values_list("slot_id", flat=True))
    missing = [
        MailSlot(scheduler=mail, slot=slot, scheduled_date=dates.slot_date(mail, slot))
        for slot in slots
        if slot.pk not in have
    ]
    if missing:
        MailSlot.objects.bulk_create(missing, ignore_conflicts=True)


def _slot_taken(event: Event) -> dict[int | None, int]:
    """Seats taken per slot, from the seat module."""
    taken: dict[int | None, int] = {}
    for (slot_id, _ticket_id), numbers in seats.ticket_summaries(event=event).items():
        taken[slot_id] = taken.get(slot_id, 0) + numbers["taken"]
    return taken


def _step_slots(ctx: _Pass, mail: Mail, limit: int, *, first: bool) -> tuple[_Step, dict]:
    event = mail.event
    if first:
        _ensure_slot_rows(mail)
    rows = list(
        MailSlot.objects.filter(scheduler=mail, mail_done=False)
        .select_related("slot")
        .order_by("scheduled_date", "pk")
    )
    step = _Step()
    taken: dict[int | None, int] | None = None
    skipped_slots = 0
    for row in rows:
        if dates.due(row) > ctx.now or step.used >= limit:
            continue
        slot = row.slot
        if dates.is_stale(mail, slot.end_datetime, ctx.now):
            row.mail_done = True
            MailSlot.objects.filter(pk=row.pk).update(mail_done=True)
            skipped_slots += row.mail_count_done == 0
            audit.record(
                actor=audit.SYSTEM,
                verb="scheduler.slot_skipped",
                event=event,
                data={
                    "scheduler": mail.pk,
                    "slot": slot.pk,
                    "reason": dates.stale_reason(mail, slot.end_datetime, dates.due(row)),
                },
            )
            continue
        registrations = list(
            Registration.objects.filter(
                event=event,
                slot=slot,
                active=True,
                state__in=HOLDING,
                pk__gt=row.last_registration_id,
            )
            .select_related("ticket", "slot")
            .order_by("pk")[: limit - step.used]
        )
        stamp = int(dates.due(row).timestamp())

        def key(reg: Registration, s: int = slot.pk, t: int = stamp) -> str:
            return f"s{mail.pk}-r{reg.pk}-slot{s}-{t}"

        outcomes = _send(
            ctx,
            mail,
            registrations,
            key=key,
            slot=slot,
        )
        queued, skipped = _tally(outcomes)
        step.queued += queued
        step.skipped += skipped
        row.mail_count_done += len(registrations)
        if registrations:
            row.last_registration_id = registrations[-1].pk
        if step.used < limit:  # this slot's walk is exhausted
            if taken is None:
                taken = _slot_taken(event)
            row.mail_done = row.mail_count_done >= taken.get(slot.pk, 0)
        MailSlot.objects.filter(pk=row.pk).update(
            mail_count_done=row.mail_count_done,
            last_registration_id=row.last_registration_id,
            mail_done=row.mail_done,
        )
        if registrations or row.mail_done:
            _audit_batch(
                mail,
                {"slot": slot.pk, "queued": queued, "skipped": skipped, "done": row.mail_done},
            )
    pending = [row for row in rows if not row.mail_done]
    step.more = step.used >= limit and any(dates.due(row) <= ctx.now for row in pending)
    fields: dict[str, Any] = {"mail_count_done": F("mail_count_done") + step.used}
    if pending:
        fields["scheduled_date"] = min(dates.due(row) for row in pending)
    else:
        fields["mail_done"] = True
        if skipped_slots and mail.mail_count_done + step.used == 0:
            fields["skipped_reason"] = "Every slot ended before this reminder could be sent."
            step.schedulers_skipped = 1
    return step, fields
