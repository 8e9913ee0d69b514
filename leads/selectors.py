"""Reads of the leads overlay shared by the admin and the pages (querysets with their joins)."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from events.models import Event, Registration
from leads.models import LeadProvenance, LeadRule


def leads_for_registration(registration: Registration | int) -> QuerySet[LeadProvenance]:
    """The leads (provenance rows) a registration contributed to, newest first."""
    pk = registration.pk if isinstance(registration, Registration) else registration
    return (
        LeadProvenance.objects.filter(registration_rows__registration_id=pk)
        .select_related("rule", "event")
        .distinct()
        .order_by("-created_at", "pk")
    )


def leads_for_event(event: Event | int) -> QuerySet[LeadProvenance]:
    """The event's leads with their rule and number of registrations."""
    pk = event.pk if isinstance(event, Event) else event
    return (
        LeadProvenance.objects.filter(event_id=pk)
        .select_related("rule")
        .annotate(registration_count=Count("registration_rows"))
        .order_by("-created_at", "pk")
    )


def lead_counts(event_ids: list[int]) -> dict[int, int]:
    """Leads per event, for a changelist page at once."""
    rows = (
        LeadProvenance.objects.filter(event_id__in=event_ids)
        .values_list("event_id")
        .annotate(n=Count("pk"))
    )
    counts = dict.fromkeys(event_ids, 0)
    counts.update(dict(rows))
    return counts


def rules_with_predicates() -> QuerySet[LeadRule]:
    return LeadRule.objects.prefetch_related("predicates", "event_types").select_related("event")
