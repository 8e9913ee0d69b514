"""Thin Celery tasks of the desk (beat runs them by name, `desk.apps`)."""

from celery import shared_task

from desk.services.nonces import SWEEP_TASK, sweep_nonces


@shared_task(name=SWEEP_TASK)
def sweep_nonces_task() -> int:
    """The nonces' retention: beat runs it daily."""
    return sweep_nonces()
