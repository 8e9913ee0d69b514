"""The desk's share of the staff groups (spec.md §9): its one model, the stored answers to
nonces, is machinery; the Event manager holds its permissions as every app's, nobody else."""

from django.apps import apps as global_apps

from events.reference_data import grant


def grant_permissions(apps=global_apps) -> None:
    grant(apps, app_label="desk")
