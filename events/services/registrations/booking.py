"""The booking: `register` and what it needs (barcodes, the collision check).

Invariants:
- `Registration.state` is written here and nowhere else; only the transitions of TRANSITIONS
  exist, anything else raises `InvalidTransition` and writes nothing;
- entering `open`/`done` goes through the seat module under the Event row lock (lock first,
  then decide, then write); a request for n attendees succeeds or fails whole;
- every verb writes its audit rows in the same transaction; side effects run after commit.

A booking is two round trips (counted on the wire by tests/probes/test_round_trips.py):
1. it reads its inputs — the event, its stage, the ticket, the questions, the after_sub
   schedulers — as one frozen `BookingInputs` with their digest (events.db.booking.read_inputs;
   a caller that holds them hands them over instead, `inputs=`: no round trip) and decides on
   them in Python: the pair, the caller's `recheck`, the answers, the contact
   fields, the rows to write, the seats to take (seats.booking_seats);
2. it hands those rows to `events_book` (events/db/sql/book.sql), one call that is its own
   transaction: the Event row lock, the check that the inputs are still what is committed,
   the seats with their limits, the rows. Anything refused raises and writes nothing; the seat
   guard's refusal comes out as `SeatsUnavailable`.
Inputs edited between the two (a stale digest): the booking reads them again, under the lock
this time, in a transaction, and decides again. Inside a caller's transaction the inputs are
read under the lock from the start (they cannot be stale), and the call is a savepoint unless
`savepoint=False`. The database work an overlay does for new registrations is its own
trigger's (leads: migration 0005); the overlays' `registrations_changed` hooks run after
commit, told what those triggers asked for (`events.after_commit`, events.hooks).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from events import hooks, i18n
from events.db import booking as booking_sql
from events.errors import (
    InvalidTransition,
    RegistrationsClosed,
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


@dataclass(frozen=True)
class BookingRequest:
    """What the caller asks for, checked once (`register`); the booking decides on it with
    its inputs."""

    event_id: int
    attendees: tuple[Mapping[str, Any], ...]
    ticket_id: int | None
    slot: Slot | None
    state: str
    partner_ref: str
    sale_order_ref: str
    sale_order_line_ref: str
    sale_status: str
    utm: Mapping[str, str]
    lang: str
    contact_sources: tuple[str, ...]
    recheck: Callable[[Event, Ticket | None], None] | None
    held_seats: int
    actor: Any
    now: datetime


class _Stale(Exception):
    """The inputs changed between their read and `events_book`."""


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
    lang: str | None = None,
    contact_sources: Sequence[str] | None = None,
    recheck: Callable[[Event, Ticket | None], None] | None = None,
    held_seats: int = 0,
    now=None,
    savepoint: bool = True,
    inputs: booking_sql.BookingInputs | None = None,
) -> list[Registration]:
    """Create one registration per attendee, all or none.

    `lang`: the language the registrations are made in (one of settings.LANGUAGES); every later
    message to the attendees uses it. None (or another value): the event's default language.

    `held_seats`: that many of the attendees take seats held for them in the seat ledger (an
    accepted waiting-list offer, events.services.waitlist): those move from held to reserved
    instead of being taken again; the limits are still checked on the counters produced.

    An attendee is a mapping with name, email, phone, company_name and answers
    ({question_id: text | choice_id}). `contact_sources` (one per attendee, default
    "attendee") marks rows whose details came from the host partner. The event and the ticket
    are the booking's inputs as read for it (the ticket's limit, sale window and price may have
    changed since the caller read it). `recheck(event, ticket)` runs with the inputs' event and
    ticket, before the answers and seats are decided: the caller's own gates on what can change
    meanwhile (the public intake re-checks stage, end date and sale window there); it refuses
    by raising a DomainError. When the inputs change before the booking's lock, the booking
    decides again on inputs read under the lock, `recheck` included (so it may run twice).

    `inputs`: the booking's inputs as the caller read them (`read_inputs(event.pk, ticket.pk)`,
    for its own checks or for several bookings): outside a transaction the booking decides on
    them without reading them again, and `events_book` confirms them under the lock (changed
    since: read again under the lock, decided again). Inside a transaction the inputs are read
    under the lock whatever the caller holds.

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
        raise InvalidTransition(
            _("A registration cannot be created in state “%(state)s”.") % {"state": state}
        )
    if not attendees:
        raise ValidationFailed(_("At least one attendee is needed."), code="invalid_quantity")
    if sale_status not in SALE_STATUSES:
        raise ValidationFailed(
            _("Unknown sale status “%(status)s”.") % {"status": sale_status}, code="invalid_value"
        )
    if not 0 <= held_seats <= len(attendees) or (held_seats and state != S.OPEN):
        raise ValueError(f"held_seats={held_seats} for {len(attendees)} {state} attendee(s)")
    ticket_id = ticket.pk if ticket is not None else None
    if inputs is not None and (inputs.event.pk, inputs.ticket_id) != (event.pk, ticket_id):
        raise ValueError("inputs read for another event or ticket")
    request = BookingRequest(
        event_id=event.pk,
        attendees=tuple(attendees),
        ticket_id=ticket_id,
        slot=slot,
        state=state,
        partner_ref=partner_ref or "",
        sale_order_ref=sale_order_ref or "",
        sale_order_line_ref=sale_order_line_ref or "",
        sale_status=sale_status,
        utm=utm or {},
        lang=i18n.choose(lang, event=event),
        contact_sources=tuple(contact_sources or [ContactSource.ATTENDEE] * len(attendees)),
        recheck=recheck,
        held_seats=held_seats,
        actor=actor,
        now=now or timezone.now(),
    )
    in_transaction = connection.in_atomic_block or not connection.get_autocommit()
    # A barcode collision (unique index) fails the call: the booking is retried with fresh
    # barcodes — except inside a caller's transaction without a savepoint, which the failed
    # statement aborted and only the caller can roll back.
    retryable = savepoint or not in_transaction
    for attempt in range(BARCODE_ATTEMPTS):
        try:
            if not in_transaction:
                return _book_alone(request, inputs if attempt == 0 else None)
            # In a transaction managed by hand too, the atomic block defers the hooks and
            # nudges to a commit (with no savepoint it sends nothing).
            with transaction.atomic(savepoint=savepoint):
                return _book(request, None)
        except IntegrityError as exc:
            if not (retryable and is_barcode_collision(exc)) or attempt == BARCODE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


is_barcode_collision = booking_sql.is_barcode_collision
read_inputs = booking_sql.read_inputs
BookingInputs = booking_sql.BookingInputs


def _book_alone(
    request: BookingRequest, inputs: booking_sql.BookingInputs | None
) -> list[Registration]:
    """Outside a transaction: on the caller's inputs or on inputs read now with no lock,
    `events_book` as its own transaction (one or two round trips); inputs changed meanwhile:
    once more in a transaction, read under the lock."""
    try:
        return _book(
            request, inputs or booking_sql.read_inputs(request.event_id, request.ticket_id)
        )
    except _Stale:
        with transaction.atomic():
            return _book(request, None)


def _book(request: BookingRequest, inputs: booking_sql.BookingInputs | None) -> list[Registration]:
    """Decide on `inputs` (None: read them under the Event lock, in the caller's transaction)
    and run `events_book`. Raises `_Stale` when `inputs` changed before the booking's lock."""
    lock = inputs is None
    if inputs is None:
        inputs = booking_sql.read_inputs(request.event_id, request.ticket_id, lock=True)
    rows, ticket, document, mails = _decide(inputs, request)
    slot_id = request.slot.pk if request.slot is not None else None
    try:
        with seats.refusals(slot_id, ticket):
            ids, signals = booking_sql.book(document)
    except DatabaseError as exc:
        if booking_sql.is_slot_gone(exc):
            # The caller's slot was deleted since it read it (only its existence matters, which
            # the lock checks).
            raise ValidationFailed(
                _("This time slot no longer exists."), code="invalid_slot", field="slot"
            ) from exc
        if booking_sql.is_stale(exc) and not lock:
            raise _Stale from exc
        raise
    for row, pk in zip(rows, ids, strict=True):
        row.pk = pk
    if mails:
        scheduler.arm_after_sub(mails, now=request.now)
    actor = request.actor
    transaction.on_commit(
        lambda: hooks.run(hooks.registrations_changed, rows, actor, signals), robust=True
    )
    return rows


def _decide(
    inputs: booking_sql.BookingInputs, request: BookingRequest
) -> tuple[list[Registration], Ticket | None, str, list]:
    """The booking decided on its inputs: the registrations (their primary keys their places,
    from 1, until `events_book` draws them), the ticket, the document for `events_book`, the
    after_sub rows."""
    event = inputs.event
    state = request.state
    if state == S.OPEN and event.kanban_state == KanbanState.CANCEL:
        raise RegistrationsClosed(_("The event is cancelled."), reason="cancelled")
    # The ticket as the inputs hold it (its limit, sale window and price may have changed since
    # the caller read it; events_book checks that these are still the committed ones).
    fresh: Ticket | _Unknown | None = None
    if request.ticket_id is not None:
        fresh = inputs.ticket or UNKNOWN
    ticket, slot = check_pair(
        event=event, has_tickets=event.has_tickets, ticket=fresh, slot=request.slot
    )
    if request.recheck is not None:
        request.recheck(event, ticket)
    questions = inputs.questions
    attendees = request.attendees
    answers = [
        clean_answers(
            questions=questions,
            choices=inputs.choices,
            raw=a.get("answers"),
            attendee=index,
            country=event.country,
        )
        for index, a in enumerate(attendees)
    ]
    _copy_once_per_order(questions, answers)
    now, utm = request.now, request.utm

    rows = []
    for index, attendee in enumerate(attendees):
        fields = _contact_fields(event, index, attendee, questions, answers[index])
        rows.append(
            Registration(
                pk=index + 1,  # its place, which followers name; events_book's insert draws the id
                event=event,
                ticket=ticket,
                slot=slot,
                state=state,
                barcode=new_barcode(),
                partner_ref=request.partner_ref,
                contact_source=request.contact_sources[index],
                sale_order_ref=request.sale_order_ref,
                sale_order_line_ref=request.sale_order_line_ref,
                sale_status=request.sale_status,
                utm_source=utm.get("source", "") or "",
                utm_medium=utm.get("medium", "") or "",
                utm_campaign=utm.get("campaign", "") or "",
                confirmed_at=now if state == S.OPEN else None,
                lang=request.lang,
                **fields,
            )
        )
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
    audit_rows = [
        audit.entry(
            actor=request.actor,
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
    mails: list = []
    seat_change = None
    slot_id = slot.pk if slot is not None else None
    if state == S.OPEN:
        if inputs.after_sub:
            mails = scheduler.after_sub_rows(
                registrations=rows, now=now, schedulers=inputs.after_sub
            )
        seat_change = seats.booking_seats(
            event=event,
            slot_id=slot_id,
            ticket=ticket,
            count=len(rows),
            from_held=request.held_seats,
        )
    document = booking_sql.document(
        inputs,
        ticket_id=request.ticket_id,
        slot_id=slot_id,
        registrations=rows,
        answers=answer_rows,
        audit=audit_rows,
        mails=mails,
        seats=seat_change,
    )
    return rows, ticket, document, mails


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
