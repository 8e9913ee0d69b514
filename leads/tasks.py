"""Thin Celery tasks of the leads overlay (services nudge them by name, never by import)."""

from celery import shared_task

from events.services import nudge
from leads.services import passes
from leads.services.requests import NUDGE_KEY, PASS_TASK


@shared_task(name=PASS_TASK)
def run_pass_task() -> dict:
    """The lead pass: beat runs it every minute; nudges run it after registration commits."""
    nudge.started(key=NUDGE_KEY)
    return passes.run_pass().as_dict()
