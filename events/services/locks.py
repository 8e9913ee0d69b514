"""Row locks in one fixed order (events ascending by id, then registrations).

Every path that can change seats locks the Event row first; that single lock serialises the
seat decision of an event (spec.md §3 rule 2).
"""

from __future__ import annotations

from collections.abc import Iterable

from events.models import Event, Registration


def lock_events(event_ids: Iterable[int]) -> dict[int, Event]:
    ids = sorted(set(event_ids))
    rows = Event.objects.select_for_update(of=("self",)).filter(pk__in=ids).order_by("pk")
    return {event.pk: event for event in rows}


def lock_event(event_id: int) -> Event:
    return Event.objects.select_for_update(of=("self",)).get(pk=event_id)


def lock_registration(registration_id: int) -> Registration:
    return Registration.objects.select_for_update(of=("self",)).get(pk=registration_id)
