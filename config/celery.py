import os

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("backbone_events")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Beat: safety nets. Nudges after commit do the prompt work; these catch anything missed.
app.conf.beat_schedule = {
    "events-done-sweep": {"task": "events.done_sweep", "schedule": crontab(minute=7, hour=3)},
    "events-scheduler-pass": {"task": "events.run_pass", "schedule": 60.0},
    "events-outbox-delivery": {"task": "events.deliver_outbox", "schedule": 60.0},
}
