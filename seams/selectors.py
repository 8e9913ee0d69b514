"""Reads of the seams overlay: host references, the inbox lists, the catalog rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from django.db.models import QuerySet

from events.models import Event, LinkedProduct, Slot, Ticket
from events.read import statements
from events.read.statements import orm_sql
from seams.models import SeamInbox

# The columns of `tickets_statement`, in its select order: the ticket's, then its event's.
_TICKET_NAMES = tuple(f.attname for f in Ticket._meta.concrete_fields)
_EVENT_NAMES = tuple(f.attname for f in Event._meta.concrete_fields)


def tickets_by_id(ids: Iterable[int]) -> dict[int, Ticket]:
    """Ticket id → event ticket (not an event-type template line), its event loaded: one
    query."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    found = (
        Ticket.objects.select_related("event")
        .filter(pk__in=wanted, event__isnull=False)  # the join is then an inner one
        .order_by()
    )
    return {ticket.pk: ticket for ticket in found}


def tickets_statement(ids: Iterable[int]) -> tuple[str, list[Any]]:
    """The read of `tickets_by_id` as (sql, params), for a caller that sends it with other
    statements in one round trip; `tickets_found` turns its rows into tickets."""
    wanted = sorted(set(ids))
    if not wanted:
        raise ValueError("tickets_statement() needs at least one ticket id")
    return _tickets_sql(len(wanted)), wanted


@lru_cache(maxsize=16)
def _tickets_sql(count: int) -> str:
    """The statement for `count` ids, written by the ORM once per count and kept (a message
    names a ticket or a few): compiling it (38 columns) cost ~2 ms of CPU per message, more
    than PostgreSQL spends running it. One value list: the ticket's columns, its event's."""
    probe = list(range(1, count + 1))
    query = (
        Ticket.objects.filter(pk__in=probe, event__isnull=False)
        .order_by()
        .values_list(*_TICKET_NAMES, *(f"event__{name}" for name in _EVENT_NAMES))
    )
    return orm_sql(query, probe)


def tickets_found(found: Iterable[Sequence[Any]]) -> dict[int, Ticket]:
    """Ticket id → ticket, its event set, from the rows of `tickets_statement`."""
    split = len(_TICKET_NAMES)
    tickets = {}
    for row in found:
        ticket = statements.instance(Ticket, _TICKET_NAMES, row[:split])
        ticket.event = statements.instance(Event, _EVENT_NAMES, row[split:])
        tickets[ticket.pk] = ticket
    return tickets


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
