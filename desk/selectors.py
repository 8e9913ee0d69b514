"""Reads of the attendance desk (spec-overlay.md §5); each one a fixed number of queries.

Whether an event admits anyone (§5.1 step 4) is core's one decision of "closed"
(`events.rules.closed_reason` / `closed_events`: cancelled by kanban or by a cancelled
stage, in another ending stage, or finished), on the stage the lookup already joined.
Counters come from the one seat module: attended = `used`, expected = `reserved + used` (the
attendees holding a seat; a waiting-list offer holds one too, but nobody comes to the door
with it), per slot when the desk admits for one slot.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.db.models import Exists, OuterRef

from events import rules as core_rules
from events.models import Event, Registration, RegistrationAnswer, Slot, Stage, Ticket
from events.read import statements
from events.read.statements import orm_sql
from events.services import seats

UPCOMING_LIMIT = 50

# The scan's reads are written by the ORM once per process and kept
# (`events.read.statements.orm_sql`), then run on Django's cursor: compiling a query costs more
# CPU than PostgreSQL spends running it (measured: the lookup's five-model join ~2 ms and the
# answers' ~1 ms of a scan's ~6 ms), and their text never changes.

# The lookup's models, each with its path from the registration, in select order.
_JOINED: tuple[tuple[type[Any], str], ...] = (
    (Registration, ""),
    (Event, "event__"),
    (Stage, "event__stage__"),
    (Ticket, "ticket__"),
    (Slot, "slot__"),
)
_NAMES = {model: tuple(f.attname for f in model._meta.concrete_fields) for model, _ in _JOINED}


@cache
def _lookup_sql(key: str) -> str:
    """The registration with its event, the event's stage, its ticket and slot (outer-joined:
    either may be unset), found by `key` (`barcode`, `pk`)."""
    names = [path + name for model, path in _JOINED for name in _NAMES[model]]
    probe = {"barcode": "", "pk": 0}[key]
    query = Registration.objects.filter(**{key: probe}).order_by().values_list(*names)
    return orm_sql(query, [probe])


def _lookup(key: str, value: Any) -> Registration | None:
    """One query: the row of `_lookup_sql`, as instances (`Model.from_db`), the event's stage,
    the registration's event, ticket and slot set on them (no query when read)."""
    with connection.cursor() as cursor:
        cursor.execute(_lookup_sql(key), [value])
        row = cursor.fetchone()
    if row is None:
        return None
    found = []
    start = 0
    for model, _ in _JOINED:
        names = _NAMES[model]
        values = row[start : start + len(names)]
        start += len(names)
        pk = values[names.index(model._meta.pk.attname)]
        found.append(None if pk is None else statements.instance(model, names, values))
    reg, event, stage, ticket, slot = found
    event.stage = stage
    reg.event, reg.ticket, reg.slot = event, ticket, slot
    return reg


def scanned_registration(*, barcode: str) -> Registration | None:
    """The registration whose barcode is exactly `barcode` (the unique index: no case folding,
    no prefix), with its event and the event's stage, ticket and slot: one query."""
    return _lookup("barcode", barcode)


def desk_registration(*, registration_id: int) -> Registration | None:
    """One registration for the manual confirmation, joined like `scanned_registration`."""
    return _lookup("pk", registration_id)


_USER_ID = object()  # where the user id goes among the permission statement's parameters


@cache
def _permission_sql(permission: str) -> tuple[str, tuple[Any, ...]]:
    """Whether a user holds `permission` ("app_label.codename") directly and through one of its
    groups, as Django's model backend reads them (two statements there), in one statement
    written by the ORM once; with its parameters, `_USER_ID` where the user id goes."""
    app_label, codename = permission.split(".", 1)
    user_model = get_user_model()
    granted = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
    direct = user_model.user_permissions.through.objects.filter(
        user_id=OuterRef("pk"), permission__in=granted
    )
    grouped = user_model.groups.through.objects.filter(
        user_id=OuterRef("pk"), group__permissions__in=granted
    )
    probe = -1  # no user has it: marks the user id among the parameters
    query = (
        user_model._default_manager.filter(pk=probe)
        .order_by()
        .annotate(direct=Exists(direct), grouped=Exists(grouped))
        .values_list("direct", "grouped")
    )
    params = list(query.query.sql_with_params()[1])
    sql = orm_sql(query, params)
    return sql, tuple(_USER_ID if value == probe else value for value in params)


def holds_permission(*, user_id: int, permission: str) -> bool:
    """Django's model-backend answer to `has_perm(permission)` for an active user who is not a
    superuser: granted to the user or to one of its groups. One query, its text written once
    (Django's backend runs two, compiled anew for every request's user)."""
    sql, template = _permission_sql(permission)
    params = [user_id if value is _USER_ID else value for value in template]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row is not None and bool(row[0] or row[1])


def is_not_ongoing(event: Event, *, now: datetime) -> bool:
    """§5.1 step 4: the event is closed (core's one decision; `event.stage` loaded by the
    caller). Not started yet is fine (early entrance)."""
    return core_rules.is_closed(event, now=now)


def slot_event_id(*, slot_id: int) -> int | None:
    """The event of a slot, or None when no slot has this id."""
    return Slot.objects.filter(pk=slot_id).values_list("event_id", flat=True).first()


def desk_slots(*, event: Event) -> list[Slot]:
    """The slots a multi-slot event's desk chooses from, in time order (none otherwise)."""
    if not event.is_multi_slots:
        return []
    return list(Slot.objects.filter(event=event).order_by("start_datetime", "id"))


@cache
def _choice_answers_sql() -> str:
    query = (
        RegistrationAnswer.objects.filter(registration_id=0, choice__isnull=False)
        .order_by("question__sequence", "question_id")
        .values_list("question__title", "choice__name")
    )
    return orm_sql(query, [0])


def choice_answers(*, registration_id: int) -> list[str]:
    """The registration's choice answers as "Question: Choice", in question order (one query;
    answers without a choice, free text, are not shown)."""
    with connection.cursor() as cursor:
        cursor.execute(_choice_answers_sql(), [registration_id])
        found = cursor.fetchall()
    return [f"{title}: {choice}" for title, choice in found]


def counters(*, event: Event, slot_id: int | None = None) -> dict[str, int]:
    """attended (seats `used`) / expected (`reserved + used`: open + done registrations), from
    the seat ledger: the event's, or one slot's."""
    if slot_id is not None:
        summary = seats.slot_summary(event=event, slot_id=slot_id)
    else:
        summary = seats.event_summary(event=event)
    return {"attended": summary.used, "expected": summary.reserved + summary.used}


def snapshot_registrations(*, event: Event) -> list[Registration]:
    """Every registration of the event, whatever its state, with only what the door's offline
    decision and answer need (the ticket's name, the slot's label): one query."""
    return list(
        Registration.objects.filter(event=event)
        .select_related("ticket", "slot")
        .only(
            "barcode",
            "state",
            "name",
            "sale_status",
            "is_paid",
            "date_closed",
            "event_id",
            "ticket__name",
            "slot__date",
            "slot__start_hour",
            "slot__end_hour",
        )
        .order_by("pk")
    )


def desk_event(*, event_id: int) -> Event | None:
    return Event.objects.select_related("stage").filter(pk=event_id, active=True).first()


def desk_events(*, now: datetime) -> list[dict]:
    """Ongoing and upcoming events to pick at the desk (not closed: core's `closed_events`),
    soonest first, each with its counters: three queries whatever the number of events."""
    events = list(
        Event.objects.filter(active=True)
        .exclude(core_rules.closed_events(now=now))
        .select_related("stage")
        .order_by("date_begin", "id")[:UPCOMING_LIMIT]
    )
    totals = seats.summaries(events)
    return [
        {
            "event": event,
            "ongoing": core_rules.is_ongoing(event, now=now),
            "attended": totals[event.pk].used,
            "expected": totals[event.pk].reserved + totals[event.pk].used,
        }
        for event in events
    ]
