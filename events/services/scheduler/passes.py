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
- A batch costs the same few statements whatever its size (docs/benchmarks.md "B3 profile"):
  its registrations in one read (an ordered index range per state, never a sort of the rest),
  rendered through the renderer's `render_many` when it has one (the built-in store's compiled
  plans), handed to the queue at once (the built-in outboxes: one INSERT … SELECT FROM unnest).
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
    Ticket,
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


# What the pass and the built-in renderer read of a registration (its links need the id and
# token_version); a renderer reading another field loads it on access.
LOADED_FIELDS = (
    "id",
    "event_id",
    "ticket_id",
    "slot_id",
    "state",
    "name",
    "email",
    "phone",
    "company_name",
    "barcode",
    "token_version",
    "lang",  # every message is rendered in the registration's language
)


def _load(rows: list[Registration], event: Event) -> list[Registration]:
    """Attach the event, ticket and slot to one batch of registrations: at most one query each
    for their tickets and slots (a handful per event), instead of a joined copy of the ticket
    and slot on every row."""
    tickets = _related(Ticket, {reg.ticket_id for reg in rows})
    slots = _related(Slot, {reg.slot_id for reg in rows})
    for reg in rows:
        reg.event = event
        if reg.ticket_id is not None:  # a null foreign key reads as None without a query
            reg.ticket = tickets[reg.ticket_id]
        if reg.slot_id is not None:
            reg.slot = slots[reg.slot_id]
    return rows


def _walk(event: Event, cursor: int, limit: int, **filters: Any) -> list[Registration]:
    """The next `limit` registrations of the event in open/done with id > cursor, ascending.

    One ordered range of the (event, state, id) index per state, merged: `state IN (…)` on
    that index cannot give rows in id order, and PostgreSQL then sorts every remaining
    registration of the event on each batch (a 100k-attendee pass turned quadratic)."""
    parts = [
        Registration.objects.filter(event=event, active=True, state=state, pk__gt=cursor, **filters)
        .only(*LOADED_FIELDS)
        .order_by("pk")[:limit]
        for state in HOLDING
    ]
    return _load(list(parts[0].union(*parts[1:], all=True).order_by("pk")[:limit]), event)


def _related(model: type[Ticket] | type[Slot], ids: set[int | None]) -> dict:
    ids.discard(None)
    return model.objects.in_bulk(ids) if ids else {}


def _render(
    renderer: ports.EventTemplateRenderer,
    template_ref: str,
    registrations: Sequence[Registration],
    slot: Slot | None,
) -> list[ports.RenderedMessage]:
    # A renderer that renders a batch at once (the built-in store's compiled plans) says so by
    # having `render_many`; any other renders per registration.
    many = getattr(renderer, "render_many", None)
    if many is not None:
        return many(template_ref=template_ref, registrations=registrations, slot=slot)
    return [
        renderer.render(template_ref=template_ref, registration=reg, slot=slot)
        for reg in registrations
    ]


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
    sms = mail.notification_type == NotificationType.SMS
    targets: list[Registration] = []
    recipients: list[str] = []
    for reg in registrations:
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
        targets.append(reg)
        recipients.append(recipient)
        outcomes[reg.pk] = MailOutcome.SENT
    rendered = _render(renderer, mail.template_ref, targets, slot)
    if sms and registrations:
        ctx.sms_queue().enqueue_many(
            messages=[
                ports.OutgoingSms(
                    idempotency_key=key(reg),
                    recipient=recipient,
                    body=message.body_text,
                    scheduler_id=mail.pk,
                    registration_id=reg.pk,
                )
                for reg, recipient, message in zip(targets, recipients, rendered, strict=True)
            ]
        )
    elif registrations:
        ctx.mail_queue().enqueue_many(
            messages=[
                ports.OutgoingMail(
                    idempotency_key=key(reg),
                    recipient=recipient,
                    subject=message.subject,
                    body_text=message.body_text,
                    body_html=message.body_html,
                    scheduler_id=mail.pk,
                    registration_id=reg.pk,
                )
                for reg, recipient, message in zip(targets, recipients, rendered, strict=True)
            ]
        )
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
    # The registrations of due unsent rows, with each row's id to mark it by primary key (by
    # (scheduler, registration) PostgreSQL may scan every row of the scheduler per batch).
    # No ORDER BY: every due row goes out in this pass unless the cron limit stops it, and an
    # unordered LIMIT lets PostgreSQL stop after `limit` rows instead of sorting every unsent
    # row of the scheduler on each batch (which made a 100k-attendee pass quadratic).
    registrations = _load(
        list(
            Registration.objects.filter(
                mail_rows__scheduler=mail,
                mail_rows__mail_sent=False,
                mail_rows__scheduled_date__lte=ctx.now,
                state__in=HOLDING,
                active=True,
            )
            .annotate(row_id=F("mail_rows__id"))
            .only(*LOADED_FIELDS)
            .order_by()[:limit]
        ),
        mail.event,
    )
    outcomes = _send(ctx, mail, registrations, key=lambda reg: f"s{mail.pk}-r{reg.pk}")
    by_outcome: dict[str, list[int]] = {}
    for reg in registrations:
        row_id = reg.row_id  # type: ignore[attr-defined]  # the annotation above
        by_outcome.setdefault(outcomes[reg.pk], []).append(row_id)
    for outcome, ids in by_outcome.items():
        MailRegistration.objects.filter(pk__in=ids).update(
            mail_sent=True, sent_at=ctx.now, outcome=outcome
        )
    queued, skipped = _tally(outcomes)
    if registrations:
        fields["mail_count_done"] = F("mail_count_done") + len(registrations)
    if registrations or dropped:
        _audit_batch(mail, {"queued": queued, "skipped": skipped, "rows_dropped": dropped})
    return _Step(queued=queued, skipped=skipped, more=len(registrations) == limit), fields


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
    registrations = _walk(event, mail.last_registration_id, limit)
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
        registrations = _walk(event, row.last_registration_id, limit - step.used, slot=slot)
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
