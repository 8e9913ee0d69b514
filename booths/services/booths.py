"""Booths of an event: create, patch, delete (the fences of spec-overlay.md §2.2), and the
template-apply hook (spec.md §2.3).

Invariants:
- a booth is created only on an event that is neither cancelled (kanban `cancel`) nor done (a
  `pipe_end` stage): `registrations_closed`;
- the name, category and event of a booth with a confirmed booking never change, a booked booth
  is never set back to `available` by a patch, and a booth with a confirmed booking or a
  pending booking of an order is never deleted: `booth_locked`, nothing written;
- every verb locks the booth row first, decides on the locked row, writes, and audits in the
  same transaction; a new event gets one Booth per TypeBooth of its type, once, at creation.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from booths.errors import BoothLocked
from booths.models import BookingState, Booth, BoothCategory, BoothState, TypeBooth
from booths.services import bookings
from booths.services.locks import lock_booth
from events.errors import RegistrationsClosed, ValidationFailed
from events.models import Event, EventType, KanbanState
from events.services import audit

EDITABLE = {
    "name",
    "booth_category",
    "event",
    "contact_name",
    "contact_email",
    "contact_phone",
    "is_paid",
    "state",
}
# What a confirmed booking pins (spec-overlay.md §2.2).
LOCKED_WHEN_BOOKED = {"name", "booth_category", "event"}


def _check_open(event: Event) -> None:
    """Booths are added only to an event that is neither cancelled nor done."""
    event = (
        Event.objects.select_related("stage")
        .only("kanban_state", "stage__pipe_end")
        .get(pk=event.pk)
    )
    if event.kanban_state == KanbanState.CANCEL or event.stage.pipe_end:
        raise RegistrationsClosed(
            "The event is cancelled or done: it takes no new booths.", event=event.pk
        )


def _check_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ValidationFailed("A booth needs a name.", code="invalid_value", field="name")
    return name


FOREIGN_KEYS = {"event", "booth_category"}


def _value(value: Any) -> Any:
    return value.pk if hasattr(value, "pk") else value


def _current(booth: Booth, field: str) -> Any:
    """The booth's value for `field`, an FK as its id (no query for the related row)."""
    return getattr(booth, f"{field}_id" if field in FOREIGN_KEYS else field)


def create_booth(*, event: Event, booth_category: BoothCategory, name: str, actor: Any) -> Booth:
    name = _check_name(name)
    with transaction.atomic():
        # No Event row lock: a cancel committing just after this read is the same as the
        # booth having been created just before it (the cancel does not touch booths).
        _check_open(event)
        booth = Booth.objects.create(event_id=event.pk, booth_category=booth_category, name=name)
        audit.record(
            actor=actor,
            verb="booth.created",
            event=event.pk,
            data={"booth": booth.pk, "name": name, "booth_category": booth_category.pk},
        )
    return booth


def update_booth(*, booth: Booth, actor: Any, **fields: Any) -> Booth:
    unknown = set(fields) - EDITABLE
    if unknown:
        raise ValidationFailed(f"Unknown fields: {sorted(unknown)}", code="invalid_value")
    if "name" in fields:
        fields["name"] = _check_name(fields["name"])
    with transaction.atomic():
        booth = lock_booth(booth.pk)
        changes = {
            field: [_current(booth, field), _value(value)]
            for field, value in fields.items()
            if _current(booth, field) != _value(value)
        }
        if not changes:
            return booth
        confirmed = booth.bookings.filter(state=BookingState.CONFIRMED).exists()
        pinned = sorted(LOCKED_WHEN_BOOKED & set(changes))
        if confirmed and pinned:
            raise BoothLocked(
                "The booth is booked: its name, category and event cannot change.",
                booth=booth.pk,
                fields=pinned,
            )
        new_state = fields.get("state") if "state" in changes else None
        if new_state == BoothState.AVAILABLE:
            raise BoothLocked(
                "A booked booth becomes available only by releasing its booking.", booth=booth.pk
            )
        if new_state is not None and new_state != BoothState.UNAVAILABLE:
            raise ValidationFailed(f"Unknown state {new_state!r}.", code="invalid_value")
        if "is_paid" in changes and fields["is_paid"] and not confirmed:
            raise ValidationFailed(
                "Only a booked booth can be paid.", code="invalid_value", field="is_paid"
            )
        if "event" in changes:
            _check_open(fields["event"])
        patched = sorted(changes.keys() - {"state"})
        if patched:
            for field in patched:
                setattr(booth, field, fields[field])
            booth.save(update_fields=patched)
            audit.record(
                actor=actor,
                verb="booth.updated",
                event=booth.event_id,
                data={"booth": booth.pk, **{f: changes[f] for f in patched}},
            )
        if new_state == BoothState.UNAVAILABLE:
            # Setting a free booth unavailable by hand is a staff block: a booking with no
            # order, so "unavailable exactly when it has a confirmed booking" keeps holding.
            bookings.block_locked_booth(booth=booth, actor=actor)
    return booth


def delete_booth(*, booth: Booth, actor: Any) -> None:
    with transaction.atomic():
        booth = lock_booth(booth.pk)
        holding = sorted(
            booth.bookings.filter(
                Q(state=BookingState.CONFIRMED) | (Q(state=BookingState.PENDING) & ~Q(order_ref=""))
            ).values_list("pk", flat=True)
        )
        if holding:
            raise BoothLocked(
                "The booth has a confirmed booking or a pending booking of an order.",
                booth=booth.pk,
                bookings=holding,
            )
        audit.record(
            actor=actor,
            verb="booth.deleted",
            event=booth.event_id,
            data={"booth": booth.pk, "name": booth.name},
        )
        booth.delete()


def apply_type_booths(event: Event, event_type: EventType, actor: Any) -> list[Booth]:
    """The `event_created_from_type` hook: one Booth per TypeBooth, inside create_event's
    transaction. Called once, at creation; later edits of the type never reach the event."""
    lines = list(TypeBooth.objects.filter(event_type=event_type).order_by("pk"))
    if not lines:
        return []
    booths = Booth.objects.bulk_create(
        [Booth(event=event, booth_category_id=t.booth_category_id, name=t.name) for t in lines]
    )
    audit.record(
        actor=actor,
        verb="booth.created",
        event=event,
        data={"booths": [b.pk for b in booths], "event_type": event_type.pk},
    )
    return booths
