"""Thin Celery tasks of the sms overlay (services nudge them by name, never by import)."""

from celery import shared_task

from events.services import nudge
from sms.adapters import DELIVERY_TASK, NUDGE_KEY
from sms.services import delivery


@shared_task(name=DELIVERY_TASK)
def deliver_outbox_task() -> dict:
    """POST queued SMS to the gateway (beat every minute retries the ones in backoff)."""
    nudge.started(key=NUDGE_KEY)
    return delivery.deliver_outbox().as_dict()
