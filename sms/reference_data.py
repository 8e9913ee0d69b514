"""The sms overlay's share of the staff groups (spec.md §9): everyone sees the outbox; the
manager (every permission of the app) may re-queue a failed SMS."""

from django.apps import apps as global_apps

from events.reference_data import grant


def grant_permissions(apps=global_apps) -> None:
    grant(apps, app_label="sms", user=[(["smsoutbox"], ("view",))])
