from celery.schedules import crontab
from django.apps import AppConfig


class DeskConfig(AppConfig):
    name = "desk"
    verbose_name = "Attendance desk"

    def ready(self) -> None:
        from desk import errors  # noqa: F401 — registers the app's error codes
        from desk.admin import EVENT_EXTENSION
        from desk.demo import seed_demo
        from desk.reference_data import grant_permissions
        from events import hooks
        from events.admin.extensions import register_event_extension

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo.append(seed_demo)
        from desk.services.nonces import SWEEP_TASK

        # The nonces' retention (desk.services.nonces): once a day.
        hooks.periodic_tasks.append(
            {"name": "desk-nonce-sweep", "task": SWEEP_TASK, "schedule": crontab(minute=17, hour=3)}
        )
        register_event_extension(EVENT_EXTENSION)  # the Event page links to its conflicts
        from desk.dashboard import register as register_dashboard

        register_dashboard()  # its event-dashboard panel (events.admin.extensions)
