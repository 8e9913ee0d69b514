from django.apps import AppConfig


class BoothsConfig(AppConfig):
    name = "booths"
    verbose_name = "Booths"

    def ready(self) -> None:
        from booths import errors  # noqa: F401 — registers the app's error codes
        from booths.admin import EVENT_EXTENSION
        from booths.catalog import booth_rows
        from booths.demo import seed_demo, seed_demo_type
        from booths.reference_data import grant_permissions
        from booths.sale import sale_order_lines
        from booths.services import apply_type_booths
        from events import hooks
        from events.admin.extensions import register_event_extension

        hooks.reference_data.append(grant_permissions)
        hooks.seed_demo_type.append(seed_demo_type)
        hooks.seed_demo.append(seed_demo)
        # Template-apply once (spec.md §2.3): one Booth per TypeBooth of a new event's type.
        hooks.event_created_from_type.append(apply_type_booths)
        # Booth lines of host sale orders (spec-overlay.md §1.4), inside the seam's transaction.
        hooks.sale_order_lines["booth"] = sale_order_lines
        # The booths catalog read beside the linked products (the seam serves the route).
        hooks.catalogs["booths"] = booth_rows
        register_event_extension(EVENT_EXTENSION)
        from booths.dashboard import register as register_dashboard

        register_dashboard()  # its event-dashboard panel (events.admin.extensions)
