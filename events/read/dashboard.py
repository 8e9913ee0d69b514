"""Reads behind the event dashboard (events.admin.dashboard): plain numbers, no HTML.

Invariants:
- seat numbers come from `events.services.seats` only (the one seat aggregation);
- every function runs a constant number of queries whatever the number of registrations
  (grouped aggregates, never a loop over registrations); the number of tickets, slots and
  schedulers of one event is small and bounded by staff, not by attendees;
- days are calendar days in the event's own time zone (`Event.date_tz`).
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field
from datetime import date, datetime

from django.db.models import Count, Min, Q
from django.db.models.functions import TruncDate

from events.models import (
    Event,
    Mail,
    MailOutbox,
    MailOutcome,
    MailRegistration,
    MailSlot,
    OutboxState,
    Registration,
    RegistrationState,
    WaitlistEntry,
    WaitlistState,
)
from events.read import selectors
from events.services import seats


@dataclass(frozen=True)
class SeatBar:
    """One bar of a seat chart: seats taken and still available (None = unlimited)."""

    label: str
    taken: int
    available: int | None


@dataclass(frozen=True)
class SeatFigures:
    per_ticket: list[SeatBar]
    per_slot: list[SeatBar]
    taken: int
    available: int | None


def seat_figures(*, event: Event) -> SeatFigures:
    """Taken / available per ticket (per slot × ticket on a multi-slot event) and per slot."""
    pairs = seats.ticket_summaries(event=event)
    slots = {s.pk: s for s in event.slots.all()} if event.is_multi_slots else {}
    tickets = {t.pk: t for t in event.tickets.all()}
    per_ticket = []
    for (slot_id, ticket_id), numbers in pairs.items():
        name = tickets[ticket_id].name if ticket_id is not None else "No ticket"
        label = f"{slots[slot_id]} · {name}" if slot_id is not None else name
        per_ticket.append(SeatBar(label, numbers["taken"], numbers["available"]))
    per_slot = []
    for slot_id, slot in slots.items():
        taken = sum(n["taken"] for (s, _), n in pairs.items() if s == slot_id)
        per_slot.append(SeatBar(str(slot), taken, seats.availability(event=event, slot=slot)))
    summary = seats.event_summary(event=event)
    capacity = seats.event_capacity(event=event)
    return SeatFigures(per_ticket, per_slot, summary.taken, capacity.available)


@dataclass(frozen=True)
class DayCount:
    day: date
    daily: int
    cumulative: int


def registrations_per_day(*, event: Event) -> list[DayCount]:
    """Registrations created per calendar day (every state; archived ones included: they were
    registrations on that day), with the running total. Days without any are listed with 0
    between the first and the last day, so the chart's axis is true to time."""
    tz = zoneinfo.ZoneInfo(event.date_tz or "UTC")
    rows = dict(
        Registration.objects.filter(event=event)
        .annotate(day=TruncDate("created_at", tzinfo=tz))
        .order_by()
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    if not rows:
        return []
    first, last = min(rows), max(rows)
    result, total = [], 0
    for offset in range((last - first).days + 1):
        day = date.fromordinal(first.toordinal() + offset)
        total += rows.get(day, 0)
        result.append(DayCount(day, rows.get(day, 0), total))
    return result


@dataclass(frozen=True)
class CheckIn:
    attended: int
    expected: int  # active registrations holding a seat: registered + attended

    @property
    def percent(self) -> int:
        return round(100 * self.attended / self.expected) if self.expected else 0


def check_in(*, event: Event) -> CheckIn:
    counts = Registration.objects.filter(event=event, active=True).aggregate(
        attended=Count("id", filter=Q(state=RegistrationState.DONE)),
        expected=Count("id", filter=Q(state__in=(RegistrationState.OPEN, RegistrationState.DONE))),
    )
    return CheckIn(counts["attended"], counts["expected"])


def state_counts(*, event: Event) -> dict[str, int]:
    """Active registrations per state (every state listed, zeros included)."""
    rows = dict(
        Registration.objects.filter(event=event, active=True)
        .order_by()
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    return {state: rows.get(state, 0) for state in RegistrationState.values}


@dataclass
class SchedulerStatus:
    scheduler: Mail
    state: str
    sent: int = 0
    skipped: int = 0
    failed: int = 0  # outbox rows of this scheduler that failed for good
    next_run: datetime | None = None
    error: str = ""
    counts: dict[str, int] = field(default_factory=dict)


def communication(*, event: Event) -> list[SchedulerStatus]:
    """Each scheduler's state, its sent / skipped attendee rows, failed outbox rows and next
    run (the earliest due unsent row for per-attendee and per-slot schedulers)."""
    mails = list(Mail.objects.filter(event=event).select_related("event"))
    ids = [m.pk for m in mails]
    outcomes: dict[int, dict[str, int]] = {pk: {} for pk in ids}
    for row in (
        MailRegistration.objects.filter(scheduler_id__in=ids, mail_sent=True)
        .order_by()
        .values("scheduler_id", "outcome")
        .annotate(n=Count("id"))
    ):
        outcomes[row["scheduler_id"]][row["outcome"]] = row["n"]
    next_rows = dict(
        MailRegistration.objects.filter(scheduler_id__in=ids, mail_sent=False)
        .order_by()
        .values("scheduler_id")
        .annotate(due=Min("scheduled_date"))
        .values_list("scheduler_id", "due")
    )
    next_slots = dict(
        MailSlot.objects.filter(scheduler_id__in=ids, mail_done=False)
        .order_by()
        .values("scheduler_id")
        .annotate(due=Min("scheduled_date"))
        .values_list("scheduler_id", "due")
    )
    failed = dict(
        MailOutbox.objects.filter(scheduler_id__in=ids, state=OutboxState.FAILED)
        .order_by()
        .values("scheduler_id")
        .annotate(n=Count("id"))
        .values_list("scheduler_id", "n")
    )
    result = []
    for mail in mails:
        counts = outcomes[mail.pk]
        if mail.pk in next_rows or mail.pk in next_slots:
            next_run = next_rows.get(mail.pk) or next_slots.get(mail.pk)
        else:
            next_run = None if mail.mail_done else mail.scheduled_date
        sent = counts.get(MailOutcome.SENT, 0)
        skipped = sum(n for outcome, n in counts.items() if outcome != MailOutcome.SENT)
        if not counts and mail.interval_type != "after_sub":
            sent = mail.mail_count_done  # event-wide schedulers keep no attendee rows
        result.append(
            SchedulerStatus(
                scheduler=mail,
                state=mail.mail_state,
                sent=sent,
                skipped=skipped,
                failed=failed.get(mail.pk, 0),
                next_run=next_run,
                error=mail.error_message,
                counts=counts,
            )
        )
    return result


def failed_mails(*, event: Event) -> int:
    """Outbox mails of this event (by attendee or by scheduler) that failed for good."""
    failed = MailOutbox.objects.filter(state=OutboxState.FAILED)
    return selectors.outbox_of_event(failed, event.pk).count()


@dataclass(frozen=True)
class WaitlistFigures:
    waiting: int  # the waiting list's length: entries waiting for an offer
    offered: int  # open offers: entries holding a seat until they accept or the offer expires


def waitlist_figures(*, event: Event) -> WaitlistFigures:
    """The event's waiting list in one aggregate query (the page's query count stays flat)."""
    counts = WaitlistEntry.objects.filter(event=event).aggregate(
        waiting=Count("id", filter=Q(state=WaitlistState.WAITING)),
        offered=Count("id", filter=Q(state=WaitlistState.OFFERED)),
    )
    return WaitlistFigures(counts["waiting"], counts["offered"])
