"""Thin Celery tasks: each takes ids, calls a service."""

from celery import shared_task

from events.services import events as event_services


@shared_task(name="events.done_sweep")
def done_sweep() -> int:
    return event_services.done_sweep()
