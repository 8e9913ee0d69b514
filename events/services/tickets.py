"""Ticket verbs, for an event's tickets and an event type's template tickets (spec.md §2.5).

Invariants:
- an event's ticket is changed only under its Event row lock (the lock every booking takes),
  a type's ticket under its EventType row lock; then decide, write, and one audit row
  (`ticket.created` / `ticket.updated` / `ticket.deleted`) in the same transaction;
- `seats_max` never goes below the seats already taken (read from `seats.ticket_taken`, per
  (slot, ticket) on a multi-slot event): the refusal is `ValidationFailed` with code
  `invalid_value` and `field="seats_max"`, and nothing is written;
- a ticket never changes owner, and a ticket with registrations (or a waiting list) is never
  deleted.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events.db import locks
from events.errors import ValidationFailed
from events.models import Event, EventType, Ticket
from events.services import audit, seats, waitlist_nudge
from events.services.event_types import lock_event_type
from events.services.reference import apply_fields, check_fields, check_texts, jsonable

TICKET_FIELDS = frozenset(
    {
        "name",
        "description",
        "sequence",
        "seats_max",
        "start_sale_datetime",
        "end_sale_datetime",
        "price",
        "product_ref",
        "limit_max_per_order",
        "translations",
    }
)


def _lock_owner(event_id: int | None, event_type_id: int | None) -> Event | None:
    """The owner's row lock: the Event (serialises with bookings) or the EventType."""
    if event_id is not None:
        return locks.lock_event(event_id)
    if event_type_id is None:
        raise ValidationFailed("A ticket belongs to an event or an event type.", field="event")
    lock_event_type(event_type_id)
    return None


def _check_values(ticket: Ticket) -> None:
    """The checks the database also enforces, refused as typed errors before the write."""
    start, end = ticket.start_sale_datetime, ticket.end_sale_datetime
    if start is not None and end is not None and end < start:
        raise ValidationFailed("The sale must end after it starts.", field="end_sale_datetime")
    if ticket.price < 0:
        raise ValidationFailed("A price cannot be negative.", field="price")
    per_order = ticket.limit_max_per_order
    if per_order > 30 or (ticket.seats_max and per_order > ticket.seats_max):
        raise ValidationFailed(
            "The per-order limit is at most 30 and at most the ticket's seats.",
            field="limit_max_per_order",
        )


def _check_limit(event: Event | None, ticket: Ticket) -> None:
    if event is None or ticket.seats_max == 0:  # 0 = unlimited; a type's ticket holds no seat
        return
    taken = seats.ticket_taken(event=event, ticket=ticket)
    if ticket.seats_max < taken:
        raise ValidationFailed(
            f"{taken} seats of this ticket are already taken; its limit cannot go below that.",
            field="seats_max",
            taken=taken,
        )


def create_ticket(
    *,
    actor: Any,
    event: Event | None = None,
    event_type: EventType | None = None,
    **fields: Any,
) -> Ticket:
    """A new ticket of exactly one owner (an event, or an event type as a template)."""
    check_fields(fields, TICKET_FIELDS)
    check_texts(fields, Ticket)
    if (event is None) == (event_type is None):
        raise ValidationFailed("A ticket belongs to an event or an event type.", field="event")
    event_id = event.pk if event is not None else None
    type_id = event_type.pk if event_type is not None else None
    with transaction.atomic():
        _lock_owner(event_id, type_id)
        ticket = Ticket(event_id=event_id, event_type_id=type_id, **fields)
        _check_values(ticket)
        ticket.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="ticket.created",
            event=event_id,
            data={
                "ticket": ticket.pk,
                "event_type": type_id,
                **{k: jsonable(v) for k, v in fields.items()},
            },
        )
    return ticket


def update_ticket(*, ticket: Ticket, actor: Any, **fields: Any) -> Ticket:
    """Change a ticket's terms; a seat limit below the seats taken is refused."""
    check_fields(fields, TICKET_FIELDS)
    check_texts(fields, Ticket)
    with transaction.atomic():
        event = _lock_owner(ticket.event_id, ticket.event_type_id)
        locked = Ticket.objects.select_for_update().get(pk=ticket.pk)
        changes = apply_fields(locked, fields)
        if not changes:
            return locked
        _check_values(locked)
        if "seats_max" in changes:
            _check_limit(event, locked)
        locked.save(update_fields=list(changes))
        audit.record(
            actor=actor,
            verb="ticket.updated",
            event=locked.event_id,
            data={"ticket": locked.pk, "event_type": locked.event_type_id, **changes},
        )
        if event is not None and "seats_max" in changes:
            waitlist_nudge.seats_freed(event)  # a raised limit: nudge the waiting list after commit
    return locked


def delete_ticket(*, ticket: Ticket, actor: Any) -> None:
    """Refused while any registration (even archived) or waiting-list entry holds the ticket:
    it is history."""
    with transaction.atomic():
        _lock_owner(ticket.event_id, ticket.event_type_id)
        locked = Ticket.objects.select_for_update().get(pk=ticket.pk)
        if locked.registrations.exists() or locked.waitlist.exists():
            raise ValidationFailed(
                f"Ticket {locked} has registrations or a waiting list; it cannot be deleted.",
                field="ticket",
                ticket=locked.pk,
            )
        audit.record(
            actor=actor,
            verb="ticket.deleted",
            event=locked.event_id,
            data={"ticket": locked.pk, "event_type": locked.event_type_id, "name": locked.name},
        )
        locked.delete()
