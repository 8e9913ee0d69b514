"""The waiting list's nudge: seats of an event may have become free, so an offer pass runs
after commit when someone waits. Its own module because the verbs that free seats (cancel,
a raised limit) sit below the waiting list, which books through them."""

from __future__ import annotations

from events.models import Event, WaitlistEntry, WaitlistState
from events.services import nudge

# The per-event nudge (events.services.nudge) and its task, published by name.
OFFER_KEY = "events:nudge:waitlist-offer"
OFFER_TASK = "events.waitlist_offer"


def seats_freed(event: Event | int, *, someone_waits: bool | None = None) -> None:
    """Seats of the event may have become free (a cancellation, a raised limit): nudge an offer
    pass after commit when someone waits. Called inside the freeing transaction, under its Event
    lock, so a join (which takes that lock) is either seen here or sees the free seat.
    `someone_waits`: whether someone waits, when the caller read it under that lock already
    (a transition, locks.lock_for_transition); None: read here."""
    event_id = event if isinstance(event, int) else event.pk
    if someone_waits is None:
        someone_waits = WaitlistEntry.objects.filter(
            event_id=event_id, state=WaitlistState.WAITING
        ).exists()
    if someone_waits:
        nudge.after_commit(key=f"{OFFER_KEY}:{event_id}", task=OFFER_TASK, args=(event_id,))
