"""The booking: `register` and what it needs (barcodes, the collision check).

Invariants:
- `Registration.state` is written here and nowhere else; only the transitions of TRANSITIONS
  exist, anything else raises `InvalidTransition` and writes nothing;
- entering `open`/`done` goes through the seat module under the Event row lock (lock first,
  then decide, then write); a request for n attendees succeeds or fails whole;
- every verb writes its audit rows in the same transaction; side effects run after commit.

The booking (`register`) is one statement, which PostgreSQL runs as its own transaction: one
wait for the server whatever the number of attendees (pipeline.lone_statement; counted on the
wire by tests/probes/test_round_trips.py):
1. it decides on the event's inputs — flags, stage, ticket, questions, after_sub schedulers —
   as this thread read them last (locks.booking_inputs; read first when it has none);
2. it sends every write as one statement: its first CTE takes the Event row lock and confirms
   that those inputs are what is committed now (locks.booking_lock), and draws the new
   registrations' ids under the lock; the registrations, answers, audit and after_sub rows
   (which carry those ids: rows.Drawn), the overlays' riding hooks (events.hooks) and the seat
   increment (an upsert returning the counters it produced and checking every limit against
   them: seats.send_reserve) follow as CTEs that wait for it. A refusal (a limit exceeded, a
   unique barcode taken) fails the statement, which writes nothing; the seat guard's refusal
   comes out as `SeatsUnavailable`;
3. inputs the lock did not confirm (edited since the thread read them) fail the statement too:
   the booking then reads them under the lock, in a transaction, decides on them and sends the
   statement again (docs/spec.md, register P12); a refusal decided before the statement on
   kept inputs is decided again on inputs read for this booking.
Inside a caller's transaction the atomic block is a savepoint (SAVEPOINT and RELEASE cost a
round trip each; `savepoint=False` spares both to callers whose whole block fails with the
booking, whose inputs are then read under the lock first).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from events import hooks
from events.db import locks, pipeline
from events.db import rows as sql_rows
from events.db.dberrors import violated_constraint
from events.errors import (
    DomainError,
    InvalidTransition,
    RegistrationsClosed,
    SeatsUnavailable,
    ValidationFailed,
)
from events.models import (
    ContactSource,
    Event,
    KanbanState,
    Question,
    Registration,
    RegistrationAnswer,
    Slot,
    Ticket,
)
from events.services import audit, scheduler, seats
from events.services.registrations.rules import (
    SALE_STATUSES,
    TRANSITIONS,
    UNKNOWN,
    S,
    _contact_fields,
    _Unknown,
    check_pair,
    clean_answers,
)

BARCODE_ATTEMPTS = 5


def new_barcode() -> str:
    """The decimal form of 64 random bits (≤ 20 digits)."""
    return str(secrets.randbits(64))


def register(
    *,
    event: Event,
    attendees: Sequence[Mapping[str, Any]],
    ticket: Ticket | None = None,
    slot: Slot | None = None,
    state: str = "open",
    partner_ref: str | None = None,
    sale_order_ref: str | None = None,
    sale_order_line_ref: str | None = None,
    sale_status: str = "free",
    utm: Mapping[str, str] | None = None,
    actor: Any,
    contact_sources: Sequence[str] | None = None,
    recheck: Callable[[Event, Ticket | None], None] | None = None,
    held_seats: int = 0,
    now=None,
    savepoint: bool = True,
) -> list[Registration]:
    """Create one registration per attendee, all or none.

    `held_seats`: that many of the attendees take seats held for them in the seat ledger (an
    accepted waiting-list offer, events.services.waitlist): those move from held to reserved
    instead of being taken again; the limits are still checked on the counters produced.

    An attendee is a mapping with name, email, phone, company_name and answers
    ({question_id: text | choice_id}). `contact_sources` (one per attendee, default
    "attendee") marks rows whose details came from the host partner. The ticket is taken from
    the booking's inputs, which the statement confirms under the Event row lock (its limit is
    the one booked against). `recheck(event, ticket)` runs with the inputs' event and ticket,
    before the answers and seats are decided: the caller's own gates on what can change
    meanwhile (the public intake re-checks stage, end date and sale window there); it refuses
    by raising a DomainError. Nothing is written unless the lock confirms those inputs; when it
    does not, the booking decides again on inputs read under the lock, `recheck` included (so
    it may run twice).

    `savepoint=False`, inside a caller's transaction: no savepoint of its own (SAVEPOINT and
    RELEASE are a round trip each). For callers whose whole block fails with the booking (a
    seam message's effect, events.services.orders.mint): any error, a refusal included,
    leaves the caller's transaction to be rolled back to its own savepoint or whole (it must
    not catch it and go on), and a barcode collision cannot be retried in that transaction:
    it is raised (IntegrityError, `is_barcode_collision`) for the caller to roll its
    transaction back and run it again (the seam does). Outside a transaction it changes
    nothing.
    """
    if (None, state) not in TRANSITIONS:
        raise InvalidTransition(f"A registration cannot be created in state {state!r}.")
    if not attendees:
        raise ValidationFailed("At least one attendee is needed.", code="invalid_quantity")
    if sale_status not in SALE_STATUSES:
        raise ValidationFailed(f"Unknown sale status {sale_status!r}.", code="invalid_value")
    if not 0 <= held_seats <= len(attendees) or (held_seats and state != S.OPEN):
        raise ValueError(f"held_seats={held_seats} for {len(attendees)} {state} attendee(s)")
    now = now or timezone.now()
    request = {
        "attendees": attendees,
        "ticket": ticket,
        "slot": slot,
        "state": state,
        "partner_ref": partner_ref or "",
        "sale_order_ref": sale_order_ref or "",
        "sale_order_line_ref": sale_order_line_ref or "",
        "sale_status": sale_status,
        "utm": utm or {},
        "contact_sources": contact_sources,
        "recheck": recheck,
        "held_seats": held_seats,
        "actor": actor,
        "now": now,
        "savepoint": savepoint,
    }
    # A barcode collision (unique index) aborts the transaction: the whole verb is retried with
    # fresh barcodes. Retrying here, outside the atomic block, spares every booking the
    # savepoint an in-transaction retry would need; a collision is never surfaced — except
    # inside a caller's transaction without a savepoint (an atomic block, or autocommit turned
    # off by hand: the failed statement aborted it), which only the caller can roll back.
    retryable = savepoint or (not connection.in_atomic_block and connection.get_autocommit())
    for attempt in range(BARCODE_ATTEMPTS):
        try:
            return _register(event.pk, **request)
        except IntegrityError as exc:
            if not (retryable and is_barcode_collision(exc)) or attempt == BARCODE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def is_barcode_collision(exc: IntegrityError) -> bool:
    """Whether the error is a registration barcode drawn twice (its unique index)."""
    return "barcode" in violated_constraint(exc)


def _register(event_id: int, *, ticket: Ticket | None, savepoint: bool, **request: Any):
    """The booking, as one statement; its inputs as this thread read them last, checked under
    the lock by the statement itself. Stale inputs: read again, under the lock this time, and
    book once more. A refusal decided before the statement (a closed event, a pair or an answer
    refused, the caller's recheck) is never decided on kept inputs: they are read again first
    (module docstring)."""
    ticket_id = ticket.pk if ticket is not None else None
    # Inside a caller's transaction with no savepoint (an atomic block, or one managed by hand)
    # a stale refusal could not be retried: the inputs are read under the lock there, first.
    lock = savepoint is False and (connection.in_atomic_block or not connection.get_autocommit())
    fresh = False
    while True:
        # Kept, or read now — before the atomic block, so that the booking statement can still
        # be the block's only one (one round trip, pipeline.lone_statement).
        reads = None if lock else locks.booking_inputs(event_id, ticket_id, fresh=fresh)
        try:
            with transaction.atomic(savepoint=savepoint):
                if reads is None:
                    reads = locks.booking_inputs(event_id, ticket_id, lock=True)
                return _book(reads, ticket_id=ticket_id, alone=not lock, **request)
        except SeatsUnavailable:
            raise  # decided by the ledger, under the lock, in the statement
        except DomainError:
            if reads is None or not reads.kept:
                raise
            fresh = True  # refused on kept inputs: decide again on inputs read now
        except DatabaseError as exc:
            if locks.is_slot_gone(exc):
                # The caller's slot was deleted since it read it (a slot is not one of the
                # inputs: only its existence matters, which the lock checks).
                raise ValidationFailed(
                    "This time slot no longer exists.", code="invalid_slot", field="slot"
                ) from exc
            if lock or not locks.is_stale(exc):
                raise
            locks.forget_booking_inputs(event_id, ticket_id)
            lock = True  # under the lock the inputs cannot be stale


def _book(
    reads: locks.BookingReads,
    *,
    ticket_id: int | None,
    alone: bool,
    attendees: Sequence[Mapping[str, Any]],
    slot: Slot | None,
    state: str,
    partner_ref: str,
    sale_order_ref: str,
    sale_order_line_ref: str,
    sale_status: str,
    utm: Mapping[str, str],
    contact_sources: Sequence[str] | None,
    recheck: Callable[[Event, Ticket | None], None] | None,
    held_seats: int,
    actor: Any,
    now,
) -> list[Registration]:
    """Decide on `reads`, then send the booking statement (inside the caller's atomic block;
    `alone`: as the block's only statement, when it may be: one round trip)."""
    event = reads.event
    if state == S.OPEN and event.kanban_state == KanbanState.CANCEL:
        raise RegistrationsClosed("The event is cancelled.", reason="cancelled")
    # The ticket as the inputs hold it (its limit, sale window and price may have changed since
    # the caller read it; the lock checks that these are still the committed ones).
    fresh: Ticket | _Unknown | None = None
    if ticket_id is not None:
        fresh = reads.ticket or UNKNOWN
    ticket, slot = check_pair(event=event, has_tickets=event.has_tickets, ticket=fresh, slot=slot)
    if recheck is not None:
        recheck(event, ticket)
    questions = reads.questions
    answers = [
        clean_answers(
            questions=questions,
            choices=reads.choices,
            raw=a.get("answers"),
            attendee=index,
            country=event.country,
        )
        for index, a in enumerate(attendees)
    ]
    _copy_once_per_order(questions, answers)
    sources = list(contact_sources or [ContactSource.ATTENDEE] * len(attendees))

    rows = []
    for index, attendee in enumerate(attendees):
        fields = _contact_fields(event, index, attendee, questions, answers[index])
        rows.append(
            Registration(
                pk=sql_rows.Drawn(index + 1),  # type: ignore[misc]  # drawn under the lock
                event=event,
                ticket=ticket,
                slot=slot,
                state=state,
                barcode=new_barcode(),
                partner_ref=partner_ref,
                contact_source=sources[index],
                sale_order_ref=sale_order_ref,
                sale_order_line_ref=sale_order_line_ref,
                sale_status=sale_status,
                utm_source=utm.get("source", "") or "",
                utm_medium=utm.get("medium", "") or "",
                utm_campaign=utm.get("campaign", "") or "",
                confirmed_at=now if state == S.OPEN else None,
                **fields,
            )
        )

    # Every write as one statement: the lock first (a leading rider), the registrations, their
    # answers, audit and after_sub rows and the overlays' riders as CTEs, the seat increment
    # with its guard last.
    writes = [sql_rows.insert_statement(rows)]
    answer_rows = [
        RegistrationAnswer(
            registration=row,
            question_id=question_id,
            choice_id=value if isinstance(value, int) else None,
            text_value=None if isinstance(value, int) else value,
        )
        for row, row_answers in zip(rows, answers, strict=True)
        for question_id, value in row_answers.items()
    ]
    if answer_rows:
        writes.append(sql_rows.insert_statement(answer_rows))
    audit_rows = [
        audit.entry(
            actor=actor,
            verb="registration.created",
            registration=row,
            data={
                "state": row.state,
                "ticket": row.ticket_id,
                "slot": row.slot_id,
                "order": row.sale_order_ref,
            },
        )
        for row in rows
    ]
    writes.append(sql_rows.insert_statement(audit_rows))
    if state == S.OPEN and reads.after_sub:
        mail_rows = scheduler.after_sub_rows(
            registrations=rows, now=now, schedulers=reads.after_sub
        )
        if mail_rows:
            writes.append(sql_rows.insert_statement(mail_rows))
            scheduler.arm_after_sub(mail_rows, now=now)
    lock = locks.booking_lock(reads, ticket_id, slot.pk if slot is not None else None, len(rows))
    riders, other_hooks = hooks.ride(hooks.registrations_changed, rows, actor)
    riders = [lock, *riders]
    # A hook that is not a rider runs its own statements after the booking's, in its
    # transaction: then the statement cannot be the transaction.
    with pipeline.lone_statement() if alone and not other_hooks else nullcontext():
        if state == S.OPEN:
            seats.send_reserve(
                event=event,
                slot_id=slot.pk if slot is not None else None,
                ticket=ticket,
                count=len(rows),
                from_held=held_seats,
                together_with=writes,
                riders=riders,
                after=sql_rows.BOOKING_CTE,
            ).check()
        else:
            sql_rows.close_reading_riders(sql_rows.send(writes, riders), riders)
    for row, pk in zip(rows, lock.answer, strict=True):
        row.pk = pk
    hooks.run(other_hooks, rows, actor)
    return rows


def _copy_once_per_order(questions: dict[int, Question], answers: list[dict[int, Any]]) -> None:
    """A once-per-order answer given by one attendee applies to every attendee of the request."""
    for question in questions.values():
        if not question.once_per_order:
            continue
        given = next((a[question.pk] for a in answers if question.pk in a), None)
        if given is None:
            continue
        for row_answers in answers:
            row_answers.setdefault(question.pk, given)
