"""Thin Celery tasks of the seams overlay (services nudge them by name, never by import)."""

from celery import shared_task

from events.services import nudge
from seams.services import webhooks


@shared_task(name=webhooks.DELIVERY_TASK)
def deliver_webhooks_task() -> dict:
    """POST due webhook deliveries: nudged after the changes that queued them; beat every 30 s
    retries the ones in backoff."""
    nudge.started(key=webhooks.NUDGE_KEY)
    return webhooks.deliver_due().as_dict()
