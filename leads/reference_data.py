"""The leads overlay's share of the staff groups (spec.md §9)."""

from django.apps import apps as global_apps

from events.reference_data import grant


def grant_permissions(apps=global_apps) -> None:
    grant(apps, app_label="leads", user=[(["lead", "leadrule", "leadprovenance"], ("view",))])
