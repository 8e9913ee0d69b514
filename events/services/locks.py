"""Row locks in one fixed order (events ascending by id, then registrations).

Every path that can change seats locks the Event row first; that single lock serialises the
seat decision of an event (spec.md §3 rule 2).
"""

from __future__ import annotations

from collections.abc import Iterable

from events.models import Event, Mail, Question, Registration, Ticket


def lock_events(event_ids: Iterable[int]) -> dict[int, Event]:
    ids = sorted(set(event_ids))
    rows = Event.objects.select_for_update(of=("self",)).filter(pk__in=ids).order_by("pk")
    return {event.pk: event for event in rows}


def lock_event(event_id: int) -> Event:
    return Event.objects.select_for_update(of=("self",)).get(pk=event_id)


# Raw SQL in this one place: the ORM spends more time compiling this statement (two EXISTS
# annotations on a FOR UPDATE OF query) than PostgreSQL spends running it, and it runs once
# per booking (bench B1). It returns ordinary Event instances.
_EVENT, _TICKET, _QUESTION, _MAIL = (m._meta.db_table for m in (Event, Ticket, Question, Mail))
_BOOKING_LOCK_SQL = f"""
    SELECT e.*,
           EXISTS (SELECT 1 FROM {_TICKET} t WHERE t.event_id = e.id) AS has_tickets,
           EXISTS (SELECT 1 FROM {_QUESTION} q WHERE q.event_id = e.id AND q.active)
               AS has_questions,
           EXISTS (SELECT 1 FROM {_MAIL} m WHERE m.event_id = e.id
                                              AND m.interval_type = 'after_sub')
               AS has_after_sub
      FROM {_EVENT} e
     WHERE e.id = %s
       FOR UPDATE OF e
"""  # noqa: S608 — built from constants: table names from model meta; the id is a parameter


def lock_event_for_booking(event_id: int) -> Event:
    """lock_event, also telling (in the same statement) whether the event has tickets and
    active questions, and after_sub schedulers (`has_tickets`, `has_questions`,
    `has_after_sub`), so a booking spends no query on each.

    The flags come from the statement's snapshot, taken before a wait for the lock. Ticket
    and question verbs take this lock too, so a row they committed while this booking waited
    is not in the flags: a ticket deleted meanwhile is caught by register()'s re-read of its
    ticket; a first ticket added meanwhile lets that one waiting ticketless booking through
    (counted against the event's own limit, so never an oversell); a first question added
    meanwhile is not asked of it. An after_sub scheduler created meanwhile gets its missing
    rows from the pass (spec.md §6.2). Seat counters must never be read this way: they are
    read or written by a later statement, after the lock.
    """
    rows = list(Event.objects.raw(_BOOKING_LOCK_SQL, [event_id]))
    if not rows:
        raise Event.DoesNotExist(f"Event {event_id} does not exist.")
    return rows[0]


def lock_registration(registration_id: int) -> Registration:
    """The registration row, with its ticket (the seat check needs its limit)."""
    return (
        Registration.objects.select_for_update(of=("self",))
        .select_related("ticket")
        .get(pk=registration_id)
    )
