"""Reads of the attendance desk (spec-overlay.md §5); each one a fixed number of queries.

Whether an event admits anyone (§5.1 step 4) is core's one decision of "closed"
(`events.rules.closed_reason` / `closed_events`: cancelled by kanban or by a cancelled
stage, in another ending stage, or finished), on the stage the lookup already joined.
Counters come from the one seat module: attended = `used`, expected = `reserved + used` (the
attendees holding a seat; a waiting-list offer holds one too, but nobody comes to the door
with it), per slot when the desk admits for one slot.
"""

from __future__ import annotations

from datetime import datetime

from events import rules as core_rules
from events.models import Event, Registration, RegistrationAnswer, Slot
from events.services import seats

UPCOMING_LIMIT = 50


def _lookup(**where: object) -> Registration | None:
    """One registration with its event, the event's stage, its ticket and slot: one query (the
    ORM's joins; the ticket and the slot outer-joined, as either may be unset)."""
    found = list(
        Registration.objects.select_related("event__stage", "ticket", "slot")
        .filter(**where)
        .order_by()  # a unique key: at most one row, nothing to sort
    )
    return found[0] if found else None


def scanned_registration(*, barcode: str) -> Registration | None:
    """The registration whose barcode is exactly `barcode` (the unique index: no case folding,
    no prefix), with its event and the event's stage, ticket and slot: one query."""
    return _lookup(barcode=barcode)


def desk_registration(*, registration_id: int) -> Registration | None:
    """One registration for the manual confirmation, joined like `scanned_registration`."""
    return _lookup(pk=registration_id)


def is_not_ongoing(event: Event, *, now: datetime) -> bool:
    """§5.1 step 4: the event is closed (core's one decision; `event.stage` loaded by the
    caller). Not started yet is fine (early entrance)."""
    return core_rules.is_closed(event, now=now)


def slot_event_id(*, slot_id: int) -> int | None:
    """The event of a slot, or None when no slot has this id."""
    return Slot.objects.filter(pk=slot_id).values_list("event_id", flat=True).first()


def desk_slots(*, event: Event) -> list[Slot]:
    """The slots a multi-slot event's desk chooses from, in time order (none otherwise)."""
    if not event.is_multi_slots:
        return []
    return list(Slot.objects.filter(event=event).order_by("start_datetime", "id"))


def choice_answers(*, registration_id: int) -> list[str]:
    """The registration's choice answers as "Question: Choice", in question order (one query;
    answers without a choice, free text, are not shown)."""
    found = (
        RegistrationAnswer.objects.filter(registration_id=registration_id, choice__isnull=False)
        .order_by("question__sequence", "question_id")
        .values_list("question__title", "choice__name")
    )
    return [f"{title}: {choice}" for title, choice in found]


def counters(*, event: Event, slot_id: int | None = None) -> dict[str, int]:
    """attended (seats `used`) / expected (`reserved + used`: open + done registrations), from
    the seat ledger: the event's, or one slot's."""
    if slot_id is not None:
        summary = seats.slot_summary(event=event, slot_id=slot_id)
    else:
        summary = seats.event_summary(event=event)
    return {"attended": summary.used, "expected": summary.reserved + summary.used}


def desk_event(*, event_id: int) -> Event | None:
    return Event.objects.select_related("stage").filter(pk=event_id, active=True).first()


def desk_events(*, now: datetime) -> list[dict]:
    """Ongoing and upcoming events to pick at the desk (not closed: core's `closed_events`),
    soonest first, each with its counters: three queries whatever the number of events."""
    events = list(
        Event.objects.filter(active=True)
        .exclude(core_rules.closed_events(now=now))
        .select_related("stage")
        .order_by("date_begin", "id")[:UPCOMING_LIMIT]
    )
    totals = seats.summaries(events)
    return [
        {
            "event": event,
            "ongoing": core_rules.is_ongoing(event, now=now),
            "attended": totals[event.pk].used,
            "expected": totals[event.pk].reserved + totals[event.pk].used,
        }
        for event in events
    ]
