"""The Celery app of the worker and beat.

Celery replaces the root logger's handlers with its own (and redirects stdout into logging), so
settings.LOGGING's token mask never reaches them: the `after_setup_*logger` signals put
`TokenMaskingFilter` on every handler Celery installs, so no line of the worker or beat (task
logs, redirected prints such as a console mail backend's output, tracebacks) carries a
capability token (spec.md §7.1).
"""

import os

from celery import Celery
from celery.schedules import crontab
from celery.signals import after_setup_logger, after_setup_task_logger, import_modules

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("backbone_events")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Beat: safety nets. Nudges after commit do the prompt work; these catch anything missed.
app.conf.beat_schedule = {
    "events-done-sweep": {"task": "events.done_sweep", "schedule": crontab(minute=7, hour=3)},
    "events-scheduler-pass": {"task": "events.run_pass", "schedule": 60.0},
    "events-outbox-delivery": {"task": "events.deliver_outbox", "schedule": 60.0},
    "events-export-build": {"task": "events.build_exports", "schedule": 60.0},
    "events-waitlist-pass": {"task": "events.waitlist_pass", "schedule": 60.0},
}


def merge_periodic_tasks(**kwargs) -> None:
    """Join the overlays' beat entries (`events.hooks.periodic_tasks`, filled in their
    `AppConfig.ready()`) to the schedule, so this module never names an overlay task. Runs on
    `import_modules`, which beat and the worker send while loading, before beat reads the
    schedule; Django is set up first (by the Django fix-up, or here)."""
    from django.apps import apps

    if not apps.ready:
        import django

        django.setup()
    from events import hooks

    for entry in hooks.periodic_tasks:
        app.conf.beat_schedule[entry["name"]] = {
            "task": entry["task"],
            "schedule": entry["schedule"],
        }


import_modules.connect(merge_periodic_tasks, sender=app, weak=False)


def _mask_tokens_in_handlers(logger, **kwargs):
    from events.access_log import TokenMaskingFilter

    for handler in logger.handlers:
        if not any(isinstance(f, TokenMaskingFilter) for f in handler.filters):
            handler.addFilter(TokenMaskingFilter())


after_setup_logger.connect(_mask_tokens_in_handlers, weak=False)
after_setup_task_logger.connect(_mask_tokens_in_handlers, weak=False)
