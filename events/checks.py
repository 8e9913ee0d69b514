"""System checks: the secrets fail closed (spec.md §7.1, §10)."""

from django.conf import settings
from django.core.checks import Error, register

MIN_SECRET_LENGTH = 32


@register()
def check_capability_secret(app_configs, **kwargs):
    secret = settings.EVENT_CAPABILITY_SECRET or ""
    if len(secret) < MIN_SECRET_LENGTH:
        return [
            Error(
                "EVENT_CAPABILITY_SECRET is missing or shorter than 32 characters.",
                hint="make run writes a .env with a generated secret; see .env.example.",
                id="events.E001",
            )
        ]
    return []


@register()
def check_seam_secret(app_configs, **kwargs):
    secrets_ = (settings.EVENT_SEAM_SECRET or "").split()
    if not secrets_:
        return [
            Error(
                "EVENT_SEAM_SECRET is empty: the sale seam would refuse every message.",
                id="events.E002",
            )
        ]
    return []
