from django.apps import AppConfig


class BoothsConfig(AppConfig):
    name = "booths"
    verbose_name = "Booths"

    def ready(self) -> None:
        from booths import errors  # noqa: F401 — registers the app's error codes
        from booths.demo import seed_demo_type
        from booths.reference_data import grant_permissions
        from events import hooks

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo_type.append(seed_demo_type)
