"""Communication schedulers (spec.md §6): the pass, the scheduled dates, the template cascade.

Invariants:
- `run_pass` is the only sender. Each batch is one transaction that claims its scheduler with
  `FOR NO KEY UPDATE SKIP LOCKED`, renders, hands every message to the queue port and marks the
  rows sent / advances the cursor, so two passes never take the same scheduler and a crash
  loses nothing and sends nothing twice at this layer. A claim is never held across batches.
- Errors are per scheduler: the failing batch is rolled back, the scheduler is parked in error
  (error_datetime / error_message; audit row and ERROR log when the error is new or changed)
  and the pass goes on; a later successful batch clears the error.
- This module owns every scheduled date; `reschedule` re-arms sent start/end reminders whose
  new date lies in the future. Nudges of the pass go out after commit (`nudge`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from events import ports
from events.errors import DomainError, ValidationFailed
from events.models import (
    Event,
    IntervalType,
    IntervalUnit,
    KanbanState,
    Mail,
    MailOutcome,
    MailRegistration,
    MailSlot,
    NotificationType,
    Registration,
    RegistrationState,
    Slot,
    TypeMail,
)
from events.services import audit, intervals, locks, nudge, seats
from events.services.contacts import is_valid_email, usable_phone

logger = logging.getLogger("events.scheduler")

HOLDING = (RegistrationState.OPEN, RegistrationState.DONE)
START_RELATIVE = (IntervalType.BEFORE_EVENT, IntervalType.AFTER_EVENT_START)
# A date armed within this window gets a nudge; later dates are found by beat (every minute).
ARM_WINDOW = timedelta(minutes=1)


# --- scheduled dates -----------------------------------------------------------------------


def _date_for(mail: Mail | TypeMail, *, begin: datetime, end: datetime) -> datetime:
    return intervals.scheduled_date(
        interval_type=mail.interval_type,
        interval_nbr=mail.interval_nbr,
        interval_unit=mail.interval_unit,
        created_at=getattr(mail, "created_at", None) or timezone.now(),
        begin=begin,
        end=end,
    )


def _slot_date(mail: Mail, slot: Slot) -> datetime:
    return _date_for(mail, begin=slot.start_datetime, end=slot.end_datetime)


def _mail_date(mail: Mail, event: Event, slots: Sequence[Slot]) -> datetime:
    """The scheduler's own date; on a multi-slot event the earliest of its slots' dates.

    A multi-slot event without slots yet gets a lower bound of any future slot's date (every
    slot starts and ends after the event's begin), so no slot is ever gated late.
    """
    if mail.interval_type == IntervalType.AFTER_SUB or not event.is_multi_slots:
        return _date_for(mail, begin=event.date_begin, end=event.date_end)
    if slots:
        return min(_slot_date(mail, slot) for slot in slots)
    return _date_for(mail, begin=event.date_begin, end=event.date_begin)


def add_scheduler(
    *,
    event: Event,
    interval_nbr: int,
    interval_unit: str,
    interval_type: str,
    template_ref: str,
    notification_type: str = "mail",
    include_existing: bool = False,
    actor: Any,
    sequence: int = 10,
) -> Mail:
    """Create a scheduler, compute its date, and nudge the pass when it is due within a minute.

    The template must exist in the wired template store and match `notification_type`.
    """
    if interval_unit not in IntervalUnit.values:
        raise ValidationFailed(f"Unknown unit {interval_unit!r}.", code="invalid_value")
    if interval_type not in IntervalType.values:
        raise ValidationFailed(f"Unknown interval type {interval_type!r}.", code="invalid_value")
    if notification_type not in NotificationType.values:
        raise ValidationFailed(
            f"Unknown notification type {notification_type!r}.", code="invalid_value"
        )
    if include_existing and interval_type != IntervalType.AFTER_SUB:
        raise ValidationFailed(
            "include_existing only applies to after_sub schedulers.", code="invalid_value"
        )
    template_ref = (template_ref or "").strip()
    if not template_ref:
        raise ValidationFailed("A template is required.", code="invalid_value")
    _check_channel(ports.template_renderer(), template_ref, notification_type)
    with transaction.atomic():
        event = locks.lock_event(event.pk)
        now = timezone.now()
        mail = Mail(
            event=event,
            sequence=sequence,
            interval_nbr=interval_nbr,
            interval_unit=interval_unit,
            interval_type=interval_type,
            template_ref=template_ref,
            notification_type=notification_type,
            include_existing=include_existing,
            created_at=now,
        )
        slots = list(event.slots.all()) if event.is_multi_slots else []
        mail.scheduled_date = _mail_date(mail, event, slots)
        mail.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="scheduler.created",
            event=event,
            data={
                "scheduler": mail.pk,
                "interval": [interval_nbr, interval_unit, interval_type],
                "template_ref": mail.template_ref,
                "notification_type": notification_type,
                "scheduled_date": mail.scheduled_date.isoformat(),
            },
        )
        if mail.scheduled_date <= now + ARM_WINDOW:
            nudge.scheduler_pass()
    return mail


def delete_scheduler(*, scheduler: Mail, actor: Any) -> None:
    """Delete one scheduler (its attendee and slot rows go with it); audited."""
    with transaction.atomic():
        mail = (
            Mail.objects.select_for_update(of=("self",))
            .filter(pk=scheduler.pk)
            .only("pk", "event_id", "template_ref", "interval_type")
            .first()
        )
        if mail is None:
            return
        audit.record(
            actor=actor,
            verb="scheduler.deleted",
            event=mail.event_id,
            data={"scheduler": mail.pk, "template_ref": mail.template_ref},
        )
        mail.delete()


def reschedule(*, event: Event, now: datetime | None = None) -> int:
    """Recompute the event's scheduled dates after a change of its (or its slots') times.

    A start/end-relative scheduler that was sent, even partly (done, or its cursor already
    moved), or skipped as stale, is re-armed (cursor and count reset, so every attendee gets it
    for the new date) when its date changed and the new date lies in the future; on multi-slot
    events the same holds per slot. Runs inside the caller's transaction (which holds the Event
    lock). Returns the number of schedulers re-armed.
    """
    now = now or timezone.now()
    mails = list(
        Mail.objects.select_for_update(no_key=True, of=("self",))
        .filter(event=event)
        .exclude(interval_type=IntervalType.AFTER_SUB)
        .order_by("pk")
    )
    slots = list(event.slots.all()) if event.is_multi_slots else []
    slot_rows = {
        (row.scheduler_id, row.slot_id): row for row in MailSlot.objects.filter(scheduler__in=mails)
    }
    rearmed = 0
    arm_soon = False
    entries = []
    for mail in mails:
        new_date = _mail_date(mail, event, slots)
        fields: dict[str, Any] = {}
        rearm = False
        if slots:
            pending = []
            kept = 0  # messages counted on slots that stay done
            for slot in slots:
                slot_date = _slot_date(mail, slot)
                row = slot_rows.get((mail.pk, slot.pk))
                if row is None:
                    pending.append(slot_date)  # the pass creates its row
                    continue
                row_fields: dict[str, Any] = {}
                if slot_date != row.scheduled_date:
                    row_fields["scheduled_date"] = slot_date
                    if _has_sent(row) and slot_date > now:
                        row_fields.update(
                            mail_done=False, mail_count_done=0, last_registration_id=0
                        )
                        rearm = True
                if row_fields:
                    MailSlot.objects.filter(pk=row.pk).update(**row_fields)
                kept += row_fields.get("mail_count_done", row.mail_count_done)
                if not row_fields.get("mail_done", row.mail_done):
                    pending.append(slot_date)
            if pending:
                new_date = min(pending)
                if mail.mail_done or mail.skipped_reason:
                    fields.update(mail_done=False, skipped_reason="")
                    rearm = True
            if rearm:
                fields["mail_count_done"] = kept
        elif (
            (_has_sent(mail) or mail.skipped_reason)
            and new_date != mail.scheduled_date
            and new_date > now
        ):
            fields.update(
                mail_done=False, mail_count_done=0, last_registration_id=0, skipped_reason=""
            )
            rearm = True
        if new_date != mail.scheduled_date:
            fields["scheduled_date"] = new_date
        if not fields:
            continue
        done = fields.get("mail_done", mail.mail_done)
        if not done and new_date <= now + ARM_WINDOW:
            arm_soon = True
        if rearm:
            rearmed += 1
            entries.append(
                audit.entry(
                    actor=audit.SYSTEM,
                    verb="scheduler.rearmed",
                    event=event,
                    data={"scheduler": mail.pk, "scheduled_date": new_date.isoformat()},
                )
            )
        Mail.objects.filter(pk=mail.pk).update(**fields)
    audit.record_many(entries)
    if arm_soon:
        nudge.scheduler_pass()
    return rearmed


def _has_sent(row: Mail | MailSlot) -> bool:
    """Done, or part of the walk already went out (attendees reminded for the current date)."""
    return row.mail_done or row.mail_count_done > 0 or row.last_registration_id > 0


# --- template cascade (spec.md §6.3) ----------------------------------------------------------


def on_template_deleted(*, template_ref: str, actor: Any = audit.SYSTEM) -> int:
    """Delete every Mail and TypeMail that references the template (audited); the count.

    The only cascade of the project; the built-in store calls it in its delete transaction.
    """
    with transaction.atomic():
        mails = list(
            Mail.objects.select_for_update(of=("self",))
            .filter(template_ref=template_ref)
            .order_by("pk")
            .values("pk", "event_id", "interval_type", "notification_type")
        )
        lines = list(
            TypeMail.objects.select_for_update()
            .filter(template_ref=template_ref)
            .order_by("pk")
            .values("pk", "event_type_id", "interval_type", "notification_type")
        )
        entries = [
            audit.entry(
                actor=actor,
                verb="scheduler.deleted",
                event=m["event_id"],
                data={
                    "scheduler": m["pk"],
                    "template_ref": template_ref,
                    "reason": "template_deleted",
                    "interval_type": m["interval_type"],
                },
            )
            for m in mails
        ] + [
            audit.entry(
                actor=actor,
                verb="type_scheduler.deleted",
                data={
                    "type_mail": line["pk"],
                    "event_type": line["event_type_id"],
                    "template_ref": template_ref,
                    "reason": "template_deleted",
                },
            )
            for line in lines
        ]
        if mails:
            Mail.objects.filter(pk__in=[m["pk"] for m in mails]).delete()
        if lines:
            TypeMail.objects.filter(pk__in=[line["pk"] for line in lines]).delete()
        audit.record_many(entries)
    return len(mails) + len(lines)


# --- the pass (spec.md §6.2) ------------------------------------------------------------------


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
        self._queues: dict[str, Any] = {}

    def renderer(self) -> ports.EventTemplateRenderer:
        if self._renderer is None:
            self._renderer = ports.template_renderer()
        return self._renderer

    def queue(self, channel: str) -> ports.EventMailQueue | ports.EventSmsQueue:
        if channel not in self._queues:
            self._queues[channel] = (
                ports.sms_queue() if channel == NotificationType.SMS else ports.mail_queue()
            )
        return self._queues[channel]


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


def _check_channel(
    renderer: ports.EventTemplateRenderer, template_ref: str, notification_type: str
) -> None:
    channel = renderer.channel(template_ref=template_ref)  # TemplateMissing when absent
    if channel != notification_type:
        raise ValidationFailed(
            f"Template {template_ref!r} is a {channel} template; the scheduler sends "
            f"{notification_type}.",
            code="invalid_value",
            template_ref=template_ref,
        )


def _send(
    ctx: _Pass,
    mail: Mail,
    registrations: Sequence[Registration],
    key: Callable[[Registration], str],
    slot: Slot | None = None,
) -> dict[int, str]:
    """Render and enqueue one batch; returns {registration id: outcome}."""
    renderer = ctx.renderer()
    _check_channel(renderer, mail.template_ref, mail.notification_type)
    queue = ctx.queue(mail.notification_type)
    event = mail.event
    outcomes: dict[int, str] = {}
    messages: list[ports.OutgoingMail | ports.OutgoingSms] = []
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
            messages.append(
                ports.OutgoingSms(
                    idempotency_key=key(reg),
                    recipient=recipient,
                    body=rendered.body_text,
                    scheduler_id=mail.pk,
                    registration_id=reg.pk,
                )
            )
        else:
            messages.append(
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
    if registrations:
        if sms:
            queue.enqueue_many(messages=messages)
        else:
            queue.enqueue_many(mails=messages)
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

    Rows are normally created in the registration transaction (scheduler_rows); this sweep
    catches the rest (a new scheduler, `include_existing`). `last_registration_id` is the
    sweep's cursor on after_sub schedulers. Returns the number of rows dropped.
    """
    top = Registration.objects.filter(event_id=mail.event_id).aggregate(top=Max("pk"))["top"] or 0
    if top > mail.last_registration_id:
        delta = intervals.delta(mail.interval_nbr, mail.interval_unit)
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
                    "delta": _pg_interval(delta),
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


def _pg_interval(delta) -> str:
    parts = [
        f"{value} {unit}"
        for unit, value in (
            ("months", delta.months),
            ("days", delta.days),
            ("hours", delta.hours),
            ("years", delta.years),
        )
        if value
    ]
    return " ".join(parts) or "0"


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


def _stale(mail: Mail, end: datetime, now: datetime) -> bool:
    """A start-relative reminder reached only after the event (or slot) ended."""
    return mail.interval_type in START_RELATIVE and now >= end


def _skip_reason(mail: Mail, end: datetime, scheduled: datetime) -> str:
    return (
        f"The event ended ({end:%Y-%m-%d %H:%M} UTC) before this {mail.interval_type} "
        f"reminder (due {scheduled:%Y-%m-%d %H:%M} UTC) could be sent."
    )


def _step_event(ctx: _Pass, mail: Mail, limit: int) -> tuple[_Step, dict[str, Any]]:
    event = mail.event
    if _stale(mail, event.date_end, ctx.now):
        if mail.mail_count_done:
            # Partly sent before the event ended: close it, reminding now makes no sense.
            _audit_batch(mail, {"queued": 0, "skipped": 0, "done": True, "closed": "ended"})
            return _Step(), {"mail_done": True}
        reason = _skip_reason(mail, event.date_end, mail.scheduled_date)
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
    stamp = int(mail.scheduled_date.timestamp())
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
        MailSlot(scheduler=mail, slot=slot, scheduled_date=_slot_date(mail, slot))
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
        if row.scheduled_date > ctx.now or step.used >= limit:
            continue
        slot = row.slot
        if _stale(mail, slot.end_datetime, ctx.now):
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
                    "reason": _skip_reason(mail, slot.end_datetime, row.scheduled_date),
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
        stamp = int(row.scheduled_date.timestamp())
        outcomes = _send(
            ctx,
            mail,
            registrations,
            key=lambda reg, s=slot.pk, t=stamp: f"s{mail.pk}-r{reg.pk}-slot{s}-{t}",
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
    step.more = step.used >= limit and any(row.scheduled_date <= ctx.now for row in pending)
    fields: dict[str, Any] = {"mail_count_done": F("mail_count_done") + step.used}
    if pending:
        fields["scheduled_date"] = min(row.scheduled_date for row in pending)
    else:
        fields["mail_done"] = True
        if skipped_slots and mail.mail_count_done + step.used == 0:
            fields["skipped_reason"] = "Every slot ended before this reminder could be sent."
            step.schedulers_skipped = 1
    return step, fields
