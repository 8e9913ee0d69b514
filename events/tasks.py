"""Thin Celery tasks: each takes ids, calls a service.

Services nudge these by their registered names (`events.services.nudge`), never by import.
"""

from celery import shared_task

from events.read import exports
from events.services import delivery, nudge, scheduler, waitlist, waitlist_nudge
from events.services import events as event_services


@shared_task(name="events.done_sweep")
def done_sweep() -> int:
    return event_services.done_sweep()


@shared_task(name=nudge.PASS_TASK)
def run_pass_task() -> dict:
    """The scheduler pass: beat runs it every minute; nudges run it after commits."""
    nudge.started(key=nudge.PASS_KEY)
    return scheduler.run_pass().as_dict()


@shared_task(name=nudge.DELIVERY_TASK)
def deliver_outbox_task() -> dict:
    """Deliver queued outbox mails (beat every minute retries the ones in backoff)."""
    nudge.started(key=nudge.DELIVERY_KEY)
    return delivery.deliver_outbox().as_dict()


@shared_task(name=exports.BUILD_TASK)
def build_exports_task() -> dict:
    """Build the queued attendee exports (beat every minute takes over a stalled one)."""
    nudge.started(key=exports.BUILD_KEY)
    return exports.build_exports().as_dict()


@shared_task(name=waitlist_nudge.OFFER_TASK)
def waitlist_offer_task(event_id: int) -> int:
    """Offer an event's freed seats to its waiting list (nudged, per event, after commit)."""
    nudge.started(key=f"{waitlist_nudge.OFFER_KEY}:{event_id}")
    return len(waitlist.offer_freed_seats(event=event_id))


@shared_task(name=waitlist.PASS_TASK)
def waitlist_pass_task() -> dict:
    """Beat, every minute: expire the offers whose window ended (their seats go to the next
    entries), then offer free seats wherever someone waits (the net under lost nudges)."""
    return {"expired": waitlist.expire_offers(), "offered": waitlist.offer_waiting()}
