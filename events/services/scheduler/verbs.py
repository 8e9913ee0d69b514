"""The scheduler verbs (spec.md §6.1, §6.3): create, delete, re-date; the template cascade.

Invariants:
- every verb takes the Event lock (or the scheduler's row lock) and audits in its transaction;
- dates come from `dates` only; a date due within `ARM_WINDOW` nudges the pass after commit;
- `reschedule` re-arms sent start/end reminders whose new date lies in the future; it runs
  inside the caller's transaction, which holds the Event lock;
- after_sub attendee rows are created in the registration transaction
  (`registrations_opened`), behind the unique (scheduler, registration) index.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from events import ports
from events.db import locks
from events.errors import ValidationFailed
from events.models import (
    Event,
    IntervalType,
    IntervalUnit,
    Mail,
    MailRegistration,
    MailSlot,
    NotificationType,
    Registration,
    TypeMail,
)
from events.services import audit, nudge
from events.services.scheduler import dates


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
    check_channel(ports.template_renderer(), template_ref, notification_type)
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
        mail.scheduled_date = dates.mail_date(mail, event, slots)
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
        if mail.scheduled_date <= now + dates.ARM_WINDOW:
            nudge.scheduler_pass()
    return mail


def delete_scheduler(*, scheduler: Mail, actor: Any) -> None:
    """Delete one scheduler (its attendee and slot rows go with it); audited. Under its Event
    lock: a booking (or a confirm) reads the after_sub schedulers under that lock and writes
    their rows before it commits, so a deletion committed in between would fail its COMMIT
    (the rows' foreign key)."""
    with transaction.atomic():
        event_id = Mail.objects.filter(pk=scheduler.pk).values_list("event_id", flat=True).first()
        if event_id is None:
            return
        locks.lock_event(event_id)
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
        new_date = dates.mail_date(mail, event, slots)
        fields: dict[str, Any] = {}
        rearm = False
        if slots:
            pending = []
            kept = 0  # messages counted on slots that stay done
            for slot in slots:
                slot_date = dates.slot_date(mail, slot)
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
        if not done and new_date <= now + dates.ARM_WINDOW:
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


def on_template_deleted(*, template_ref: str, actor: Any = audit.SYSTEM) -> int:
    """Delete every Mail and TypeMail that references the template (audited); the count.

    The only cascade of the project; the built-in store calls it in its delete transaction.
    Under the Event locks of the schedulers' events, as `delete_scheduler`.
    """
    with transaction.atomic():
        locks.lock_events(
            Mail.objects.filter(template_ref=template_ref).values_list("event_id", flat=True)
        )
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
                verb="type_mail.deleted",
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


def check_channel(
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


def registrations_opened(
    *,
    event: Event,
    registrations: Sequence[Registration],
    now: datetime,
    schedulers: Sequence[Mail] | None = None,
) -> list[Mail]:
    """Give each after_sub scheduler of the event a row per registration entering `open`.

    Runs in the registration transaction (INSERT … ON CONFLICT DO NOTHING behind the unique
    (scheduler, registration) index); a row due within `ARM_WINDOW` nudges the pass after
    commit (spec.md §6.4). A registration confirmed before the scheduler existed is only
    mailed when the scheduler includes existing attendees (spec.md §14 item 8). The booking
    writes the same rows inside its own statement instead (`after_sub_rows`, `arm_after_sub`).
    """
    if schedulers is None:  # a transition passes those it read under the lock
        schedulers = list(
            Mail.objects.filter(event=event, interval_type=IntervalType.AFTER_SUB).only(
                "pk", "interval_nbr", "interval_unit", "created_at", "include_existing"
            )
        )
    rows = after_sub_rows(registrations=registrations, now=now, schedulers=schedulers)
    if rows:
        MailRegistration.objects.bulk_create(rows, ignore_conflicts=True)
        arm_after_sub(rows, now=now)
    return list(schedulers)


def after_sub_rows(
    *, registrations: Sequence[Registration], now: datetime, schedulers: Sequence[Mail]
) -> list[MailRegistration]:
    """The after_sub rows of `registrations` entering `open` (unsaved): one per scheduler and
    registration, each due at confirmation + the scheduler's interval; none for a registration
    confirmed before the scheduler existed unless it includes existing attendees. Reads only
    the schedulers' pk, interval_nbr, interval_unit, created_at and include_existing."""
    return [
        MailRegistration(
            scheduler=scheduler,
            registration=registration,
            scheduled_date=dates.after_sub_date(
                scheduler, confirmed_at=registration.confirmed_at, now=now
            ),
        )
        for scheduler in schedulers
        for registration in registrations
        if scheduler.include_existing or (registration.confirmed_at or now) >= scheduler.created_at
    ]


def arm_after_sub(rows: Sequence[MailRegistration], *, now: datetime) -> None:
    """Nudge the pass after commit when one of these after_sub rows is due within
    `ARM_WINDOW`."""
    if rows and min(dates.due(row) for row in rows) <= now + dates.ARM_WINDOW:
        nudge.scheduler_pass()
