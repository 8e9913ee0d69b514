"""The desk's share of the staff groups (spec.md §9): the door and the event users see the
offline conflicts (read-only); the manager gets every permission of the app (the stored nonce
answers are machinery: nobody else sees them)."""

from django.apps import apps as global_apps

from events.reference_data import grant


def grant_permissions(apps=global_apps) -> None:
    grant(
        apps,
        app_label="desk",
        desk=[(["offlineconflict"], ("view",))],
        user=[(["offlineconflict"], ("view",))],
    )
