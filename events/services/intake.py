"""The public intake: the guarded funnel of spec.md §7.4 (the event page and the JSON API).

Invariants:
- the checks run in the contract's order and the first failure answers: unknown/unpublished
  event, rate limit, closed registrations, ticket, slot, sale window, priced ticket, quantity,
  attendees, questions, seats; every refusal is a typed DomainError and writes nothing;
- the input's shape (ids, text that fits its column and PostgreSQL, answers, quantity) is
  checked before the lock, by the rules' one owners (`inputs`, `registrations.check_pair`,
  `registrations.clean_answers`); what can change meanwhile — cancellation, a `pipe_end`
  stage, the end date, the ticket's sale window and price — is decided again by
  `registrations.register` under the Event row lock (`recheck`), with the seats, so a change
  committed between the checks and the booking is refused and nothing is written;
- the first answer to an Idempotency-Key is stored (IntakeIdempotency, unique (event, key)) in
  the transaction that creates the registrations; a concurrent duplicate loses on that unique
  index (its transaction, registrations included, rolls back) and answers the stored first
  answer, as does a duplicate refused because the first one took the last seats.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from events import ratelimit, selectors
from events.errors import DomainError, NotFound, RegistrationsClosed, ValidationFailed
from events.models import (
    ActorType,
    Event,
    IntakeIdempotency,
    Question,
    QuestionChoice,
    QuestionType,
    Registration,
    Slot,
    Ticket,
)
from events.services import audit, inputs, links, registrations
from events.services.contacts import is_valid_email
from events.services.dberrors import violated_constraint

MAX_PER_ORDER = 30
MAX_KEY_LENGTH = 255
CONTACT_FIELDS = inputs.CONTACT_FIELDS
CONTACT_QUESTIONS: dict[str, str] = {
    QuestionType.NAME: "name",
    QuestionType.EMAIL: "email",
    QuestionType.PHONE: "phone",
    QuestionType.COMPANY_NAME: "company_name",
}
UTM_FIELDS = inputs.UTM_FIELDS
PUBLIC = audit.Actor(ActorType.PUBLIC, label="public intake")


@dataclass(frozen=True)
class IntakeResult:
    """The answer to give: 201 and its JSON body (`replayed`: the stored first answer)."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


# --- derived reads for the event page ---------------------------------------------------------


def closed_reason(*, event: Event, now: datetime) -> str | None:
    """Why registrations are closed whatever the ticket (cancelled, over, ended), or None.

    `event.stage_pipe_end`, when the caller loaded it, spares reading the stage."""
    return selectors.closed_reason(event, now=now)


def sale_state(*, ticket: Ticket, now: datetime) -> str:
    """`not_started`, `ended`, `priced` (sold by the host) or `open`, in the intake's order."""
    if not selectors.is_launched(ticket, now=now):
        return "not_started"
    if selectors.is_expired(ticket, now=now):
        return "ended"
    if ticket.price > 0:
        return "priced"
    return "open"


def max_quantity(ticket: Ticket | None) -> int:
    return (ticket.limit_max_per_order if ticket is not None else 0) or MAX_PER_ORDER


# --- the funnel -------------------------------------------------------------------------------


def fingerprint(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def submit(
    *,
    event_id: int,
    payload: Any,
    client: str,
    idempotency_key: str | None = None,
    now: datetime | None = None,
) -> IntakeResult:
    """Register the attendees of one public request, or refuse with the first failed check."""
    now = now or timezone.now()
    event = _public_event(event_id) if inputs.as_id(event_id) is not None else None
    if event is None:
        raise NotFound("No such event.")
    ratelimit.hit(scope="intake", client=client)
    if not isinstance(payload, Mapping):
        raise ValidationFailed("The body must be a JSON object.", code="invalid_value")
    key = (idempotency_key or "").strip() or None
    if key is None:
        return _register(event, payload, None, now)
    key = inputs.check_text(
        key,
        code="invalid_value",
        max_length=MAX_KEY_LENGTH,
        label="The Idempotency-Key",
        field="Idempotency-Key",
    )
    replay = _replay(event, key, payload)
    if replay is not None:
        return replay
    try:
        return _register(event, payload, key, now)
    except (DomainError, _KeyTaken):
        # A concurrent request with this key won: its answer is the answer (also when this
        # attempt was refused because the winner took the last seats).
        replay = _replay(event, key, payload)
        if replay is None:
            raise
        return replay


class _KeyTaken(Exception):
    """The Idempotency-Key row was inserted by a concurrent request (this one rolls back)."""


def _replay(event: Event, key: str, payload: Any) -> IntakeResult | None:
    previous = IntakeIdempotency.objects.filter(event_id=event.pk, key=key).first()
    if previous is None:
        return None
    if previous.fingerprint != fingerprint(payload):
        raise ValidationFailed(
            "This Idempotency-Key was used for another request.",
            code="invalid_value",
            field="Idempotency-Key",
        )
    return IntakeResult(previous.status_code, previous.response, replayed=True)


def _register(event: Event, payload: Mapping[str, Any], key: str | None, now) -> IntakeResult:
    reason = closed_reason(event=event, now=now)
    if reason is not None:
        raise RegistrationsClosed(f"Registrations are closed ({reason}).", reason=reason)
    loaded = _load(event)
    ticket, slot = registrations.check_pair(
        event=event,
        has_tickets=bool(loaded.tickets),
        ticket=_pick(loaded.tickets, payload.get("ticket_id")),
        slot=_pick(loaded.slots, payload.get("slot_id")),
    )
    if ticket is not None:
        _check_sale(ticket, now)
    raw_attendees = _check_quantity(ticket, payload.get("attendees"))
    attendees = [_check_attendee(i, a, loaded.questions) for i, a in enumerate(raw_attendees)]
    _check_answers(event, attendees, loaded.questions, loaded.choices)
    utm = _utm(payload.get("utm"))

    def recheck(locked: Event, fresh: Ticket | None) -> None:
        # Under the Event row lock (register): what may have changed since the checks above.
        _recheck(locked, fresh, now)

    def book() -> list[Registration]:
        # Locks the Event row, re-checks what can change (recheck), books the seats (sold_out).
        return registrations.register(
            event=event,
            attendees=attendees,
            ticket=ticket,
            slot=slot,
            state="open",
            utm=utm,
            actor=PUBLIC,
            recheck=recheck,
            now=now,
        )

    if key is None:
        return IntakeResult(201, _body(event, book()))
    try:
        with transaction.atomic():
            body = _body(event, book())
            IntakeIdempotency.objects.create(
                event=event,
                key=key,
                fingerprint=fingerprint(payload),
                status_code=201,
                response=body,
            )
    except IntegrityError as exc:
        if violated_constraint(exc) != "intake_idempotency_key":
            raise
        raise _KeyTaken from exc
    return IntakeResult(201, body)


def _body(event: Event, rows: list[Registration]) -> dict[str, Any]:
    return {
        "event_id": event.pk,
        "registrations": [
            {
                "id": row.pk,
                "state": row.state,
                "barcode": row.barcode,
                "tickets_url": links.tickets_url(row),
                "ics_url": links.ics_url(row),
            }
            for row in rows
        ],
    }


# The first read of every intake: the public event with its stage's pipe_end, in one statement
# (the ORM's select_related costs more CPU here than the booking's own statements).
_EVENT_SQL = """
    SELECT e.*, s.pipe_end AS stage_pipe_end
      FROM events_event e JOIN events_stage s ON s.id = e.stage_id
     WHERE e.id = %s AND e.is_published AND e.active
"""


def _public_event(event_id: int) -> Event | None:
    return next(iter(Event.objects.raw(_EVENT_SQL, [event_id])), None)


@dataclass
class _Loaded:
    """What the checks read, in a fixed handful of queries."""

    tickets: dict[int, Ticket]
    slots: dict[int, Slot]
    questions: list[Question]
    choices: dict[int, set[int]]


# Plain statements on the hot path (the ORM compiles each query anew on every request).
_TICKETS_SQL = "SELECT * FROM events_ticket WHERE event_id = %s"
_SLOTS_SQL = "SELECT * FROM events_slot WHERE event_id = %s"
_QUESTIONS_SQL = (
    "SELECT * FROM events_question WHERE event_id = %s AND active ORDER BY sequence, id"
)


def _load(event: Event) -> _Loaded:
    """Tickets, slots (multi-slot events only), active questions and their choices (only when
    a question is a choice)."""
    tickets = {t.pk: t for t in Ticket.objects.raw(_TICKETS_SQL, [event.pk])}
    slots = (
        {s.pk: s for s in Slot.objects.raw(_SLOTS_SQL, [event.pk])} if event.is_multi_slots else {}
    )
    questions = list(Question.objects.raw(_QUESTIONS_SQL, [event.pk]))
    choices: dict[int, set[int]] = {
        q.pk: set() for q in questions if q.question_type == QuestionType.SIMPLE_CHOICE
    }
    if choices:
        for question_id, choice_id in QuestionChoice.objects.filter(
            question_id__in=list(choices)
        ).values_list("question_id", "id"):
            choices[question_id].add(choice_id)
    return _Loaded(tickets, slots, questions, choices)


def _pick(rows: Mapping[int, Any], raw: Any) -> Any:
    """The row an id names; None when no id was given; `registrations.UNKNOWN` otherwise."""
    if raw is None or raw == "":
        return None
    row = rows.get(inputs.as_id(raw))  # type: ignore[arg-type]
    return registrations.UNKNOWN if row is None else row


_STAGE_SQL = "SELECT pipe_end FROM events_stage WHERE id = %s"


def _recheck(locked: Event, ticket: Ticket | None, now: datetime) -> None:
    """Closed reason and sale window again, from rows read after the Event lock was taken.

    The locked row carries kanban_state and date_end as committed; `ticket` was read again by
    register() under the lock, and the stage is read here (READ COMMITTED: each statement sees
    what is committed)."""
    with connection.cursor() as cursor:
        cursor.execute(_STAGE_SQL, [locked.stage_id])
        (locked.stage_pipe_end,) = cursor.fetchone()
    reason = closed_reason(event=locked, now=now)
    if reason is not None:
        raise RegistrationsClosed(f"Registrations are closed ({reason}).", reason=reason)
    if ticket is not None:
        _check_sale(ticket, now)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _check_sale(ticket: Ticket, now: datetime) -> None:
    state = sale_state(ticket=ticket, now=now)
    if state == "not_started":
        raise ValidationFailed(
            "Sales of this ticket have not started yet.",
            code="sale_not_started",
            field="ticket",
            start_sale_datetime=_iso(ticket.start_sale_datetime),
        )
    if state == "ended":
        raise ValidationFailed(
            "Sales of this ticket have ended.",
            code="sale_ended",
            field="ticket",
            end_sale_datetime=_iso(ticket.end_sale_datetime),
        )
    if state == "priced":
        raise ValidationFailed(
            "This ticket is sold through our shop, not here.",
            code="priced_ticket",
            field="ticket",
        )


def _check_quantity(ticket: Ticket | None, raw: Any) -> list[Any]:
    limit = max_quantity(ticket)
    count = len(raw) if isinstance(raw, list) else 0
    if not isinstance(raw, list) or not 1 <= count <= limit:
        raise ValidationFailed(
            f"Register between 1 and {limit} attendees at once.",
            code="invalid_quantity",
            field="quantity",
            quantity=count,
            max=limit,
        )
    return raw


def _text(index: int, attendee: Mapping[str, Any], name: str) -> str:
    value = attendee.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(
            f"{name} must be text.", code="invalid_attendee", attendee=index, field=name
        )
    return inputs.check_contact(value, field=name, attendee=index)


def _check_attendee(index: int, raw: Any, questions: Sequence[Question]) -> dict[str, Any]:
    """One attendee, normalised; a contact question left unanswered takes the typed field."""
    if not isinstance(raw, Mapping):
        raise ValidationFailed(
            "Each attendee must be an object.", code="invalid_attendee", attendee=index
        )
    attendee: dict[str, Any] = {name: _text(index, raw, name) for name in CONTACT_FIELDS}
    answers = raw.get("answers")
    if answers is None:
        answers = {}
    if not isinstance(answers, Mapping):
        raise ValidationFailed(
            "answers must be an object.", code="invalid_answer", attendee=index, field="answers"
        )
    answers = {str(k): v for k, v in answers.items() if not _blank(v)}
    for question in questions:
        contact = CONTACT_QUESTIONS.get(question.question_type)
        if contact and str(question.pk) not in answers and attendee[contact]:
            answers[str(question.pk)] = attendee[contact]
    name = attendee["name"] or _contact_answer(answers, questions, QuestionType.NAME)
    if not name:
        raise ValidationFailed(
            "Each attendee needs a name.", code="invalid_attendee", attendee=index, field="name"
        )
    if attendee["email"] and not is_valid_email(attendee["email"]):
        raise ValidationFailed(
            f"{attendee['email']!r} is not an email address.",
            code="invalid_attendee",
            attendee=index,
            field="email",
        )
    attendee["answers"] = answers
    return attendee


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _contact_answer(answers: Mapping[str, Any], questions: Sequence[Question], kind: str) -> str:
    for question in questions:
        value = answers.get(str(question.pk))
        if question.question_type == kind and isinstance(value, str):
            return value.strip()
    return ""


def _check_answers(
    event: Event,
    attendees: list[dict[str, Any]],
    questions: Sequence[Question],
    choices: Mapping[int, set[int]],
) -> None:
    """Mandatory questions first (a once-per-order one needs one answer in the request), then
    every answer's validity (registrations.clean_answers, the one answer rule)."""
    for index, attendee in enumerate(attendees):
        for question in questions:
            if not question.is_mandatory_answer:
                continue
            key = str(question.pk)
            answered = (
                any(key in a["answers"] for a in attendees)
                if question.once_per_order
                else key in attendee["answers"]
            )
            if not answered:
                raise ValidationFailed(
                    f"Please answer “{question.title}”.",
                    code="question_required",
                    attendee=index,
                    question=question.pk,
                )
    by_id = {q.pk: q for q in questions}
    for index, attendee in enumerate(attendees):
        attendee["answers"] = registrations.clean_answers(
            questions=by_id,
            choices=choices,
            raw=attendee["answers"],
            attendee=index,
            country=event.country,
        )


def _utm(raw: Any) -> dict[str, str]:
    """Campaign tags: text values of source/medium/campaign only, cut to the column size
    (inputs.limit); text PostgreSQL cannot store is refused (`utm.<name>`)."""
    if not isinstance(raw, Mapping):
        return {}
    utm = {}
    for name in UTM_FIELDS:
        value = raw.get(name)
        if isinstance(value, str) and value:
            value = inputs.check_text(value, code="invalid_value", field=f"utm.{name}")
            utm[name] = value[: inputs.limit(f"utm_{name}")]
    return utm
