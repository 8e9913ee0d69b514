"""Reads shared by the admin, pages and the API; querysets come with their joins set."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Prefetch, QuerySet

from events.models import Event, Question, Registration, RegistrationState, Slot, Tag, Ticket


def public_events(*, now: datetime) -> QuerySet[Event]:
    """Published, active, not finished events, soonest first."""
    return (
        Event.objects.filter(is_published=True, active=True, date_end__gt=now)
        .select_related("stage", "event_type")
        .order_by("date_begin", "id")
    )


# --- derived flags of spec.md §2.1 / §2.5 (computed, never stored) -------------------------
# The one definition of each flag: pages, the intake, the desk, the catalog and the seam call
# these instead of comparing dates themselves. Every "now" is a parameter.


def is_ongoing(event: Event, *, now: datetime) -> bool:
    """begin ≤ now < end."""
    return event.date_begin <= now < event.date_end


def is_finished(event: Event, *, now: datetime) -> bool:
    """end ≤ now."""
    return event.date_end <= now


# --- attendee surface (spec.md §7) ------------------------------------------------------------


def public_tags_prefetch() -> Prefetch:
    """Public tags only (color 0 is an internal tag), as `event.public_tags`."""
    return Prefetch(
        "tags",
        queryset=Tag.objects.filter(color__gt=0).select_related("category"),
        to_attr="public_tags",
    )


def public_event_list(*, now: datetime) -> QuerySet[Event]:
    """The /events/ page: published, active, not finished events with their public tags."""
    return public_events(now=now).prefetch_related(public_tags_prefetch())


def public_event(*, event_id: int) -> Event | None:
    """A published, active event with what its page reads: stage, public tags,
    tickets, slots, active questions and their choices (a fixed number of queries)."""
    return (
        Event.objects.filter(pk=event_id, is_published=True, active=True)
        .select_related("stage")
        .prefetch_related(
            public_tags_prefetch(),
            Prefetch("tickets", queryset=Ticket.objects.order_by("sequence", "id")),
            Prefetch("slots", queryset=Slot.objects.order_by("start_datetime", "id")),
            Prefetch(
                "questions",
                queryset=Question.objects.filter(active=True)
                .order_by("sequence", "id")
                .prefetch_related("choices"),
                to_attr="active_questions",
            ),
        )
        .first()
    )


def attendee_registrations() -> QuerySet[Registration]:
    return Registration.objects.select_related("event", "ticket", "slot")


def ticket_registration(*, registration_id: int) -> Registration | None:
    """One registration for /my-tickets/ and /ics/, archived or not (the capability check
    tells them apart), with its event, ticket and slot: one query."""
    return attendee_registrations().filter(pk=registration_id).first()


def order_registrations(*, order_ref: str) -> list[Registration]:
    """The registrations of a sale order shown on its tickets page (not drafts, not archived)."""
    return list(
        attendee_registrations()
        .filter(sale_order_ref=order_ref, active=True)
        .exclude(state=RegistrationState.DRAFT)
        .order_by("event__date_begin", "id")
    )


def registration_names(*, registration_ids: list[int]) -> dict[int, str]:
    """{id: name} of registrations (the intake's confirmation page)."""
    return dict(Registration.objects.filter(pk__in=registration_ids).values_list("pk", "name"))


# The /ics route is the hottest read of the attendee surface: plain statements, no ORM compile.
_CALENDAR_REGISTRATION_SQL = "SELECT * FROM events_registration WHERE id = %s"
_CALENDAR_EVENT_SQL = "SELECT * FROM events_event WHERE id = %s"
_CALENDAR_SLOT_SQL = "SELECT * FROM events_slot WHERE id = %s"


def calendar_registration(*, registration_id: int) -> Registration | None:
    """One registration for /ics/ (archived or not) with its event, and its slot on a
    multi-slot event: two queries, three with a slot."""
    registration = next(
        iter(Registration.objects.raw(_CALENDAR_REGISTRATION_SQL, [registration_id])), None
    )
    if registration is None:
        return None
    registration.event = next(iter(Event.objects.raw(_CALENDAR_EVENT_SQL, [registration.event_id])))
    if registration.event.is_multi_slots and registration.slot_id is not None:
        registration.slot = next(iter(Slot.objects.raw(_CALENDAR_SLOT_SQL, [registration.slot_id])))
    return registration
