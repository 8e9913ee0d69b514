from django.apps import AppConfig


class SeamsConfig(AppConfig):
    name = "seams"
    verbose_name = "Host seams"

    def ready(self) -> None:
        from events import hooks
        from seams import errors  # noqa: F401 — registers the app's error codes
        from seams.demo import seed_demo
        from seams.reference_data import grant_permissions

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo.append(seed_demo)
        from seams.dashboard import register as register_dashboard

        register_dashboard()  # its event-dashboard panel (events.admin.extensions)
