"""The Python face of the booking's SQL functions (events/db/sql/book.sql).

- `read_inputs(event_id, ticket_id)` reads what a booking decides on, as one frozen
  `BookingInputs` (one round trip): the database builds the document
  (`events_booking_inputs`) and its md5, the digest. `lock=True` reads them under the Event
  row lock, inside the caller's transaction: inputs that cannot be stale.
- `book(document)` runs `events_book` (one round trip; outside a transaction it is its own
  transaction): the Event lock, the digest check, the seats, the rows; it answers the ids and
  the names the overlays' triggers asked to be told after commit (`events.after_commit`).
  The document is made by `document(...)` from the model instances the booking built
  (`record`), so the SQL decides nothing that Python decides.
- `is_stale`, `is_slot_gone`, `is_barcode_collision` read the refusals.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import cache
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connections, models
from django.utils import timezone
from psycopg.types.json import Json, Jsonb

from events.db import rows
from events.db.dberrors import guard_refusal, violated_constraint
from events.models import Event, Mail, Question, Ticket

_INPUTS_SQL = "SELECT i::text, md5(i::text) FROM events_booking_inputs(%s, %s) AS i"
_LOCK_SQL = f"SELECT id FROM {Event._meta.db_table} WHERE id = %s FOR UPDATE"  # noqa: S608
_BOOK_SQL = "SELECT registration_ids, after_commit FROM events_book(%s::jsonb)"

# The after_sub scheduler columns a booking decides on (scheduler.after_sub_rows), the ones
# `events_booking_inputs` puts in the document; the others stay deferred on the instances.
AFTER_SUB_COLUMNS = ("id", "interval_nbr", "interval_unit", "created_at", "include_existing")


@dataclass(frozen=True)
class BookingInputs:
    """What a booking decides on, as the database held it when read."""

    event: Event  # `has_tickets` and `stage_pipe_end` set
    ticket_id: int | None  # the ticket asked for (the digest covers its row)
    ticket: Ticket | None  # that ticket's row; None: none asked for, or gone
    questions: dict[int, Question]  # active, in display order
    choices: dict[int, frozenset[int]]  # question id -> its choice ids
    after_sub: tuple[Mail, ...]  # the event's after_sub schedulers (deciding columns only)
    digest: str  # md5 of the document these were made from; events_book compares it


def read_inputs(event_id: int, ticket_id: int | None, *, lock: bool = False) -> BookingInputs:
    """The inputs of a booking of `event_id` (with `ticket_id`). `lock`: under the Event row
    lock, taken first in the caller's transaction (one round trip with the read; BEGIN travels
    with them when nothing was sent in the block yet). Raises Event.DoesNotExist when there is
    no such event."""
    if lock:
        found = rows.fetch_many(
            [(_LOCK_SQL, [event_id]), (_INPUTS_SQL, [event_id, ticket_id])], own_transaction=True
        )[-1]
    else:
        found = rows.fetch(_INPUTS_SQL, [event_id, ticket_id])
    if not found or found[0][0] is None:
        raise Event.DoesNotExist(f"Event {event_id} does not exist.")
    (text, digest), *_ = found
    return inputs_from(text, digest, ticket_id)


# What a caller adds to a statement of its own to read the inputs with it (the public intake:
# one round trip for its checks' reads and the booking's inputs): a LATERAL join on the event
# row aliased `e`, with the ticket id as its one parameter; it selects `inputs_text` (NULL
# when the event has none: never) and `inputs_digest`, which `inputs_from` takes.
INPUTS_JOIN = """
    LEFT JOIN LATERAL (
        SELECT i::text AS inputs_text, md5(i::text) AS inputs_digest
          FROM events_booking_inputs(e.id, %s) AS i
    ) AS booking_inputs ON true
"""


def inputs_from(text: str, digest: str, ticket_id: int | None) -> BookingInputs:
    """`BookingInputs` from the inputs document (`events_booking_inputs`'s text) and its md5,
    read for `ticket_id`."""
    event, pipe_end, has_tickets, ticket, questions, after_sub = json.loads(
        text, parse_float=Decimal
    )
    locked = _instance(Event, event)
    locked.stage_pipe_end, locked.has_tickets = pipe_end, has_tickets
    questions = questions or []
    return BookingInputs(
        event=locked,
        ticket_id=ticket_id,
        ticket=_instance(Ticket, ticket) if ticket is not None else None,
        questions={q.pk: q for q in rows.from_json(Question, questions)},
        choices={q["id"]: frozenset(q["choice_ids"]) for q in questions},
        after_sub=tuple(
            Mail.from_db(
                DEFAULT_DB_ALIAS,
                list(AFTER_SUB_COLUMNS),
                [_after_sub_fields()[name].to_python(m[name]) for name in AFTER_SUB_COLUMNS],
            )
            for m in after_sub or ()
        ),
        digest=digest,
    )


@cache
def _after_sub_fields() -> dict[str, models.Field]:
    return {f.attname: f for f in Mail._meta.concrete_fields}


def _instance(model, document: dict):
    fields = model._meta.concrete_fields
    return model.from_db(
        DEFAULT_DB_ALIAS,
        [f.attname for f in fields],
        [f.to_python(document[f.column]) for f in fields],
    )


def document(
    inputs: BookingInputs,
    *,
    ticket_id: int | None,
    slot_id: int | None,
    registrations: Sequence[models.Model],
    answers: Sequence[models.Model] = (),
    audit: Sequence[models.Model] = (),
    mails: Sequence[models.Model] = (),
    seats: dict[str, Any] | None = None,
) -> str:
    """The booking document `events_book` takes, as JSON text. The followers'
    `registration_id` are places in `registrations` (from 1; the registrations' own primary
    keys are ignored there: the insert draws them); `seats`:
    {"requested": n, "changes": [[slot, ticket, reserved, used, held], …], "limits":
    [[slot, ticket, max], …]}, or None when the booking takes no seat."""
    now = timezone.now()
    body: dict[str, Any] = {
        "event": inputs.event.pk,
        "ticket": ticket_id,
        "slot": slot_id,
        "digest": inputs.digest,
        "registrations": [record(row, now) for row in registrations],
        "audit": [record(row, now) for row in audit],
    }
    if answers:
        body["answers"] = [record(row, now) for row in answers]
    if mails:
        body["mails"] = [record(row, now) for row in mails]
    if seats is not None:
        body["seats"] = seats
    return json.dumps(body, default=_json_value, separators=(",", ":"))


def record(instance: models.Model, now: datetime) -> dict[str, Any]:
    """The instance as a row of its table ({column: value}), each value through the field's
    `pre_save` and `get_db_prep_save` as the ORM's INSERT does (auto_now / auto_now_add take
    `now`, set on the instance too). The instance counts as saved from here on."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    values = instance.__dict__
    row: dict[str, Any] = {}
    for field, attname, python_type in rows.insert_plan(type(instance)):
        value = values.get(attname)
        if python_type is rows.NOW:
            values[attname] = value = now
        elif python_type is None or (
            value is not None
            and (
                type(value) is not python_type
                or (isinstance(value, datetime) and value.tzinfo is None)
            )
        ):
            value = field.get_db_prep_save(field.pre_save(instance, True), wrapper)
        row[field.column] = value
    instance._state.adding = False
    instance._state.db = DEFAULT_DB_ALIAS
    return row


def _json_value(value: Any) -> Any:
    """The JSON form of a value `get_db_prep_save` gave, as PostgreSQL reads it back into its
    column's type (jsonb_populate_record). tests/events/booking/test_book_function.py holds
    every column of the booked models to having one."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):  # an interval
        return f"{value.total_seconds()} seconds"
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):  # bytea's hex form
        return "\\x" + bytes(value).hex()
    if isinstance(value, Json | Jsonb):  # a JSONField's value, adapted for psycopg
        dumps = value.dumps or json.dumps  # the field's own encoder, when it has one
        return json.loads(dumps(value.obj))
    raise TypeError(f"{type(value).__name__} has no JSON form in a booking document")


def book(booking_document: str) -> tuple[list[int], frozenset[str]]:
    """Run `events_book` on the document: the registration ids it drew (ascending, one per
    registration in the document's order), and the names the overlays' triggers asked to be
    told after commit (`after_commit_names`). Refusals raise DatabaseError (`is_stale`,
    `is_slot_gone`; the seat guard's, read by events.services.seats)."""
    ((ids, after_commit),) = rows.fetch(_BOOK_SQL, [booking_document])
    return list(ids), after_commit_names(after_commit)


# The transaction-local setting an overlay's trigger appends its name to when it wrote
# something that needs after-commit work (events.hooks); taken at the end of a verb's writes
# (read, then emptied: a later verb of the same transaction answers for its own writes). The
# select list is evaluated in order.
AFTER_COMMIT_SQL = (
    "SELECT current_setting('events.after_commit', true), "
    "set_config('events.after_commit', '', true)"
)


def after_commit_names(value: str | None) -> frozenset[str]:
    """The names in an `events.after_commit` value (NULL or "" when none)."""
    return frozenset(name for name in (value or "").split(",") if name)


def is_stale(exc: DatabaseError) -> bool:
    """Whether `exc` is events_book's refusal of inputs that changed since they were read."""
    return guard_refusal(exc)[0] == "events_booking_stale"


def is_slot_gone(exc: DatabaseError) -> bool:
    """Whether `exc` is events_book's refusal of a slot that is no longer the event's."""
    return guard_refusal(exc)[0] == "events_booking_no_slot"


def is_barcode_collision(exc: IntegrityError) -> bool:
    """Whether the error is a registration barcode drawn twice (its unique index)."""
    return "barcode" in violated_constraint(exc)
