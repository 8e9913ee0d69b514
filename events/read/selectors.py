"""Reads shared by the admin, pages and the API; querysets come with their joins set."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Model, Prefetch, QuerySet

from events import rules
from events.db import pipeline, rows
from events.models import (
    Event,
    EventAuditLog,
    Question,
    Registration,
    RegistrationState,
    Slot,
    Tag,
    Ticket,
)
from events.services import seats


def public_events(*, now: datetime) -> QuerySet[Event]:
    """Published, active, not finished events, soonest first."""
    return (
        Event.objects.filter(is_published=True, active=True, date_end__gt=now)
        .select_related("stage", "event_type")
        .order_by("date_begin", "id")
    )


Summaries = Mapping[tuple[int | None, int | None], Mapping[str, Any]]


def sold_out(event: Event, *, summaries: Summaries | None = None) -> bool:
    """No seat can be had: a limit applies to every (slot, ticket) pair and none has
    availability > 0 (a negative availability is sold out). The numbers come from the seat
    module (`seats.ticket_summaries`; pass them when already read)."""
    if summaries is None:
        summaries = seats.ticket_summaries(event=event)
    values = [pair["available"] for pair in summaries.values()]
    return bool(values) and all(v is not None and v <= 0 for v in values)


def registrations_open(event: Event, *, now: datetime, summaries: Summaries | None = None) -> bool:
    """spec.md §2.1: not cancelled, not in a pipe_end stage, not finished, sales started,
    and not sold out."""
    return (
        rules.closed_reason(event, now=now) is None
        and rules.sales_started(event, now=now)
        and not sold_out(event, summaries=summaries)
    )


# --- attendee surface (spec.md §7) ------------------------------------------------------------


def public_tags_prefetch() -> Prefetch:
    """Public tags only (color 0 is an internal tag), as `event.public_tags`."""
    return Prefetch(
        "tags",
        queryset=Tag.objects.filter(color__gt=0).select_related("category"),
        to_attr="public_tags",
    )


def public_event_list(*, now: datetime) -> QuerySet[Event]:
    """The /events/ page: published, active, not finished events with their public tags."""
    return public_events(now=now).prefetch_related(public_tags_prefetch())


def public_event(*, event_id: int) -> Event | None:
    """A published, active event with what its page reads: stage, public tags,
    tickets, slots, active questions and their choices (a fixed number of queries)."""
    return (
        Event.objects.filter(pk=event_id, is_published=True, active=True)
        .select_related("stage")
        .prefetch_related(
            public_tags_prefetch(),
            Prefetch("tickets", queryset=Ticket.objects.order_by("sequence", "id")),
            Prefetch("slots", queryset=Slot.objects.order_by("start_datetime", "id")),
            Prefetch(
                "questions",
                queryset=Question.objects.filter(active=True)
                .order_by("sequence", "id")
                .prefetch_related("choices"),
                to_attr="active_questions",
            ),
        )
        .first()
    )


def attendee_registrations() -> QuerySet[Registration]:
    return Registration.objects.select_related("event", "ticket", "slot")


def ticket_registration(*, registration_id: int) -> Registration | None:
    """One registration for /my-tickets/ and /ics/, archived or not (the capability check
    tells them apart), with its event, ticket and slot: one query."""
    return attendee_registrations().filter(pk=registration_id).first()


def order_registrations(*, order_ref: str) -> list[Registration]:
    """The registrations of a sale order shown on its tickets page (not drafts, not archived)."""
    return list(
        attendee_registrations()
        .filter(sale_order_ref=order_ref, active=True)
        .exclude(state=RegistrationState.DRAFT)
        .order_by("event__date_begin", "id")
    )


def registration_names(*, registration_ids: list[int]) -> dict[int, str]:
    """{id: name} of registrations (the intake's confirmation page)."""
    return dict(Registration.objects.filter(pk__in=registration_ids).values_list("pk", "name"))


# The /ics route is the hottest read of the attendee surface: one plain, prepared statement (no
# ORM compile, no RawQuerySet column mapping) reads the registration with exactly the event and
# slot columns the gates and the calendar read, in the order of _CALENDAR_FIELDS, then the
# event's texts in the registration's language (its `translations` entry for that language).
_CALENDAR_FIELDS = (
    (Registration, ("id", "event_id", "slot_id", "state", "active", "token_version", "lang")),
    (
        Event,
        (
            "id",
            "name",
            "date_begin",
            "date_end",
            "date_tz",
            "venue",
            "address",
            "ticket_instructions",
            "ics_sequence",
            "kanban_state",
            "is_multi_slots",
        ),
    ),
    (Slot, ("id", "event_id", "start_datetime", "end_datetime")),
)
_CALENDAR_SQL = """
SELECT r.id, r.event_id, r.slot_id, r.state, r.active, r.token_version, r.lang,
       e.id, e.name, e.date_begin, e.date_end, e.date_tz, e.venue, e.address,
       e.ticket_instructions, e.ics_sequence, e.kanban_state, e.is_multi_slots,
       s.id, s.event_id, s.start_datetime, s.end_datetime,
       (e.translations -> r.lang)::text
  FROM events_registration r
  JOIN events_event e ON e.id = r.event_id
  LEFT JOIN events_slot s ON s.id = r.slot_id AND e.is_multi_slots
 WHERE r.id = %s
"""


def _loader(model: type[Model], names: tuple[str, ...]) -> tuple[Any, int, list[str], list[int]]:
    """`Model.from_db` takes values in the model's field order: the model, how many columns it
    has in the row, its field names in that order, and where each sits in `names`."""
    ordered = [f.attname for f in model._meta.concrete_fields if f.attname in names]
    return model, len(names), ordered, [names.index(name) for name in ordered]


_CALENDAR_LOADERS = [_loader(model, names) for model, names in _CALENDAR_FIELDS]


def _calendar_row(registration_id: int) -> tuple[Any, ...] | None:
    with pipeline.cursor() as cursor:
        cursor.execute(_CALENDAR_SQL, [registration_id])
        return cursor.fetchone()


def calendar_registration(*, registration_id: int) -> Registration | None:
    """One registration for /ics/ (archived or not), with its event, and its slot on a
    multi-slot event: one statement. Only the fields the capability check and the calendar
    read are loaded (any other field is deferred: reading it costs a query).

    The request's first statement: it tests the kept connection itself instead of the
    `SELECT 1` CONN_HEALTH_CHECKS sends before it (a sixth of the route's CPU, bench B5), and
    replaces a connection dropped since the last request (`pipeline.first_read`)."""
    row = pipeline.first_read(lambda: _calendar_row(registration_id))
    if row is None:
        return None
    instances: list[Any] = []
    start = 0
    for model, width, ordered, positions in _CALENDAR_LOADERS:
        values = row[start : start + width]
        start += width
        instances.append(
            None
            if values[0] is None  # no slot
            else model.from_db(connection.alias, ordered, [values[i] for i in positions])
        )
    registration, event, slot = instances
    # Only the registration's language of the event's translations is read (the calendar's).
    texts = row[start]
    event.translations = {registration.lang: json.loads(texts)} if texts else {}
    registration.event = event
    if slot is not None:
        registration.slot = slot
    return registration


def outbox_of_event(queryset: QuerySet[Any], event_id: int) -> QuerySet[Any]:
    """The rows of an outbox queryset (mail or SMS: the `registration` and `scheduler` keys)
    that belong to the event: its registrations' and its schedulers' (either key may have been
    cleared). A union of the two, each found through its key's index: an OR across both joins
    made PostgreSQL read the whole outbox, every event's messages."""
    model = queryset.model
    # Unordered halves (the model's default order would sort each), kept whole: `IN` needs no
    # de-duplicated list.
    of_registrations = model._default_manager.filter(registration__event_id=event_id)
    of_schedulers = model._default_manager.filter(scheduler__event_id=event_id)
    ids = (
        of_registrations.order_by()
        .values("pk")
        .union(of_schedulers.order_by().values("pk"), all=True)
    )
    return queryset.filter(pk__in=ids)


def audit_verbs() -> list[str]:
    """Every verb the audit trail holds, in order, for the admin's verb filter: a skip scan
    down the verb index (one index probe per verb, however many rows the trail has) where
    `SELECT DISTINCT verb` reads the whole trail."""
    return [verb for (verb,) in rows.fetch(_audit_verbs_sql(), [])]


@cache
def _audit_verbs_sql() -> str:
    table = connection.ops.quote_name(EventAuditLog._meta.db_table)
    # S608: the table's name from model meta; the statement takes no value.
    return f"""
        WITH RECURSIVE found (verb) AS (
            (SELECT verb FROM {table} ORDER BY verb LIMIT 1)
            UNION ALL
            SELECT later.verb
              FROM found,
                   LATERAL (SELECT a.verb FROM {table} a WHERE a.verb > found.verb
                             ORDER BY a.verb LIMIT 1) later
        )
        SELECT verb FROM found ORDER BY verb
    """  # noqa: S608
