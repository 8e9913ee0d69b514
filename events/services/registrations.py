"""Registrations: creation and the state machine of spec.md §4.

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
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from functools import cache
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from events import hooks, inputs
from events.db import locks, pipeline
from events.db import rows as sql_rows
from events.db.dberrors import guard_refusal, violated_constraint
from events.errors import (
    ArchiveRefused,
    DomainError,
    InvalidTransition,
    RegistrationsClosed,
    SeatsUnavailable,
    ValidationFailed,
)
from events.models import (
    CancelSource,
    ContactSource,
    Event,
    EventAuditLog,
    KanbanState,
    Question,
    QuestionType,
    Registration,
    RegistrationAnswer,
    RegistrationState,
    SaleStatus,
    Slot,
    Ticket,
)
from events.services import audit, scheduler, seats, waitlist_nudge
from events.services.contacts import is_valid_email, normalise_phone

S = RegistrationState
# A Choices class's `.values` builds a new list on every access; the checks below run per call.
SALE_STATUSES = frozenset(SaleStatus.values)
CANCEL_SOURCES = frozenset(CancelSource.values)

# (from, to) → verb. `None` = a new registration.
TRANSITIONS: dict[tuple[str | None, str], str] = {
    (None, S.OPEN): "register",
    (None, S.DRAFT): "register",
    (S.DRAFT, S.OPEN): "confirm",
    (S.OPEN, S.DONE): "mark_attended",
    (S.DONE, S.OPEN): "undo_attendance",
    (S.DRAFT, S.CANCEL): "cancel",
    (S.OPEN, S.CANCEL): "cancel",
    (S.OPEN, S.DRAFT): "reset_to_draft",
    (S.CANCEL, S.DRAFT): "reset_to_draft",
}

# The audit verb of each transition (docs/overlay-blueprint.md: noun.past_tense).
AUDIT_VERBS = {
    "confirm": "registration.confirmed",
    "mark_attended": "registration.attended",
    "undo_attendance": "registration.attendance_undone",
    "cancel": "registration.cancelled",
    "reset_to_draft": "registration.reset_to_draft",
}

CONTACT_QUESTION_FIELDS: dict[str, str] = {
    QuestionType.NAME: "name",
    QuestionType.EMAIL: "email",
    QuestionType.PHONE: "phone",
    QuestionType.COMPANY_NAME: "company_name",
}
BARCODE_ATTEMPTS = 5


def new_barcode() -> str:
    """The decimal form of 64 random bits (≤ 20 digits)."""
    return str(secrets.randbits(64))


# --- creation -----------------------------------------------------------------------------


class _Unknown:
    """A ticket/slot id was given but names nothing of the event (the intake's lookup)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


def check_pair(
    *,
    event: Event,
    has_tickets: bool,
    ticket: Ticket | _Unknown | None,
    slot: Slot | _Unknown | None,
) -> tuple[Ticket | None, Slot | None]:
    """The one ticket/slot rule (spec.md §2.6, §7.4 checks 4–5): a ticket when the event has
    tickets, of this event; a slot exactly when the event is multi-slot, of this event.
    `UNKNOWN` is an id given that names no ticket/slot of the event."""
    if ticket is None and has_tickets:
        raise ValidationFailed("Choose a ticket.", code="ticket_required", field="ticket")
    if ticket is UNKNOWN or (isinstance(ticket, Ticket) and ticket.event_id != event.pk):
        raise ValidationFailed(
            "This ticket is not sold for this event.", code="invalid_ticket", field="ticket"
        )
    if not event.is_multi_slots:
        if slot is not None:
            raise ValidationFailed(
                "This event has no time slots.", code="invalid_slot", field="slot"
            )
    elif slot is None:
        raise ValidationFailed("Choose a time slot.", code="slot_required", field="slot")
    elif slot is UNKNOWN or (isinstance(slot, Slot) and slot.event_id != event.pk):
        raise ValidationFailed(
            "This time slot is not a slot of this event.", code="invalid_slot", field="slot"
        )
    assert not isinstance(ticket, _Unknown) and not isinstance(slot, _Unknown)
    return ticket, slot


def clean_answers(
    *,
    questions: Mapping[int, Question],
    choices: Mapping[int, Collection[int]],
    raw: Mapping[Any, Any] | None,
    attendee: int,
    country: str,
) -> dict[int, Any]:
    """The one answer rule: {question_id: choice_id | text} from one attendee's raw answers.

    Blank answers are dropped; a key must be a question of `questions`; a choice must be one
    of the question's `choices`; any other answer is storable text (an email question's a
    valid address; a phone question's normalised like the phone field)."""
    cleaned: dict[int, Any] = {}
    for key, value in (raw or {}).items():
        question = questions.get(inputs.as_id(key))  # type: ignore[arg-type]
        if question is None:
            raise ValidationFailed(
                f"{str(key)!r} is not a question of this event.",
                code="invalid_answer",
                attendee=attendee,
                question=str(key),
            )
        if value is None or (isinstance(value, str) and not value.strip()):
            continue

        question_pk: int = question.pk

        def refuse(message: str, question_pk: int = question_pk) -> ValidationFailed:
            return ValidationFailed(
                message, code="invalid_answer", attendee=attendee, question=question_pk
            )

        if question.question_type == QuestionType.SIMPLE_CHOICE:
            choice_id = inputs.as_id(value)
            if choice_id is None or choice_id not in choices.get(question.pk, ()):
                raise refuse(f"Choose one of the options of “{question.title}”.")
            cleaned[question.pk] = choice_id
            continue
        if not isinstance(value, str):
            raise refuse(f"“{question.title}” takes text.")
        text = inputs.check_text(
            value,
            code="invalid_answer",
            label=f"“{question.title}”",
            multiline=True,  # a contact answer is held to one line below
            attendee=attendee,
            question=question.pk,
        )
        if question.question_type == QuestionType.EMAIL and not is_valid_email(text):
            raise refuse(f"{text!r} is not an email address.")
        if question.question_type == QuestionType.PHONE:
            text = normalise_phone(text, country=country)
        contact = CONTACT_QUESTION_FIELDS.get(question.question_type)
        if contact is not None:
            # It may fill the contact field: the field's column is its limit.
            text = inputs.check_text(
                text,
                code="invalid_answer",
                max_length=inputs.limit(contact),
                label=f"“{question.title}”",
                attendee=attendee,
                question=question.pk,
            )
        cleaned[question.pk] = text
    return cleaned


def _contact_fields(
    event: Event,
    index: int,
    attendee: Mapping[str, Any],
    questions: Mapping[int, Question],
    answers: Mapping[int, Any],
) -> dict[str, str]:
    """name, email, phone, company_name of one attendee: the typed fields, an empty one taken
    from its contact question's answer; each within its column (inputs.limit)."""
    fields: dict[str, str] = {}
    for field in inputs.CONTACT_FIELDS:
        value = attendee.get(field) or ""
        if not isinstance(value, str):
            raise ValidationFailed(
                f"{field} must be text.", code="invalid_attendee", attendee=index, field=field
            )
        fields[field] = inputs.check_contact(value, field=field, attendee=index)
    fields["phone"] = normalise_phone(fields["phone"], country=event.country)
    for question_id, value in answers.items():
        contact = CONTACT_QUESTION_FIELDS.get(questions[question_id].question_type)
        if contact and not fields[contact]:
            fields[contact] = inputs.check_contact(value, field=contact, attendee=index)
    if fields["email"] and not is_valid_email(fields["email"]):
        raise ValidationFailed(
            f"{fields['email']!r} is not an email address.",
            code="invalid_attendee",
            attendee=index,
            field="email",
        )
    return fields


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


# --- transitions ---------------------------------------------------------------------------


def _transition(
    registration: Registration,
    to: str,
    verb: str,
    actor: Any,
    *,
    now=None,
    cancel_source="",
    recheck: Callable[[Event, Registration], None] | None = None,
    audit_also: Sequence[EventAuditLog] = (),
) -> Registration:
    """`recheck(event, registration)` runs first on the locked rows: the caller's own gates on
    what may have changed since it decided to call (the desk's scan answer); it refuses by
    raising, and nothing is written. `audit_also`: the caller's own audit rows, written with
    the transition's in the same statement and transaction."""
    now = now or timezone.now()
    with transaction.atomic():
        # With the locks, what the transition's followers need: the after_sub schedulers of a
        # draft being confirmed (the one way from draft into `open`), whether someone waits for
        # a seat it may free.
        reads = locks.lock_for_transition(
            registration.event_id,
            registration.pk,
            after_sub=verb == "confirm",
            waiting=to in (S.CANCEL, S.DRAFT),
        )
        event, reg = reads.event, reads.registration
        if recheck is not None:
            recheck(event, reg)
        source = reg.state
        if TRANSITIONS.get((source, to)) != verb:
            raise InvalidTransition(
                f"A registration cannot go from {source} to {to} by {verb}.",
                state=source,
                to=to,
            )
        if to in (S.OPEN, S.DONE) and event.kanban_state == KanbanState.CANCEL:
            # spec.md §4: nothing enters open/done on a cancelled event (attendance included).
            raise RegistrationsClosed("The event is cancelled.")
        if not reg.active and (source, to) in ((S.DRAFT, S.OPEN),):
            raise InvalidTransition("An archived registration cannot be confirmed.", state=source)

        hold = _ledger_delta(source, to, reg) if reg.active else None
        reg.state = to
        # Who cancelled (staff / order) decides the seam's mint count; leaving `cancel` clears it.
        reg.cancel_source = cancel_source if to == S.CANCEL else ""
        if to == S.OPEN and reg.confirmed_at is None:
            reg.confirmed_at = now
        if to == S.DONE and reg.date_closed is None:
            reg.date_closed = now
        audit_rows = [
            audit.entry(
                actor=actor, verb=AUDIT_VERBS[verb], registration=reg, data={"state": [source, to]}
            ),
            *audit_also,
        ]
        if reg.active and source in (S.OPEN, S.DONE) and to in (S.CANCEL, S.DRAFT):
            # A seat is free: nudge the waiting list after commit.
            waitlist_nudge.seats_freed(event, someone_waits=reads.someone_waits)
        opening = to == S.OPEN and source == S.DRAFT
        # The overlays' hooks that only write ride in the row's statement (events.hooks).
        riders, other_hooks = hooks.ride(hooks.registrations_changed, [reg], actor)
        # The seats, the row with the audit rows and the riders, the after_sub rows, then
        # COMMIT: one round trip. Each statement checks itself (a reserve's limits, a ledger or
        # registration row not there), so a failure skips what is queued behind it; a refusal
        # surfaces at the block's end (seats.refusals). The COMMIT is only queued when the
        # transaction is the transition's own and no other hook follows (`Pipeline.commit`).
        ledger: Any = None
        cursors: list[Any] = []
        try:
            with (
                seats.refusals(reg.slot_id, reg.ticket),
                _row_guard(reg),
                pipeline.pipelined(own_transaction=True) as pipe,
            ):
                if reg.active and opening:
                    ledger = seats.send_reserve(
                        event=event, slot_id=reg.slot_id, ticket=reg.ticket, count=1
                    )
                elif hold is not None:
                    ledger = seats.send_apply(event=event, holds=[hold], guarded=True)
                if ledger is not None and ledger.cursor is not None:
                    cursors.append(ledger.cursor)  # closed by check() / result(), or below
                cursors.append(_send_transition(reg, audit_rows, riders))
                if opening:
                    scheduler.registrations_opened(
                        event=event, registrations=[reg], now=now, schedulers=reads.after_sub
                    )
                if not other_hooks:
                    pipe.commit()
            if isinstance(ledger, seats.Reservation):
                ledger.check()  # the counters it produced (the check itself ran in the statement)
            elif ledger is not None:
                # The rows it changed. Its own statement refused a missing row before the
                # COMMIT queued behind it; result()'s count check cannot fail after that.
                ledger.result()
            sql_rows.read_riders(cursors[-1].fetchone(), riders)
        finally:
            for cursor in cursors:
                cursor.close()
        hooks.run(other_hooks, [reg], actor)
    return reg


@cache
def _transition_sql() -> str:
    """The transition's UPDATE as the CTE `updated`, and the statement's answer: the check that
    it changed the row (`events_rows_guard`, migration events/0012_rows_guard: the row is
    locked, so anything else is a defect, refused before the COMMIT queued behind it). The
    riders' counts follow (`rows.rider_columns`)."""
    table = connection.ops.quote_name(Registration._meta.db_table)
    # S608: built from constants (the table name from model meta); values are params.
    return f"""WITH updated AS (
        UPDATE {table}
           SET state = %s, cancel_source = %s, confirmed_at = %s, date_closed = %s,
               updated_at = %s
         WHERE id = %s
     RETURNING id
    )
    SELECT events_rows_guard((SELECT count(*) FROM updated), 1, 'registration')"""  # noqa: S608


def _send_transition(
    reg: Registration, audit_rows: Sequence[EventAuditLog], riders: Sequence[sql_rows.Rider]
):
    """Send what a transition may change (state, cancel_source, confirmed_at, date_closed and
    updated_at), all five whatever changed, with its audit rows and the riding hooks' CTEs, as
    one statement: fixed, prepared by psycopg, where `save(update_fields=…)` compiled an UPDATE
    per combination on every call. The row is locked, so writing back an unchanged column's
    value loses nothing. The statement checks itself that it updated the row
    (`_transition_sql`). Returns its cursor, open: it answers one row, the check's 0 and the
    riders' counts (rows.read_riders)."""
    reg.updated_at = timezone.now()
    values = [reg.state, reg.cancel_source, reg.confirmed_at, reg.date_closed, reg.updated_at]
    return sql_rows.send(
        [
            sql_rows.insert_statement(list(audit_rows)),
            (_transition_sql() + sql_rows.rider_columns(riders), [*values, reg.pk]),
        ],
        riders,
    )


@contextmanager
def _row_guard(reg: Registration) -> Iterator[None]:
    """Inside: the row check of `_send_transition` failing comes out as RuntimeError."""
    try:
        yield
    except DatabaseError as exc:
        message, detail = guard_refusal(exc)
        if message != "events_rows_missing":
            raise
        raise RuntimeError(f"registration {reg.pk} was not updated ({detail})") from exc


def _ledger_delta(source: str, to: str, reg: Registration) -> seats.Hold | None:
    held: dict[str, str] = {S.OPEN: "reserved", S.DONE: "used"}
    delta = {"reserved": 0, "used": 0}
    if source in held:
        delta[held[source]] -= 1
    if to in held:
        delta[held[to]] += 1
    if not any(delta.values()):
        return None
    return seats.hold_for(reg, **delta)


def confirm(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.OPEN, "confirm", actor)


def mark_attended(
    *,
    registration: Registration,
    actor: Any,
    now=None,
    recheck: Callable[[Event, Registration], None] | None = None,
    audit_also: Sequence[EventAuditLog] = (),
) -> Registration:
    """`recheck` and `audit_also`: see `_transition` (the desk admits through them)."""
    return _transition(
        registration,
        S.DONE,
        "mark_attended",
        actor,
        now=now,
        recheck=recheck,
        audit_also=audit_also,
    )


def undo_attendance(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.OPEN, "undo_attendance", actor)


def cancel(*, registration: Registration, actor: Any, source: str = "staff") -> Registration:
    """`source` is who cancelled: "staff" (the default) or "order" (a host order cancellation)."""
    if source not in CANCEL_SOURCES:
        raise ValidationFailed(f"Unknown cancel source {source!r}.", code="invalid_value")
    return _transition(registration, S.CANCEL, "cancel", actor, cancel_source=source)


def reset_to_draft(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.DRAFT, "reset_to_draft", actor)


def _set_active(registration: Registration, active: bool, actor: Any) -> Registration:
    with transaction.atomic():
        _, reg = locks.lock_event_and_registration(registration.event_id, registration.pk)
        if active and reg.active or not active and not reg.active:
            return reg
        if reg.state not in (S.DRAFT, S.CANCEL):
            raise ArchiveRefused(
                "Only unconfirmed or cancelled registrations can be archived.", state=reg.state
            )
        reg.active = active
        reg.save(update_fields=["active", "updated_at"])
        audit.record(
            actor=actor,
            verb="registration.unarchived" if active else "registration.archived",
            registration=reg,
            data={"active": [not active, active]},
        )
    return reg


def archive(*, registration: Registration, actor: Any) -> Registration:
    return _set_active(registration, False, actor)


def unarchive(*, registration: Registration, actor: Any) -> Registration:
    return _set_active(registration, True, actor)


def sync_from_partner(
    *, partner_ref: str, name: str, email: str, phone: str, company_name: str, actor: Any
) -> int:
    """Copy the host partner's details onto its partner-sourced draft/open registrations
    (active ones only: archived registrations are left alone)."""
    if not partner_ref:
        raise ValidationFailed("partner_ref is required.", code="invalid_value")
    with transaction.atomic():
        regs = list(
            Registration.objects.select_for_update(of=("self",))
            .select_related("event")
            .filter(
                partner_ref=partner_ref,
                contact_source=ContactSource.PARTNER,
                state__in=(S.DRAFT, S.OPEN),
                # An archived registration is a closed record: its details stay as they were.
                active=True,
            )
            .order_by("pk")
        )
        entries = []
        typed = {"name": name, "email": email, "phone": phone, "company_name": company_name}
        # The host's details meet the same columns as an attendee's (inputs.limit).
        typed = {
            field: inputs.check_text(
                value or "", code="invalid_value", max_length=inputs.limit(field), field=field
            )
            for field, value in typed.items()
        }
        for reg in regs:
            new = {
                **typed,
                "phone": normalise_phone(typed["phone"], country=reg.event.country),
            }
            changed = {k: [getattr(reg, k), v] for k, v in new.items() if getattr(reg, k) != v}
            if not changed:
                continue
            for field, (_, value) in changed.items():
                setattr(reg, field, value)
            reg.save(update_fields=[*changed, "updated_at"])
            entries.append(
                audit.entry(
                    actor=actor,
                    verb="registration.partner_synced",
                    registration=reg,
                    data=changed,
                )
            )
        audit.record_many(entries)
    return len(entries)
