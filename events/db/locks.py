"""Row locks in one fixed order (events ascending by id, then registrations).

Every path that can change seats locks the Event row first; that single lock serialises the
seat decision of an event (spec.md §3 rule 2).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection
from django.db.transaction import TransactionManagementError

from events.db import rows
from events.db.dberrors import guard_refusal
from events.models import (
    Event,
    IntervalType,
    Mail,
    Question,
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


# --- the booking's inputs and its lock (registrations.register) -----------------------------
#
# A booking is one statement (registrations.register): it decides on its inputs as read
# earlier, and its first CTE takes the Event row lock and checks, under it, that those inputs
# are still what is committed and that its slot is still the event's (`events_booking_lock`,
# migrations 0013 and 0014). The inputs are one JSON document made by the database itself
# (`events_booking_inputs`): the event row, its stage's pipe_end, whether it has tickets, the
# requested ticket, the active questions with their choice ids, the after_sub schedulers'
# deciding columns; the digest is its md5. Each thread keeps the inputs it read last per
# (event, ticket), so a booking usually reads nothing first.


@dataclass
class BookingReads:
    """What a booking decides on."""

    event: Event  # `has_tickets` and `stage_pipe_end` set
    ticket: Ticket | None  # the requested ticket; None: none asked or gone
    questions: dict[int, Question]  # active, in display order
    choices: dict[int, frozenset[int]]  # question id -> its choice ids (shared: frozen)
    after_sub: list[Mail]  # the event's after_sub schedulers (their deciding columns only)
    digest: str  # md5 of the inputs document these were made from
    kept: bool = False  # as the thread kept them from an earlier booking (not read for this one)


# The registration ids' sequence (PostgreSQL names an identity column's sequence
# <table>_<column>_seq; tests/events/booking/test_registrations.py checks it against
# pg_get_serial_sequence). `events_booking_lock` draws from it by this name.
REGISTRATION_SEQUENCE = f"{Registration._meta.db_table}_id_seq"

# The after_sub scheduler columns a booking decides on (scheduler.registrations_opened), the
# ones `events_booking_inputs` puts in the document; the others are left deferred on the
# instances, which the thread keeps and shares between bookings: nothing the booking runs
# reads them (a read would cost a query and leave its value on the kept instance).
AFTER_SUB_COLUMNS = ("id", "interval_nbr", "interval_unit", "created_at", "include_existing")

_AFTER_SUB_FIELDS = {f.attname: f for f in Mail._meta.concrete_fields}
_INPUTS_SQL = "SELECT i::text, md5(i::text) FROM events_booking_inputs(%s, %s) AS i"
_LOCK_SQL = f"SELECT id FROM {Event._meta.db_table} WHERE id = %s FOR UPDATE"  # noqa: S608
# (event, ticket) pairs a thread keeps the inputs of, the least recently used dropped first:
# a rush books a few events; each entry is ~4 KiB, and a served process runs 16 threads.
_KEPT = 32
_kept = threading.local()


def booking_inputs(
    event_id: int, ticket_id: int | None, *, fresh: bool = False, lock: bool = False
) -> BookingReads:
    """The inputs of a booking of `event_id` (with `ticket_id`), as this thread read them last,
    or read now (one round trip) when it has none or `fresh`. `lock`: read them under the
    Event row lock, taken first in the caller's transaction (an atomic block; BEGIN travels
    with it when nothing was sent in that block yet): a booking that must not be refused as
    stale. Raises Event.DoesNotExist when there is no such event."""
    key = (event_id, ticket_id)
    kept: dict = getattr(_kept, "inputs", None) or {}
    if not (fresh or lock) and key in kept:
        kept[key] = entry = kept.pop(key)  # the most recently used last
        return _reads(entry, kept=True)
    statements = [(_INPUTS_SQL, [event_id, ticket_id])]
    if lock:
        _require_transaction()
        statements.insert(0, (_LOCK_SQL, [event_id]))
        found = rows.fetch_many(statements, own_transaction=True)[-1]
    else:
        found = rows.fetch(*statements[0])
    document, digest = found[0] if found else (None, None)
    if document is None:
        kept.pop(key, None)
        raise Event.DoesNotExist(f"Event {event_id} does not exist.")
    kept.pop(key, None)
    while len(kept) >= _KEPT:
        del kept[next(iter(kept))]  # the least recently used
    kept[key] = entry = _parsed(document, digest)
    _kept.inputs = kept
    return _reads(entry)


def forget_booking_inputs(event_id: int, ticket_id: int | None) -> None:
    """Drop this thread's inputs of the pair (the booking found them stale)."""
    kept = getattr(_kept, "inputs", None)
    if kept is not None:
        kept.pop((event_id, ticket_id), None)


def _parsed(document: str, digest: str) -> tuple:
    """The inputs document as what `_reads` builds a booking's instances from: the event's and
    the ticket's field values (each through its field's `to_python`), the questions and the
    after_sub schedulers as instances (shared by the bookings that use this entry; never
    handed out), the choices, the digest."""
    event, pipe_end, has_tickets, ticket, questions, after_sub = json.loads(
        document, parse_float=Decimal
    )
    questions = questions or []
    return (
        _values(Event, event),
        pipe_end,
        has_tickets,
        _values(Ticket, ticket) if ticket is not None else None,
        {q.pk: q for q in rows.from_json(Question, questions)},
        {q["id"]: frozenset(q["choice_ids"]) for q in questions},
        [
            Mail.from_db(
                DEFAULT_DB_ALIAS,
                list(AFTER_SUB_COLUMNS),
                [_AFTER_SUB_FIELDS[name].to_python(m[name]) for name in AFTER_SUB_COLUMNS],
            )
            for m in after_sub or ()
        ],
        digest,
    )


def _values(model, document: dict) -> tuple[list[str], list]:
    fields = model._meta.concrete_fields
    return [f.attname for f in fields], [f.to_python(document[f.column]) for f in fields]


def _reads(entry: tuple, kept: bool = False) -> BookingReads:
    """A booking's own Event and Ticket instances (it hands them out on its registrations)
    from a kept entry (`_parsed`)."""
    event, pipe_end, has_tickets, ticket, questions, choices, after_sub, digest = entry
    locked = Event.from_db(DEFAULT_DB_ALIAS, *event)
    locked.stage_pipe_end, locked.has_tickets = pipe_end, has_tickets
    return BookingReads(
        event=locked,
        ticket=Ticket.from_db(DEFAULT_DB_ALIAS, *ticket) if ticket is not None else None,
        questions=questions,
        choices=choices,
        after_sub=after_sub,
        digest=digest,
        kept=kept,
    )


def booking_lock(
    reads: BookingReads, ticket_id: int | None, slot_id: int | None, count: int
) -> rows.Rider:
    """The booking statement's first CTE (a leading rider, rows.BOOKING_CTE): the Event row
    lock, the check that `reads` are what is committed once it is granted and that the slot
    (if any) is still the event's, and `count` registration ids drawn under it (`rows.Drawn`
    refers to them; the rider's answer is their array). A failed check fails the statement:
    `is_stale` and `is_slot_gone` tell those errors (migration 0014)."""
    return rows.Rider(
        ctes=(
            f"{rows.BOOKING_CTE} AS MATERIALIZED ("
            "SELECT events_booking_lock(%s, %s, %s, %s, %s) AS ids)"
        ),
        params=[reads.event.pk, ticket_id, slot_id, reads.digest, count],
        counted=rows.BOOKING_CTE,
        column=f"(SELECT ids FROM {rows.BOOKING_CTE})",  # noqa: S608 — a constant name
        leading=True,
    )


def is_stale(exc: DatabaseError) -> bool:
    """Whether the database error is the booking lock's refusal of stale inputs."""
    return guard_refusal(exc)[0] == "events_booking_stale"


def is_slot_gone(exc: DatabaseError) -> bool:
    """Whether the database error is the booking lock's refusal of a slot that is no longer
    the event's (deleted since the caller read it)."""
    return guard_refusal(exc)[0] == "events_booking_no_slot"


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
