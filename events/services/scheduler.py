"""Communication schedulers (spec.md §6).

This module owns every scheduled date. `reschedule` recomputes them after a date change and
re-arms start/end reminders that were already sent when their new date lies in the future.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from events.errors import ValidationFailed
from events.models import (
    Event,
    IntervalType,
    IntervalUnit,
    Mail,
    MailSlot,
    NotificationType,
)
from events.services import audit, intervals, locks


def _date_for(mail: Mail, *, begin: datetime, end: datetime) -> datetime:
    return intervals.scheduled_date(
        interval_type=mail.interval_type,
        interval_nbr=mail.interval_nbr,
        interval_unit=mail.interval_unit,
        created_at=mail.created_at,
        begin=begin,
        end=end,
    )


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
    if not (template_ref or "").strip():
        raise ValidationFailed("A template is required.", code="invalid_value")
    with transaction.atomic():
        event = locks.lock_event(event.pk)
        now = timezone.now()
        mail = Mail(
            event=event,
            sequence=sequence,
            interval_nbr=interval_nbr,
            interval_unit=interval_unit,
            interval_type=interval_type,
            template_ref=template_ref.strip(),
            notification_type=notification_type,
            include_existing=include_existing,
            created_at=now,
        )
        mail.scheduled_date = _date_for(mail, begin=event.date_begin, end=event.date_end)
        mail.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="scheduler.created",
            event=event,
            data={
                "scheduler": mail.pk,
                "interval": [interval_nbr, interval_unit, interval_type],
                "template_ref": mail.template_ref,
            },
        )
    return mail


def reschedule(*, event: Event, now: datetime | None = None) -> int:
    """Recompute the event's scheduled dates after a change of its (or its slots') times.

    A start/end-relative scheduler that was already sent, or skipped as stale, is re-armed
    when its new date lies in the future. Runs inside the caller's transaction. Returns the
    number of schedulers re-armed.
    """
    now = now or timezone.now()
    rearmed = 0
    mails = list(Mail.objects.filter(event=event).exclude(interval_type=IntervalType.AFTER_SUB))
    slots = list(event.slots.all()) if event.is_multi_slots else []
    slot_rows = {
        (row.scheduler_id, row.slot_id): row for row in MailSlot.objects.filter(scheduler__in=mails)
    }
    for mail in mails:
        new_date = _date_for(mail, begin=event.date_begin, end=event.date_end)
        fields = {}
        if new_date != mail.scheduled_date:
            fields["scheduled_date"] = new_date
        if (mail.mail_done or mail.skipped_reason) and new_date > now and not slots:
            fields.update(
                mail_done=False, mail_count_done=0, last_registration_id=0, skipped_reason=""
            )
        for slot in slots:
            row = slot_rows.get((mail.pk, slot.pk))
            if row is None:
                continue
            slot_date = _date_for(mail, begin=slot.start_datetime, end=slot.end_datetime)
            row_fields = {}
            if slot_date != row.scheduled_date:
                row_fields["scheduled_date"] = slot_date
            if row.mail_done and slot_date > now:
                row_fields.update(mail_done=False, mail_count_done=0, last_registration_id=0)
                fields.update(mail_done=False, skipped_reason="")
            if row_fields:
                MailSlot.objects.filter(pk=row.pk).update(**row_fields)
        if not fields:
            continue
        if fields.get("mail_done") is False and (mail.mail_done or mail.skipped_reason):
            rearmed += 1
            audit.record(
                actor=audit.SYSTEM,
                verb="scheduler.rearmed",
                event=event,
                data={"scheduler": mail.pk, "scheduled_date": new_date.isoformat()},
            )
        Mail.objects.filter(pk=mail.pk).update(**fields)
    return rearmed
