from django.apps import AppConfig


class SmsConfig(AppConfig):
    name = "sms"
    verbose_name = "SMS"

    def ready(self) -> None:
        from events import hooks
        from sms import checks
        from sms.adapters import DELIVERY_TASK
        from sms.admin import template_preview
        from sms.demo import seed_demo
        from sms.reference_data import grant_permissions

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo.append(seed_demo)
        hooks.template_previews.append(template_preview)
        # The web server refuses to start with the gateway adapter and no gateway URL (the
        # same rule is the system check sms.E001, registered on import of sms.checks).
        hooks.startup_checks.append(checks.refuse_without_gateway)
        # The safety net of the nudges: beat delivers (and retries backed-off SMS) every minute.
        hooks.periodic_tasks.append(
            {"name": "sms-outbox-delivery", "task": DELIVERY_TASK, "schedule": 60.0}
        )
        from sms.dashboard import register as register_dashboard

        register_dashboard()  # its event-dashboard panel (events.admin.extensions)
