"""Reads of the seams overlay: host references, the inbox lists, the catalog rows."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from django.db.models import QuerySet

from events.db import rows
from events.models import Event, LinkedProduct, Slot, Ticket
from seams.models import SeamInbox


@cache
def _tickets_sql() -> str:
    ticket, event = Ticket._meta.db_table, Event._meta.db_table
    # S608: built from constants (table and column names from model meta); values are params.
    return f"""
        SELECT {rows.columns(Ticket, "t")}, {rows.columns(Event, "e")}
          FROM {ticket} t JOIN {event} e ON e.id = t.event_id
         WHERE t.id = ANY(%s)
    """  # noqa: S608


def tickets_statement(ids: Iterable[int]) -> rows.Statement:
    """The fixed statement (the ids as one array, prepared by psycopg) reading event tickets
    (not event-type template lines) with their event; `tickets_found` reads its rows."""
    return _tickets_sql(), [sorted(set(ids))]


def tickets_found(found: Iterable[tuple]) -> dict[int, Ticket]:
    """Ticket id → ticket, its event attached, from the rows of `tickets_statement`."""
    tickets = rows.load_joined((Ticket, Event), found)
    for ticket, event in tickets:
        rows.attach(ticket, "event", event)
    return {ticket.pk: ticket for ticket, _ in tickets}


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


def catalog_event(*, event_id: int) -> Event | None:
    """The event a catalog read may show: published and active (spec-overlay.md §6)."""
    return Event.objects.filter(pk=event_id, is_published=True, active=True).first()


def linked_products(*, event_id: int) -> QuerySet[LinkedProduct]:
    """The catalog rows of one event, published events only (spec-overlay.md §6)."""
    return LinkedProduct.objects.filter(event_id=event_id, is_published=True).order_by("ticket_id")
