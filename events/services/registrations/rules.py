"""The rules a registration obeys, each stated once: the states and their transitions, the
audit verb of each, the ticket/slot pair, the answers and the contact fields an attendee gives.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from django.utils.translation import gettext as _

from events import inputs
from events.errors import (
    ValidationFailed,
)
from events.models import (
    CancelSource,
    Event,
    Question,
    QuestionType,
    RegistrationState,
    SaleStatus,
    Slot,
    Ticket,
)
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
        raise ValidationFailed(_("Choose a ticket."), code="ticket_required", field="ticket")
    if ticket is UNKNOWN or (isinstance(ticket, Ticket) and ticket.event_id != event.pk):
        raise ValidationFailed(
            _("This ticket is not sold for this event."), code="invalid_ticket", field="ticket"
        )
    if not event.is_multi_slots:
        if slot is not None:
            raise ValidationFailed(
                _("This event has no time slots."), code="invalid_slot", field="slot"
            )
    elif slot is None:
        raise ValidationFailed(_("Choose a time slot."), code="slot_required", field="slot")
    elif slot is UNKNOWN or (isinstance(slot, Slot) and slot.event_id != event.pk):
        raise ValidationFailed(
            _("This time slot is not a slot of this event."), code="invalid_slot", field="slot"
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
                _("“%(question)s” is not a question of this event.") % {"question": key},
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
                _("%(field)s must be text.") % {"field": inputs.FIELD_LABELS.get(field, field)},
                code="invalid_attendee",
                attendee=index,
                field=field,
            )
        fields[field] = inputs.check_contact(value, field=field, attendee=index)
    fields["phone"] = normalise_phone(fields["phone"], country=event.country)
    for question_id, value in answers.items():
        contact = CONTACT_QUESTION_FIELDS.get(questions[question_id].question_type)
        if contact and not fields[contact]:
            fields[contact] = inputs.check_contact(value, field=contact, attendee=index)
    if fields["email"] and not is_valid_email(fields["email"]):
        raise ValidationFailed(
            _("“%(email)s” is not an email address.") % {"email": fields["email"]},
            code="invalid_attendee",
            attendee=index,
            field="email",
        )
    return fields
