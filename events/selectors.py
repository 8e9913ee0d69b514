"""Reads shared by the admin, pages and the API; querysets come with their joins set."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from events.models import Event


def public_events(*, now: datetime) -> QuerySet[Event]:
    """Published, active, not finished events, soonest first."""
    return (
        Event.objects.filter(is_published=True, active=True, date_end__gt=now)
        .select_related("stage", "event_type")
        .order_by("date_begin", "id")
    )
