"""Scheduler date arithmetic (spec.md §6.1): one place computes every scheduled date."""

from __future__ import annotations

from datetime import datetime, timedelta

from dateutil.relativedelta import relativedelta

from events.models import IntervalType, IntervalUnit


def delta(interval_nbr: int, interval_unit: str) -> relativedelta:
    """`now` is zero whatever the number; a negative number flips the direction."""
    if interval_unit == IntervalUnit.NOW:
        return relativedelta()
    return relativedelta(**{interval_unit: interval_nbr})


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


def as_timedelta_hint(interval_nbr: int, interval_unit: str) -> timedelta:
    """An approximate timedelta (months as 30 days), for ordering and display only."""
    days = {"hours": 1 / 24, "days": 1, "weeks": 7, "months": 30}.get(interval_unit, 0)
    return timedelta(days=days * interval_nbr)
