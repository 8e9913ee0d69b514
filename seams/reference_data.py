"""The seam overlay's share of the staff groups (spec.md §9): managers only."""

from django.apps import apps as global_apps

from events.reference_data import grant


def grant_permissions(apps=global_apps) -> None:
    grant(apps, app_label="seams")
