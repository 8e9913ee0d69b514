"""Registrations: creation and the state machine of spec.md §4.

Invariants:
- `Registration.state` is written here and nowhere else; only the transitions of TRANSITIONS
  exist, anything else raises `InvalidTransition` and writes nothing;
- entering `open`/`done` goes through the seat module under the Event row lock (lock first,
  then decide, then write); a request for n attendees succeeds or fails whole;
- every verb writes its audit rows in the same transaction; side effects run after commit.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from events import hooks
from events.errors import (
    ArchiveRefused,
    InvalidTransition,
    RegistrationsClosed,
    ValidationFailed,
)
from events.models import (
    ContactSource,
    Event,
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
from events.services import audit, locks, scheduler_rows, seats
from events.services.contacts import is_valid_email, normalise_phone

S = RegistrationState

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

CONTACT_QUESTION_FIELDS = {
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


def _clean_answers(
    event: Event, questions: dict[int, Question], raw: Mapping[Any, Any] | None
) -> dict[int, Any]:
    """{question_id: choice_id | text}, validated against the event's questions."""
    cleaned: dict[int, Any] = {}
    for key, value in (raw or {}).items():
        try:
            question_id = int(key)
        except (TypeError, ValueError):
            raise ValidationFailed(
                f"Unknown question {key!r}.", code="invalid_answer", question=str(key)
            ) from None
        question = questions.get(question_id)
        if question is None:
            raise ValidationFailed(
                f"Question {key} is not a question of this event.",
                code="invalid_answer",
                question=question_id,
            )
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if question.question_type == QuestionType.SIMPLE_CHOICE:
            try:
                choice_id = int(value)
            except (TypeError, ValueError):
                choice_id = None
            if choice_id not in {c.pk for c in question.choices.all()}:
                raise ValidationFailed(
                    f"Choice {value!r} does not belong to question {question_id}.",
                    code="invalid_answer",
                    question=question_id,
                )
            cleaned[question_id] = choice_id
        else:
            if not isinstance(value, str):
                raise ValidationFailed(
                    f"Question {question_id} takes text.",
                    code="invalid_answer",
                    question=question_id,
                )
            text = value.strip()
            if question.question_type == QuestionType.EMAIL and not is_valid_email(text):
                raise ValidationFailed(
                    f"{text!r} is not an email address.",
                    code="invalid_answer",
                    question=question_id,
                )
            if question.question_type == QuestionType.PHONE:
                text = normalise_phone(text, country=event.country)
            cleaned[question_id] = text
    return cleaned


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
    now=None,
) -> list[Registration]:
    """Create one registration per attendee, all or none.

    An attendee is a mapping with name, email, phone, company_name and answers
    ({question_id: text | choice_id}). `contact_sources` (one per attendee, default
    "attendee") marks rows whose details came from the host partner.
    """
    if (None, state) not in TRANSITIONS:
        raise InvalidTransition(f"A registration cannot be created in state {state!r}.")
    if not attendees:
        raise ValidationFailed("At least one attendee is needed.", code="invalid_quantity")
    if sale_status not in SaleStatus.values:
        raise ValidationFailed(f"Unknown sale status {sale_status!r}.", code="invalid_value")
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
        "actor": actor,
        "now": now,
    }
    # A barcode collision (unique index) aborts the transaction: the whole verb is retried with
    # fresh barcodes. Retrying here, outside the atomic block, spares every booking the
    # savepoint an in-transaction retry would need; a collision is never surfaced.
    for attempt in range(BARCODE_ATTEMPTS):
        try:
            return _register(event.pk, **request)
        except IntegrityError as exc:
            if not _barcode_collision(exc) or attempt == BARCODE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _barcode_collision(exc: IntegrityError) -> bool:
    diag = getattr(exc.__cause__, "diag", None)
    return "barcode" in (getattr(diag, "constraint_name", None) or "")


def _register(
    event_id: int,
    *,
    attendees: Sequence[Mapping[str, Any]],
    ticket: Ticket | None,
    slot: Slot | None,
    state: str,
    partner_ref: str,
    sale_order_ref: str,
    sale_order_line_ref: str,
    sale_status: str,
    utm: Mapping[str, str],
    contact_sources: Sequence[str] | None,
    actor: Any,
    now,
) -> list[Registration]:
    with transaction.atomic():
        event = locks.lock_event_for_booking(event_id)
        if state == S.OPEN and event.kanban_state == KanbanState.CANCEL:
            raise RegistrationsClosed("The event is cancelled.")
        ticket, slot = _check_pair(event, ticket, slot)
        questions = {}
        if event.has_questions:
            questions = {
                q.pk: q
                for q in Question.objects.filter(event=event, active=True).prefetch_related(
                    "choices"
                )
            }
        answers = [_clean_answers(event, questions, a.get("answers")) for a in attendees]
        _copy_once_per_order(questions, answers)
        sources = list(contact_sources or [ContactSource.ATTENDEE] * len(attendees))

        rows = []
        for index, attendee in enumerate(attendees):
            fields = {
                "name": (attendee.get("name") or "").strip(),
                "email": (attendee.get("email") or "").strip(),
                "phone": normalise_phone(attendee.get("phone") or "", country=event.country),
                "company_name": (attendee.get("company_name") or "").strip(),
            }
            for question_id, value in answers[index].items():
                field = CONTACT_QUESTION_FIELDS.get(questions[question_id].question_type)
                if field and not fields[field]:
                    fields[field] = value
            if fields["email"] and not is_valid_email(fields["email"]):
                raise ValidationFailed(
                    f"{fields['email']!r} is not an email address.",
                    code="invalid_attendee",
                    attendee=index,
                    field="email",
                )
            rows.append(
                Registration(
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

        if state == S.OPEN:
            seats.reserve(
                event=event,
                slot_id=slot.pk if slot is not None else None,
                ticket=ticket,
                count=len(rows),
            )
        Registration.objects.bulk_create(rows)
        RegistrationAnswer.objects.bulk_create(
            [
                RegistrationAnswer(
                    registration=row,
                    question_id=question_id,
                    choice_id=value if isinstance(value, int) else None,
                    text_value=None if isinstance(value, int) else value,
                )
                for row, row_answers in zip(rows, answers, strict=True)
                for question_id, value in row_answers.items()
            ]
        )
        audit.record_many(
            [
                audit.entry(
                    actor=actor,
                    verb=f"registration.created.{state}",
                    registration=row,
                    data={
                        "ticket": row.ticket_id,
                        "slot": row.slot_id,
                        "order": row.sale_order_ref,
                    },
                )
                for row in rows
            ]
        )
        if state == S.OPEN:
            if event.has_after_sub:  # flag read by the lock statement
                scheduler_rows.registrations_opened(event=event, registrations=rows, now=now)
        hooks.run(hooks.registrations_changed, rows, actor)
    return rows


def _check_pair(event: Event, ticket: Ticket | None, slot: Slot | None):
    has_tickets = event.has_tickets  # annotated by locks.lock_event_for_booking
    if ticket is None and has_tickets:
        raise ValidationFailed("Choose a ticket.", code="ticket_required", field="ticket")
    if ticket is not None and ticket.event_id != event.pk:
        raise ValidationFailed(
            "This ticket is not sold for this event.", code="invalid_ticket", field="ticket"
        )
    if event.is_multi_slots:
        if slot is None:
            raise ValidationFailed("Choose a time slot.", code="slot_required", field="slot")
        if slot.event_id != event.pk:
            raise ValidationFailed(
                "This slot is not a slot of this event.", code="invalid_slot", field="slot"
            )
    elif slot is not None:
        raise ValidationFailed("This event has no time slots.", code="invalid_slot", field="slot")
    return ticket, slot


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
    registration: Registration, to: str, verb: str, actor: Any, *, now=None
) -> Registration:
    now = now or timezone.now()
    with transaction.atomic():
        event = locks.lock_event(registration.event_id)
        reg = locks.lock_registration(registration.pk)
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

        update = ["state", "updated_at"]
        if reg.active:
            hold = _ledger_delta(source, to, reg)
            if to == S.OPEN and source == S.DRAFT:
                seats.reserve(event=event, slot_id=reg.slot_id, ticket=reg.ticket, count=1)
            elif hold is not None:
                seats.apply(event=event, holds=[hold])
        reg.state = to
        if to == S.OPEN and reg.confirmed_at is None:
            reg.confirmed_at = now
            update.append("confirmed_at")
        if to == S.DONE and reg.date_closed is None:
            reg.date_closed = now
            update.append("date_closed")
        reg.save(update_fields=update)
        audit.record(
            actor=actor,
            verb=f"registration.{verb}",
            registration=reg,
            data={"state": [source, to]},
        )
        if to == S.OPEN and source == S.DRAFT:
            scheduler_rows.registrations_opened(event=event, registrations=[reg], now=now)
        hooks.run(hooks.registrations_changed, [reg], actor)
    return reg


def _ledger_delta(source: str, to: str, reg: Registration) -> seats.Hold | None:
    held = {S.OPEN: "reserved", S.DONE: "used"}
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


def mark_attended(*, registration: Registration, actor: Any, now=None) -> Registration:
    return _transition(registration, S.DONE, "mark_attended", actor, now=now)


def undo_attendance(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.OPEN, "undo_attendance", actor)


def cancel(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.CANCEL, "cancel", actor)


def reset_to_draft(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.DRAFT, "reset_to_draft", actor)


def _set_active(registration: Registration, active: bool, actor: Any) -> Registration:
    with transaction.atomic():
        locks.lock_event(registration.event_id)
        reg = locks.lock_registration(registration.pk)
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
    """Copy the host partner's details onto its partner-sourced draft/open registrations."""
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
            )
            .order_by("pk")
        )
        entries = []
        for reg in regs:
            new = {
                "name": name or "",
                "email": email or "",
                "phone": normalise_phone(phone or "", country=reg.event.country),
                "company_name": company_name or "",
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
