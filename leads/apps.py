from django.apps import AppConfig


class LeadsConfig(AppConfig):
    name = "leads"
    verbose_name = "Leads"

    def ready(self) -> None:
        from events import hooks
        from events.admin.extensions import register_event_extension
        from leads import errors  # noqa: F401 — registers the app's error codes
        from leads.admin import EVENT_EXTENSION
        from leads.demo import seed_demo
        from leads.reference_data import grant_permissions
        from leads.services.requests import PASS_TASK, registrations_changed

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo.append(seed_demo)
        # spec-overlay.md §3.3: registration creation and state changes queue lead work (the
        # overlay's triggers, migration 0005); the hook nudges the pass after commit.
        hooks.registrations_changed.append(registrations_changed)
        # The safety net of the nudges: beat runs the lead pass every minute.
        hooks.periodic_tasks.append(
            {"name": "leads-lead-pass", "task": PASS_TASK, "schedule": 60.0}
        )
        register_event_extension(EVENT_EXTENSION)
        from leads.dashboard import register as register_dashboard

        register_dashboard()  # its event-dashboard panel (events.admin.extensions)
