from django.apps import AppConfig


class SeamsConfig(AppConfig):
    name = "seams"
    verbose_name = "Host seams"

    def ready(self) -> None:
        from events import hooks
        from seams import errors  # noqa: F401 — registers the app's error codes
        from seams.demo import seed_demo
        from seams.reference_data import grant_permissions
        from seams.services import webhooks

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo.append(seed_demo)
        # Outbound webhooks: delivery is nudged after the commits that queued messages, and
        # beat retries the ones in backoff.
        hooks.registrations_changed.append(webhooks.registrations_changed)
        hooks.audit_written.append(webhooks.audit_written)
        hooks.periodic_tasks.append(
            {"name": "seams-webhook-delivery", "task": webhooks.DELIVERY_TASK, "schedule": 30.0}
        )
        from seams import webhook_schemas

        webhook_schemas.register()  # the messages in the OpenAPI description's `webhooks`
        from seams.dashboard import register as register_dashboard

        register_dashboard()  # its event-dashboard panel (events.admin.extensions)
