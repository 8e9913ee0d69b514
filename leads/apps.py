from django.apps import AppConfig


class LeadsConfig(AppConfig):
    name = "leads"
    verbose_name = "Leads"

    def ready(self) -> None:
        from events import hooks
        from leads import errors  # noqa: F401 — registers the app's error codes
        from leads.reference_data import grant_permissions

        hooks.reference_data.append(grant_permissions)
