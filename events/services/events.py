"""Event lifecycle (spec.md §2.3, §5).

Invariants:
- template-apply happens once, inside `create_event`; later edits of the type, or changing
  `event.event_type`, re-apply nothing (the change is recorded and audited only);
- `kanban_state = cancel` is sticky: a stage change resets the other kanban states to normal;
- a change of the event's or a slot's times bumps `ics_sequence` and recomputes every
  affected scheduled date (the scheduler module re-arms sent reminders).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from datetime import date as date_type
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from events import hooks
from events.db import locks
from events.errors import RegistrationsClosed, ValidationFailed
from events.models import (
    CANCEL_DEADLINE_MAX,
    Event,
    EventType,
    KanbanState,
    Mail,
    Question,
    QuestionChoice,
    Registration,
    Slot,
    Stage,
    Ticket,
    TicketPdf,
)
from events.services import audit, scheduler, seats, waitlist_nudge
from events.services.reference import check_texts
from events.services.scheduler import dates

EDITABLE = {
    "name",
    "stage",
    "kanban_state",
    "date_begin",
    "date_end",
    "date_tz",
    "seats_limited",
    "seats_max",
    "is_multi_slots",
    "cancel_deadline_hours",
    "active",
    "organizer",
    "venue",
    "address",
    "country",
    "description",
    "note",
    "ticket_instructions",
    "ticket_pdf",
    "lang",
    "translations",
    "currency",
    "event_type",
}
DATE_FIELDS = {"date_begin", "date_end"}


def _check_tz(name: str) -> str:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed(
            f"{name!r} is not a time zone.", code="invalid_value", field="date_tz"
        ) from None
    return name


def check_cancel_deadline_hours(value: Any) -> None:
    """An event's or event type's `cancel_deadline_hours`: empty, or 0 to a year of hours."""
    if value is None:
        return
    in_range = isinstance(value, int) and 0 <= value <= CANCEL_DEADLINE_MAX
    if isinstance(value, bool) or not in_range:
        raise ValidationFailed(
            f"The cancellation deadline is a number of hours from 0 to {CANCEL_DEADLINE_MAX}.",
            code="invalid_value",
            field="cancel_deadline_hours",
        )


def _check_dates(begin: datetime, end: datetime) -> None:
    if timezone.is_naive(begin) or timezone.is_naive(end):
        raise ValidationFailed("Dates must carry a time zone.", code="invalid_value")
    if end <= begin:
        raise ValidationFailed(
            "The event must end after it begins.", code="invalid_value", field="date_end"
        )


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date_type):
        return value.isoformat()
    if hasattr(value, "pk"):
        return value.pk
    return value if isinstance(value, str | int | float | bool | type(None) | dict) else str(value)


def first_stage() -> Stage | None:
    return Stage.objects.order_by("sequence", "pk").first()


def create_event(
    *,
    name: str,
    date_begin: datetime,
    date_end: datetime,
    date_tz: str = "UTC",
    event_type: EventType | None = None,
    actor: Any,
    tags=None,
    **fields: Any,
) -> Event:
    unknown = set(fields) - EDITABLE - {"is_published"}
    if unknown:
        raise ValidationFailed(f"Unknown fields: {sorted(unknown)}", code="invalid_value")
    if not (name or "").strip():
        raise ValidationFailed("An event needs a name.", code="invalid_value", field="name")
    _check_dates(date_begin, date_end)
    check_texts(fields, Event)
    with transaction.atomic():
        values: dict[str, Any] = {}
        if event_type is not None:
            values.update(
                seats_limited=event_type.has_seats_limitation,
                seats_max=event_type.seats_max,
                date_tz=event_type.default_timezone or date_tz,
                note=event_type.note,
                ticket_instructions=event_type.ticket_instructions,
                cancel_deadline_hours=event_type.cancel_deadline_hours,
            )
            if date_tz != "UTC":
                values["date_tz"] = date_tz
        else:
            values["date_tz"] = date_tz
        values.update(fields)
        _check_tz(values["date_tz"])
        check_cancel_deadline_hours(values.get("cancel_deadline_hours"))
        values.setdefault("stage", first_stage())
        event = Event.objects.create(
            name=name.strip(),
            date_begin=date_begin,
            date_end=date_end,
            event_type=event_type,
            **values,
        )
        if event_type is not None:
            _apply_template(event, event_type, actor)
        if tags is not None:
            event.tags.set(tags)
        audit.record(
            actor=actor,
            verb="event.created",
            event=event,
            data={"event_type": event_type.pk if event_type else None},
        )
    return event


def _apply_template(event: Event, event_type: EventType, actor: Any) -> None:
    """Copy the type's lines onto a new event, once (spec.md §2.3)."""
    event.tags.set(event_type.tags.all())
    Ticket.objects.bulk_create(
        [
            Ticket(
                event=event,
                name=t.name,
                description=t.description,
                sequence=t.sequence,
                seats_max=t.seats_max,
                price=t.price,
                product_ref=t.product_ref,
                limit_max_per_order=t.limit_max_per_order,
                translations=t.translations,
            )
            for t in event_type.tickets.all()
        ]
    )
    for question in event_type.questions.prefetch_related("choices"):
        copy = Question.objects.create(
            event=event,
            title=question.title,
            question_type=question.question_type,
            is_mandatory_answer=question.is_mandatory_answer,
            once_per_order=question.once_per_order,
            sequence=question.sequence,
            active=question.active,
            translations=question.translations,
        )
        QuestionChoice.objects.bulk_create(
            [
                QuestionChoice(
                    question=copy, name=c.name, sequence=c.sequence, translations=c.translations
                )
                for c in question.choices.all()
            ]
        )
    now = timezone.now()
    mails = []
    for line in event_type.mails.all():
        mail = Mail(
            event=event,
            sequence=line.sequence,
            interval_nbr=line.interval_nbr,
            interval_unit=line.interval_unit,
            interval_type=line.interval_type,
            template_ref=line.template_ref,
            notification_type=line.notification_type,
            created_at=now,
        )
        mail.scheduled_date = dates.mail_date(mail, event, [])  # a new event: no slots
        mails.append(mail)
    Mail.objects.bulk_create(mails)
    hooks.run(hooks.event_created_from_type, event, event_type, actor)


def update_event(*, event: Event, actor: Any, **fields: Any) -> Event:
    unknown = set(fields) - EDITABLE
    if unknown:
        raise ValidationFailed(f"Unknown fields: {sorted(unknown)}", code="invalid_value")
    check_texts(fields, Event)
    with transaction.atomic():
        event = locks.lock_event(event.pk)
        changes: dict[str, list] = {}
        for field, value in fields.items():
            current = getattr(event, field)
            if current != value:
                changes[field] = [_jsonable(current), _jsonable(value)]
                setattr(event, field, value)
        if not changes:
            return event
        if "is_multi_slots" in changes and Registration.objects.filter(event=event).exists():
            # The seat ledger is keyed per slot only on multi-slot events.
            raise ValidationFailed(
                "Slots cannot be switched on or off once the event has registrations.",
                code="invalid_value",
                field="is_multi_slots",
            )
        if {"seats_limited", "seats_max"} & set(changes):
            _check_seat_limit(event)
        if "date_tz" in changes:
            _check_tz(event.date_tz)
        if "cancel_deadline_hours" in changes:
            check_cancel_deadline_hours(event.cancel_deadline_hours)
        if "ticket_pdf" in changes and event.ticket_pdf not in TicketPdf.values:
            raise ValidationFailed(
                f"ticket_pdf is one of {sorted(TicketPdf.values)}.",
                code="invalid_value",
                field="ticket_pdf",
            )
        if DATE_FIELDS & set(changes):
            _check_dates(event.date_begin, event.date_end)
        # Slot hours are in the event's time zone: a new zone moves every slot in UTC.
        moved_slots = _slot_times(event) if "date_tz" in changes else []
        times_changed = bool(DATE_FIELDS & set(changes) or moved_slots)
        if times_changed:
            _check_slots_inside(event, moved_slots)
            event.ics_sequence += 1
        if "stage" in changes and event.kanban_state != KanbanState.CANCEL:
            event.kanban_state = KanbanState.NORMAL
        event.save()
        if moved_slots:
            Slot.objects.bulk_update(moved_slots, ["start_datetime", "end_datetime"])
            changes["slots_moved"] = [slot.pk for slot in moved_slots]
        audit.record(actor=actor, verb="event.updated", event=event, data=changes)
        if times_changed:
            scheduler.reschedule(event=event)
        if {"seats_limited", "seats_max"} & set(changes):
            waitlist_nudge.seats_freed(event)  # a raised limit: nudge the waiting list after commit
    return event


def _check_seat_limit(event: Event) -> None:
    """The event limit (per slot on a multi-slot event) never goes below the seats it already
    covers, as a ticket's (spec.md §3: availability is negative only when data was forced in
    by hand). Read under the Event row lock the caller holds."""
    limit = seats.event_limit(event)
    if limit is None:
        return
    taken = seats.event_taken(event=event)
    if limit < taken:
        raise ValidationFailed(
            f"{taken} seats are already taken; the event's limit cannot go below that.",
            code="invalid_value",
            field="seats_max",
            taken=taken,
        )


def _slot_times(event: Event) -> list[Slot]:
    """The event's slots whose UTC times change with the event's (new) time zone."""
    moved = []
    for slot in event.slots.all():
        start, end = dates.slot_datetimes(event, slot.date, slot.start_hour, slot.end_hour)
        if (start, end) != (slot.start_datetime, slot.end_datetime):
            slot.start_datetime, slot.end_datetime = start, end
            moved.append(slot)
    return moved


def _check_slots_inside(event: Event, moved: list[Slot]) -> None:
    """Every slot must still lie inside the event's dates (spec.md §2.4)."""
    by_pk = {slot.pk: slot for slot in moved}
    slots = [by_pk.get(s.pk, s) for s in event.slots.all()]
    _check_inside(
        event, [(s.pk, s.start_datetime, s.end_datetime) for s in slots], field="date_begin"
    )


def _check_inside(
    event: Event, spans: list[tuple[int | None, datetime, datetime]], *, field: str
) -> None:
    """The one slot-inside-the-event rule and message, for a new slot and for moved dates."""
    outside = [pk for pk, start, end in spans if start < event.date_begin or end > event.date_end]
    if outside:
        raise ValidationFailed(
            "A time slot must lie inside the event's dates; move or delete the slots outside.",
            code="invalid_value",
            field=field,
            slots=[pk for pk in outside if pk is not None],
        )


def _set(
    event: Event,
    actor: Any,
    verb: str,
    decide: Callable[[Event], dict[str, Any] | None],
) -> tuple[Event, bool]:
    """Lock the event, let `decide` pick the new values from the locked row, write, audit.

    Returns the event and whether anything changed (no change: no write, no audit row).
    """
    with transaction.atomic():
        event = locks.lock_event(event.pk)
        values = decide(event) or {}
        changes = {
            k: [_jsonable(getattr(event, k)), _jsonable(v)]
            for k, v in values.items()
            if getattr(event, k) != v
        }
        if not changes:
            return event, False
        for field in changes:
            setattr(event, field, values[field])
        event.save(update_fields=[*changes, "updated_at"])
        audit.record(actor=actor, verb=verb, event=event, data=changes)
    return event, True


def publish(*, event: Event, actor: Any) -> Event:
    return _set(event, actor, "event.published", lambda e: {"is_published": True})[0]


def unpublish(*, event: Event, actor: Any) -> Event:
    return _set(event, actor, "event.unpublished", lambda e: {"is_published": False})[0]


def _done_values(stage: Stage, finished_before: datetime | None):
    """The values of mark_done, decided on the locked row (kanban `cancel` is sticky)."""

    def decide(event: Event) -> dict[str, Any] | None:
        if finished_before is not None and (
            not event.active or event.date_end >= finished_before or event.stage.pipe_end
        ):
            return None  # the sweep's candidate changed since it was selected
        values: dict[str, Any] = {"stage": stage}
        if event.kanban_state != KanbanState.CANCEL:
            values["kanban_state"] = KanbanState.NORMAL
        return values

    return decide


def _pipe_end_stage() -> Stage | None:
    # Done is not cancelled: a cancelled stage is never where a finished event goes.
    return (
        Stage.objects.filter(pipe_end=True, is_cancelled=False).order_by("sequence", "pk").first()
    )


def mark_done(*, event: Event, actor: Any) -> Event:
    """Move the event to the first pipe_end stage by sequence that is not a cancelled stage
    (nothing if there is none)."""
    stage = _pipe_end_stage()
    if stage is None:
        return event
    return _set(event, actor, "event.done", _done_values(stage, None))[0]


def cancel_event(*, event: Event, actor: Any) -> Event:
    """Blocks new seats and all communications; registrations keep their state."""
    return _set(event, actor, "event.cancelled", lambda e: {"kanban_state": KanbanState.CANCEL})[0]


def done_sweep(*, now: datetime | None = None) -> int:
    """Mark done every active event with date_end < now outside pipe_end stages; idempotent.

    Each event is decided again on its locked row, so a concurrent edit or a second sweep
    never moves an event twice. Returns the number of events moved.
    """
    now = now or timezone.now()
    stage = _pipe_end_stage()
    if stage is None:
        return 0
    ids = list(
        Event.objects.filter(active=True, date_end__lt=now, stage__pipe_end=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    decide = _done_values(stage, now)
    return sum(_set(Event(pk=pk), audit.SYSTEM, "event.done", decide)[1] for pk in ids)


def add_slot(
    *, event: Event, date: date_type, start_hour: float, end_hour: float, actor: Any
) -> Slot:
    if not (0 <= start_hour < 24 and 0 <= end_hour < 24 and end_hour > start_hour):
        raise ValidationFailed(
            "Hours must lie in [0, 24) with the end after the start.", code="invalid_value"
        )
    with transaction.atomic():
        event = locks.lock_event(event.pk)
        if event.kanban_state == KanbanState.CANCEL:
            raise RegistrationsClosed("The event is cancelled.")
        if not event.is_multi_slots:
            # The seat ledger of a single-slot event has no slot key: a slot would hold
            # nobody's seats and gate reminders of an event that has none.
            raise ValidationFailed(
                "Only a multi-slot event takes time slots; switch the event to slots first.",
                code="invalid_value",
                field="is_multi_slots",
            )
        start, end = dates.slot_datetimes(event, date, start_hour, end_hour)
        _check_inside(event, [(None, start, end)], field="date")
        slot = Slot.objects.create(
            event=event,
            date=date,
            start_hour=start_hour,
            end_hour=end_hour,
            start_datetime=start,
            end_datetime=end,
        )
        audit.record(
            actor=actor,
            verb="slot.created",
            event=event,
            data={"slot": slot.pk, "start": start.isoformat(), "end": end.isoformat()},
        )
        # A new slot's reminders: re-arm a multi-slot scheduler already done on older slots.
        scheduler.reschedule(event=event)
    return slot


def delete_slot(*, slot: Slot, actor: Any) -> None:
    """Delete a slot without registrations (spec.md §2.4); its reminders follow the rest."""
    with transaction.atomic():
        event = locks.lock_event(slot.event_id)
        if Registration.objects.filter(slot_id=slot.pk).exists():
            raise ValidationFailed(
                "A slot with registrations cannot be deleted.",
                code="invalid_value",
                field="slot",
                slot=slot.pk,
            )
        data = {
            "slot": slot.pk,
            "start": slot.start_datetime.isoformat(),
            "end": slot.end_datetime.isoformat(),
        }
        Slot.objects.filter(pk=slot.pk).delete()
        audit.record(actor=actor, verb="slot.deleted", event=event, data=data)
        scheduler.reschedule(event=event)
