"""After-subscription rows created in the registration transaction (spec.md §4, §6.2).

When registrations enter `open`, each after_sub scheduler of their event gets one
MailRegistration row per registration (INSERT … ON CONFLICT DO NOTHING behind the unique
(scheduler, registration) index), due at `confirmed_at` + the scheduler's interval. When one
of those rows is due within a minute, the scheduler pass is nudged after commit (spec.md §6.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from events.models import Event, IntervalType, Mail, MailRegistration, Registration
from events.services import intervals, nudge
from events.services.scheduler import ARM_WINDOW


def registrations_opened(
    *, event: Event, registrations: Sequence[Registration], now: datetime
) -> list[Mail]:
    schedulers = list(
        Mail.objects.filter(event=event, interval_type=IntervalType.AFTER_SUB).only(
            "pk", "interval_nbr", "interval_unit", "created_at", "include_existing"
        )
    )
    rows = [
        MailRegistration(
            scheduler=scheduler,
            registration=registration,
            scheduled_date=(registration.confirmed_at or now)
            + intervals.delta(scheduler.interval_nbr, scheduler.interval_unit),
        )
        for scheduler in schedulers
        for registration in registrations
        # A registration confirmed before the scheduler existed is only mailed when the
        # scheduler includes existing attendees (spec.md §14 item 8).
        if scheduler.include_existing or (registration.confirmed_at or now) >= scheduler.created_at
    ]
    if rows:
        MailRegistration.objects.bulk_create(rows, ignore_conflicts=True)
        if min(row.scheduled_date for row in rows) <= now + ARM_WINDOW:
            nudge.scheduler_pass()
    return schedulers
