"""Row locks in one fixed order (events ascending by id, then registrations).

Every path that can change seats locks the Event row first; that single lock serialises the
seat decision of an event (spec.md §3 rule 2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from django.db import connection
from django.db.transaction import TransactionManagementError

from events.db import rows
from events.models import (
    Event,
    IntervalType,
    Mail,
    Registration,
    Ticket,
    WaitlistEntry,
    WaitlistState,
)


def lock_events(event_ids: Iterable[int]) -> dict[int, Event]:
    ids = sorted(set(event_ids))
    rows = Event.objects.select_for_update(of=("self",)).filter(pk__in=ids).order_by("pk")
    return {event.pk: event for event in rows}


# The two locks every transition takes, as fixed statements on a server-binding cursor
# (pipeline.cursor): psycopg prepares them on their second use on a connection, so PostgreSQL
# neither parses nor plans them again (planning the registration's join cost more than running
# it), and the ORM does not compile them on every call.


@cache
def _lock_sql() -> dict[str, str]:
    registration, ticket = Registration._meta.db_table, Ticket._meta.db_table
    mail, entry = Mail._meta.db_table, WaitlistEntry._meta.db_table
    return {
        "after_sub": f"""
            SELECT {rows.columns(Mail, "m")} FROM {mail} m
             WHERE m.event_id = %s AND m.interval_type = '{IntervalType.AFTER_SUB.value}'
             ORDER BY m.id
        """,  # noqa: S608
        "waiting": f"""
            SELECT EXISTS (SELECT 1 FROM {entry} w
                            WHERE w.event_id = %s AND w.state = '{WaitlistState.WAITING.value}')
        """,  # noqa: S608
        "event": f"""
            SELECT {rows.columns(Event, "e")} FROM {Event._meta.db_table} e
             WHERE e.id = %s FOR UPDATE OF e
        """,  # noqa: S608
        "registration": f"""
            SELECT {rows.columns(Registration, "r")}, {rows.columns(Ticket, "t")}
              FROM {registration} r LEFT JOIN {ticket} t ON t.id = r.ticket_id
             WHERE r.id = %s FOR UPDATE OF r
        """,  # noqa: S608
    }  # S608: built from constants (table and column names from model meta); values are params


def _require_transaction() -> None:
    if connection.get_autocommit():
        # What the ORM's select_for_update refuses too: outside a transaction the lock would
        # end with the statement.
        raise TransactionManagementError("A row lock needs a transaction (transaction.atomic).")


def _locked(name: str, key: int, models: tuple) -> tuple:
    _require_transaction()
    found = rows.load_joined(models, rows.fetch(_lock_sql()[name], [key]))
    if not found:
        model = models[0]
        raise model.DoesNotExist(f"{model.__name__} {key} does not exist.")
    return found[0]


def lock_event(event_id: int) -> Event:
    """The Event row, locked until the transaction ends."""
    (event,) = _locked("event", event_id, (Event,))
    return event


def lock_event_and_registration(event_id: int, registration_id: int) -> tuple[Event, Registration]:
    """The Event row, then the registration row (with its ticket, as `lock_registration`),
    locked until the transaction ends — in that order, in one round trip, which also carries
    BEGIN when it is the transaction's first statement (rows.fetch_many)."""
    reads = lock_for_transition(event_id, registration_id)
    return reads.event, reads.registration


@dataclass
class TransitionReads:
    """What a transition decides on, read under its two locks."""

    event: Event  # locked
    registration: Registration  # locked, with its ticket
    after_sub: list[Mail] | None  # the event's after_sub schedulers, when asked for
    someone_waits: bool | None  # whether its waiting list has a waiting entry, when asked for


def lock_for_transition(
    event_id: int, registration_id: int, *, after_sub: bool = False, waiting: bool = False
) -> TransitionReads:
    """`lock_event_and_registration`, and in the same round trip, as later statements (so they
    see what was committed when the locks were granted; a waiting-list join and a scheduler's
    creation take the Event lock too): the event's after_sub schedulers (`after_sub`: a
    registration entering `open` gets their rows) and whether someone waits on its waiting
    list (`waiting`: a freed seat nudges the offer pass)."""
    _require_transaction()
    sql = _lock_sql()
    statements = [(sql["event"], [event_id]), (sql["registration"], [registration_id])]
    if after_sub:
        statements.append((sql["after_sub"], [event_id]))
    if waiting:
        statements.append((sql["waiting"], [event_id]))
    found = rows.fetch_many(statements, own_transaction=True)
    event_rows, registration_rows = found[0], found[1]
    if not event_rows:
        raise Event.DoesNotExist(f"Event {event_id} does not exist.")
    if not registration_rows:
        raise Registration.DoesNotExist(f"Registration {registration_id} does not exist.")
    ((event,),) = rows.load_joined((Event,), event_rows)
    ((reg, ticket),) = rows.load_joined((Registration, Ticket), registration_rows)
    rows.attach(reg, "ticket", ticket)
    more = iter(found[2:])
    schedulers = [m for (m,) in rows.load_joined((Mail,), next(more))] if after_sub else None
    someone_waits = bool(next(more)[0][0]) if waiting else None
    return TransitionReads(event, reg, schedulers, someone_waits)


def lock_registration(registration_id: int) -> Registration:
    """The registration row, locked until the transaction ends, with its ticket (the seat
    check needs its limit)."""
    reg, ticket = _locked("registration", registration_id, (Registration, Ticket))
    rows.attach(reg, "ticket", ticket)  # also None (no ticket): no query on access
    return reg
