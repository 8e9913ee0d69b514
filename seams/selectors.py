"""Reads of the seams overlay: host references, the inbox lists, the catalog rows."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet

from events.models import LinkedProduct, Slot, Ticket
from seams.models import SeamInbox


def tickets_by_id(ids: Iterable[int]) -> dict[int, Ticket]:
    """Event tickets (not event-type template lines) with their event, in one query."""
    rows = Ticket.objects.filter(pk__in=set(ids), event__isnull=False).select_related("event")
    return {ticket.pk: ticket for ticket in rows}


def slots_by_id(ids: Iterable[int | None]) -> dict[int, Slot]:
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    return {slot.pk: slot for slot in Slot.objects.filter(pk__in=wanted)}


def inbox(*, status: str | None = None) -> QuerySet[SeamInbox]:
    qs = SeamInbox.objects.order_by("-received_at", "-id")
    if status:
        qs = qs.filter(status=status)
    return qs


def linked_products(*, event_id: int) -> QuerySet[LinkedProduct]:
    """The catalog rows of one event, published events only (spec-overlay.md §6)."""
    return LinkedProduct.objects.filter(event_id=event_id, is_published=True).order_by("ticket_id")
