"""Every scheduled date and slot time of the project (spec.md §2.4, §6.1): the only owner.

Invariants:
- an interval is a calendar delta (`relativedelta`: months clamp to the month's last day);
  unit `now` is zero whatever the number, and a negative number flips the direction;
- after_sub dates count from the registration's confirmation (or, before it has one, from the
  moment given); the set-based sweep of the pass uses PostgreSQL's own interval arithmetic on
  `pg_interval(...)`, which clamps months the same way;
- a scheduler's date on a multi-slot event is the earliest of its slots' dates; with no slot
  yet it is a lower bound of any future slot's date, so no slot is ever gated late;
- slot hours are wall-clock hours in the event's time zone, stored as UTC datetimes.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from dateutil.relativedelta import relativedelta
from django.utils import timezone

from events.models import (
    Event,
    IntervalType,
    IntervalUnit,
    Mail,
    MailRegistration,
    MailSlot,
    Slot,
    TypeMail,
)

# A date armed within this window gets a nudge; later dates are found by beat (every minute).
ARM_WINDOW = timedelta(minutes=1)
START_RELATIVE = (IntervalType.BEFORE_EVENT, IntervalType.AFTER_EVENT_START)


def delta(interval_nbr: int, interval_unit: str) -> relativedelta:
    """`now` is zero whatever the number; a negative number flips the direction."""
    match interval_unit:
        case IntervalUnit.NOW:
            return relativedelta()
        case IntervalUnit.HOURS:
            return relativedelta(hours=interval_nbr)
        case IntervalUnit.DAYS:
            return relativedelta(days=interval_nbr)
        case IntervalUnit.WEEKS:
            return relativedelta(weeks=interval_nbr)
        case IntervalUnit.MONTHS:
            return relativedelta(months=interval_nbr)
    raise ValueError(f"unknown interval unit {interval_unit!r}")


def pg_interval(interval_nbr: int, interval_unit: str) -> str:
    """The same delta as a PostgreSQL interval literal (for the after_sub sweep's SQL)."""
    d = delta(interval_nbr, interval_unit)
    parts = [
        f"{value} {unit}"
        for unit, value in (
            ("years", d.years),
            ("months", d.months),
            ("days", d.days),
            ("hours", d.hours),
        )
        if value
    ]
    return " ".join(parts) or "0"


def scheduled_date(
    *,
    interval_type: str,
    interval_nbr: int,
    interval_unit: str,
    created_at: datetime,
    begin: datetime,
    end: datetime,
) -> datetime:
    d = delta(interval_nbr, interval_unit)
    match interval_type:
        case IntervalType.AFTER_SUB:
            return created_at + d
        case IntervalType.BEFORE_EVENT:
            return begin - d
        case IntervalType.AFTER_EVENT_START:
            return begin + d
        case IntervalType.AFTER_EVENT:
            return end + d
        case IntervalType.BEFORE_EVENT_END:
            return end - d
    raise ValueError(f"unknown interval type {interval_type!r}")


def _date_for(mail: Mail | TypeMail, *, begin: datetime, end: datetime) -> datetime:
    return scheduled_date(
        interval_type=mail.interval_type,
        interval_nbr=mail.interval_nbr,
        interval_unit=mail.interval_unit,
        created_at=getattr(mail, "created_at", None) or timezone.now(),
        begin=begin,
        end=end,
    )


def slot_date(mail: Mail, slot: Slot) -> datetime:
    """The scheduler's date for one slot of a multi-slot event."""
    return _date_for(mail, begin=slot.start_datetime, end=slot.end_datetime)


def mail_date(mail: Mail, event: Event, slots: Sequence[Slot]) -> datetime:
    """The scheduler's own date; on a multi-slot event the earliest of its slots' dates.

    A multi-slot event without slots yet gets a lower bound of any future slot's date (every
    slot starts and ends after the event's begin), so no slot is ever gated late.
    """
    if mail.interval_type == IntervalType.AFTER_SUB or not event.is_multi_slots:
        return _date_for(mail, begin=event.date_begin, end=event.date_end)
    if slots:
        return min(slot_date(mail, slot) for slot in slots)
    return _date_for(mail, begin=event.date_begin, end=event.date_begin)


def after_sub_date(mail: Mail, *, confirmed_at: datetime | None, now: datetime) -> datetime:
    """When an after_sub scheduler mails one attendee: confirmation (or `now`) + interval."""
    return (confirmed_at or now) + delta(mail.interval_nbr, mail.interval_unit)


def slot_datetimes(
    event: Event, day: date, start_hour: float, end_hour: float
) -> tuple[datetime, datetime]:
    """A slot's UTC start and end from its day and wall-clock hours in the event's zone."""
    tz = zoneinfo.ZoneInfo(event.date_tz)
    midnight = datetime.combine(day, time(0), tzinfo=tz)
    start = midnight + timedelta(minutes=round(start_hour * 60))
    end = midnight + timedelta(minutes=round(end_hour * 60))
    return start.astimezone(UTC), end.astimezone(UTC)


def due(row: Mail | MailSlot | MailRegistration) -> datetime:
    """A row's scheduled date; every row the pass or the arming walks has one (set when the
    row is made: the nullable column only serves rows of the admin's unsaved forms)."""
    if row.scheduled_date is None:
        raise ValueError(f"{type(row).__name__} {row.pk} has no scheduled date")
    return row.scheduled_date


def is_stale(mail: Mail, end: datetime, now: datetime) -> bool:
    """A start-relative reminder reached only after the event (or slot) ended."""
    return mail.interval_type in START_RELATIVE and now >= end


def stale_reason(mail: Mail, end: datetime, scheduled: datetime) -> str:
    return (
        f"The event ended ({end:%Y-%m-%d %H:%M} UTC) before this {mail.interval_type} "
        f"reminder (due {scheduled:%Y-%m-%d %H:%M} UTC) could be sent."
    )
