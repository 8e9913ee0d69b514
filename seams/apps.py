from django.apps import AppConfig


class SeamsConfig(AppConfig):
    name = "seams"
    verbose_name = "Host seams"

    def ready(self) -> None:
        from events import hooks
        from seams import errors  # noqa: F401 — registers the app's error codes
        from seams.reference_data import grant_permissions

        hooks.reference_data.append(grant_permissions)
