"""The public intake: the guarded funnel of spec.md §7.4 (the event page and the JSON API).

Invariants:
- the checks run in the contract's order and the first failure answers: unknown/unpublished
  event, rate limit, closed registrations, ticket, slot, sale window, priced ticket, quantity,
  attendees, questions, seats; every refusal is a typed DomainError and writes nothing;
- everything the checks before the lock read (the event and its stage, tickets, slots,
  questions, choices) is one statement (`_read`), the request's first, before the rate limit;
- the input's shape (ids, text that fits its column and PostgreSQL, answers, quantity) is
  checked before the lock, by the rules' one owners (`inputs`, `registrations.check_pair`,
  `registrations.clean_answers`); what can change meanwhile — cancellation, a `pipe_end`
  stage, the end date, the ticket's sale window and price — is decided again by
  `registrations.register` (`recheck`) on the inputs `events_book` confirms under the Event
  row lock, with the seats, so a change committed between the checks and the booking is
  refused and nothing is written;
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
from functools import cache
from typing import Any, TypeVar

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from events import i18n, inputs, ratelimit, rules
from events.db import booking as booking_sql
from events.db import pipeline
from events.db.dberrors import violated_constraint
from events.errors import DomainError, NotFound, RegistrationsClosed, ValidationFailed
from events.models import (
    ActorType,
    Event,
    IntakeIdempotency,
    Question,
    QuestionType,
    Registration,
    Slot,
    Stage,
    Ticket,
)
from events.services import audit, links, registrations
from events.services.contacts import is_valid_email

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
M = TypeVar("M", bound=models.Model)


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
    return rules.closed_reason(event, now=now)


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
    language: str | None = None,
) -> IntakeResult:
    """Register the attendees of one public request, or refuse with the first failed check.

    The registrations are made in the body's `lang`, else `language` (the one the request
    expressed: the page's, Accept-Language), else the event's default language."""
    now = now or timezone.now()
    # The ticket asked for, if the body names one as an id: the booking's inputs are read for
    # it with the event (one round trip); anything else is refused by the checks below.
    ticket_hint = inputs.as_id(payload.get("ticket_id")) if isinstance(payload, Mapping) else None
    event = _public_event(event_id, ticket_hint) if inputs.as_id(event_id) is not None else None
    if event is None:
        raise NotFound(_("No such event."))
    ratelimit.hit(scope="intake", client=client)
    if not isinstance(payload, Mapping):
        raise ValidationFailed(_("The body must be a JSON object."), code="invalid_value")
    lang = i18n.choose(inputs.check_lang(payload.get("lang")), language, event=event)
    key = (idempotency_key or "").strip() or None
    if key is None:
        return _register(event, payload, None, now, lang)
    key = inputs.check_text(
        key,
        code="invalid_value",
        max_length=MAX_KEY_LENGTH,
        label=_("The Idempotency-Key"),
        field="Idempotency-Key",
    )
    replay = _replay(event, key, payload)
    if replay is not None:
        return replay
    try:
        return _register(event, payload, key, now, lang)
    except (DomainError, _KeyTaken):
        # A concurrent request with this key won: its answer is the answer (also when this
        # attempt was refused because the winner took the last seats).
        replay = _replay(event, key, payload)
        if replay is None:
            raise
        return replay


class _KeyTaken(Exception):
    """The Idempotency-Key row was inserted by a concurrent request (this one rolls back)."""


@cache
def _replay_sql() -> str:
    # Plain SQL (the ORM's .first() compiles anew on every call), prepared once per connection
    # (pipeline.cursor); the name from model meta.
    table = connection.ops.quote_name(IntakeIdempotency._meta.db_table)
    return f"""
        SELECT fingerprint, status_code, response FROM {table} WHERE event_id = %s AND key = %s
    """  # noqa: S608


def _replay(event: Event, key: str, payload: Any) -> IntakeResult | None:
    with pipeline.cursor() as cursor:
        cursor.execute(_replay_sql(), [event.pk, key])
        previous = cursor.fetchone()
    if previous is None:
        return None
    stored_fingerprint, status_code, response = previous
    if stored_fingerprint != fingerprint(payload):
        raise ValidationFailed(
            _("This Idempotency-Key was used for another request."),
            code="invalid_value",
            field="Idempotency-Key",
        )
    # Django has psycopg hand jsonb over as text (JSONField parses it): so does this read.
    body = json.loads(response) if isinstance(response, str) else response
    return IntakeResult(status_code, body, replayed=True)


def _register(
    event: Event, payload: Mapping[str, Any], key: str | None, now, lang: str
) -> IntakeResult:
    reason = closed_reason(event=event, now=now)
    if reason is not None:
        raise RegistrationsClosed(rules.closed_message(reason), reason=reason)
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
        # On the inputs register() confirms under the Event row lock: what may have changed
        # since the checks above.
        _recheck(locked, fresh, now)

    def book() -> list[Registration]:
        # Re-checks what can change (recheck) on inputs confirmed under the Event row lock,
        # books the seats (sold_out).
        held = loaded.booking
        return registrations.register(
            event=event,
            attendees=attendees,
            ticket=ticket,
            slot=slot,
            state="open",
            utm=utm,
            actor=PUBLIC,
            lang=lang,
            recheck=recheck,
            now=now,
            # read with the event for the ticket the body named; `events_book` confirms them
            inputs=held if held.ticket_id == (ticket.pk if ticket else None) else None,
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


# The first read of every intake, in ONE statement (a round trip per statement was most of an
# intake's cost, bench B2): the event with its stage's pipe_end, and what the checks before the
# lock read — its tickets and its slots (multi-slot events), each set as a JSON array of rows in
# the model's field order — and the booking's inputs (events.db.booking.INPUTS_JOIN: its active
# questions in display order, their choice ids, the ticket asked for), which the checks read
# too and the booking is handed. It replaces five statements, and
# Model.from_db replaces raw(), which spent more CPU building these rows than PostgreSQL spends
# running the statement; a server-binding cursor (pipeline.cursor) has PostgreSQL plan it once
# per connection, not on every request. The row is read whatever the event's state;
# `_public_event` answers None (404) for an unpublished or archived event, before the rate
# limit, as always.


@cache
def _fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    return tuple(model._meta.concrete_fields)


@cache
def _from_db(model: type[models.Model]) -> tuple[tuple[int, Any], ...]:
    """(index, from_db_value) of the fields that convert what psycopg returns (JSONField)."""
    return tuple(
        (index, f.from_db_value)
        for index, f in enumerate(_fields(model))
        if hasattr(f, "from_db_value")
    )


def _json_row(model: type[models.Model], alias: str) -> str:
    # Decimals as text: a JSON number would reach Python as a float.
    return "json_build_array({})".format(
        ", ".join(
            f"{alias}.{connection.ops.quote_name(f.column)}"
            + ("::text" if isinstance(f, models.DecimalField) else "")
            for f in _fields(model)
        )
    )


@cache
def _intake_sql() -> str:
    quote = connection.ops.quote_name
    event, stage, ticket, slot = (quote(m._meta.db_table) for m in (Event, Stage, Ticket, Slot))
    event_columns = ", ".join(f"e.{quote(f.column)}" for f in _fields(Event))
    # Built from constants (table and column names from model meta); values are parameters.
    # The questions and their choices are the booking inputs' (INPUTS_JOIN): read once.
    return f"""
        SELECT {event_columns}, s.pipe_end, s.is_cancelled,
               (SELECT json_agg({_json_row(Ticket, "t")} ORDER BY t.id)
                  FROM {ticket} t WHERE t.event_id = e.id)::text,
               CASE WHEN e.is_multi_slots THEN
                   (SELECT json_agg({_json_row(Slot, "sl")} ORDER BY sl.id)
                      FROM {slot} sl WHERE sl.event_id = e.id)
               END::text,
               booking_inputs.inputs_text, booking_inputs.inputs_digest
          FROM {event} e JOIN {stage} s ON s.id = e.stage_id
          {booking_sql.INPUTS_JOIN}
         WHERE e.id = %s
    """  # noqa: S608


@dataclass
class _Loaded:
    """What the checks read (`_read`: one statement)."""

    tickets: dict[int, Ticket]
    slots: dict[int, Slot]
    booking: booking_sql.BookingInputs  # the booking's inputs, read in the same statement

    @property
    def questions(self) -> list[Question]:
        """The active questions, in display order (the booking inputs')."""
        return list(self.booking.questions.values())

    @property
    def choices(self) -> dict[int, set[int]]:
        """The choice ids of each choice question."""
        return {
            pk: set(self.booking.choices[pk])
            for pk, question in self.booking.questions.items()
            if question.question_type == QuestionType.SIMPLE_CHOICE
        }


_LOADED = "_intake_loaded"  # where _public_event leaves the event's _Loaded for _load


def _instances(model: type[M], text: str | None) -> list[M]:
    """Instances from a JSON array of rows in field order (each value through its field's
    to_python, as a form would: ISO dates, decimal text)."""
    fields = _fields(model)
    names = [f.attname for f in fields]
    return [
        model.from_db(
            connection.alias, names, [f.to_python(v) for f, v in zip(fields, row, strict=True)]
        )
        for row in json.loads(text or "[]")
    ]


def _read(event_id: int, ticket_id: int | None = None) -> tuple[Event, _Loaded] | None:
    """The event (any state; `stage_pipe_end`, `stage_is_cancelled` set: the stage's flags
    `rules.closed_reason` reads) and what its checks read, or None. The
    request's first statement: it tests the kept connection itself (`pipeline.first_read`)."""
    row = pipeline.first_read(lambda: _intake_row(event_id, ticket_id))
    if row is None:
        return None
    fields = _fields(Event)
    width = len(fields)
    values = list(row[:width])
    for index, convert in _from_db(Event):
        values[index] = convert(values[index], None, connection)
    event = Event.from_db(connection.alias, [f.attname for f in fields], values)
    pipe_end, stage_cancelled, tickets, slots, text, digest = row[width:]
    event.stage_pipe_end, event.stage_is_cancelled = pipe_end, stage_cancelled
    loaded = _Loaded(
        tickets={t.pk: t for t in _instances(Ticket, tickets)},
        slots={s.pk: s for s in _instances(Slot, slots)},
        booking=booking_sql.inputs_from(text, digest, ticket_id),
    )
    return event, loaded


def _intake_row(event_id: int, ticket_id: int | None):
    with pipeline.cursor() as cursor:
        cursor.execute(_intake_sql(), [ticket_id, event_id])
        return cursor.fetchone()


def _public_event(event_id: int, ticket_id: int | None = None) -> Event | None:
    """The published, active event (its checks' reads and the booking's inputs for `ticket_id`
    kept for `_load`), or None."""
    read = _read(event_id, ticket_id)
    if read is None:
        return None
    event, loaded = read
    if not (event.is_published and event.active):
        return None
    vars(event)[_LOADED] = loaded
    return event


def _load(event: Event) -> _Loaded:
    """Tickets, slots (multi-slot events only), active questions and the choice ids of each
    choice question: those `_public_event` read with the event, else read now."""
    loaded = vars(event).pop(_LOADED, None)
    if loaded is not None:
        return loaded
    read = _read(event.pk)
    if read is None:
        raise NotFound(_("No such event."))
    return read[1]


def _pick(rows: Mapping[int, Any], raw: Any) -> Any:
    """The row an id names; None when no id was given; `registrations.UNKNOWN` otherwise."""
    if raw is None or raw == "":
        return None
    row = rows.get(inputs.as_id(raw))  # type: ignore[arg-type]
    return registrations.UNKNOWN if row is None else row


def _recheck(locked: Event, ticket: Ticket | None, now: datetime) -> None:
    """Closed reason and sale window again, on the booking's inputs (register()).

    The event carries kanban_state and date_end, and its stage's pipe_end (`stage_pipe_end`);
    `ticket` is the requested ticket of the same inputs. `events_book` writes only when, under
    the Event lock, those inputs are still what is committed; otherwise they are read
    again under the lock and this runs once more (docs/spec.md, register P11)."""
    reason = closed_reason(event=locked, now=now)
    if reason is not None:
        raise RegistrationsClosed(rules.closed_message(reason), reason=reason)
    if ticket is not None:
        _check_sale(ticket, now)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _check_sale(ticket: Ticket, now: datetime) -> None:
    state = rules.sale_state(ticket=ticket, now=now)
    if state == "not_started":
        raise ValidationFailed(
            _("Sales of this ticket have not started yet."),
            code="sale_not_started",
            field="ticket",
            start_sale_datetime=_iso(ticket.start_sale_datetime),
        )
    if state == "ended":
        raise ValidationFailed(
            _("Sales of this ticket have ended."),
            code="sale_ended",
            field="ticket",
            end_sale_datetime=_iso(ticket.end_sale_datetime),
        )
    if state == "priced":
        raise ValidationFailed(
            _("This ticket is sold through our shop, not here."),
            code="priced_ticket",
            field="ticket",
        )


def _check_quantity(ticket: Ticket | None, raw: Any) -> list[Any]:
    limit = max_quantity(ticket)
    count = len(raw) if isinstance(raw, list) else 0
    if not isinstance(raw, list) or not 1 <= count <= limit:
        raise ValidationFailed(
            ngettext(
                "Register one attendee at a time.",
                "Register between 1 and %(max)s attendees at once.",
                limit,
            )
            % {"max": limit},
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
            _("%(field)s must be text.") % {"field": inputs.FIELD_LABELS[name]},
            code="invalid_attendee",
            attendee=index,
            field=name,
        )
    return inputs.check_contact(value, field=name, attendee=index)


def _check_attendee(index: int, raw: Any, questions: Sequence[Question]) -> dict[str, Any]:
    """One attendee, normalised; a contact question left unanswered takes the typed field."""
    if not isinstance(raw, Mapping):
        raise ValidationFailed(
            _("Each attendee must be an object."), code="invalid_attendee", attendee=index
        )
    attendee: dict[str, Any] = {name: _text(index, raw, name) for name in CONTACT_FIELDS}
    answers = raw.get("answers")
    if answers is None:
        answers = {}
    if not isinstance(answers, Mapping):
        raise ValidationFailed(
            _("answers must be an object."),
            code="invalid_answer",
            attendee=index,
            field="answers",
        )
    answers = {str(k): v for k, v in answers.items() if not _blank(v)}
    for question in questions:
        contact = CONTACT_QUESTIONS.get(question.question_type)
        if contact and str(question.pk) not in answers and attendee[contact]:
            answers[str(question.pk)] = attendee[contact]
    name = attendee["name"] or _contact_answer(answers, questions, QuestionType.NAME)
    if not name:
        raise ValidationFailed(
            _("Each attendee needs a name."),
            code="invalid_attendee",
            attendee=index,
            field="name",
        )
    if attendee["email"] and not is_valid_email(attendee["email"]):
        raise ValidationFailed(
            _("“%(email)s” is not an email address.") % {"email": attendee["email"]},
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
                    _("Please answer “%(question)s”.")
                    % {"question": i18n.localized(question, "title")},
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
