"""Presentation of the public registration form (no rules here: the intake service decides).

`build` turns an event, the seat module's numbers and an optional refusal into a plain
structure the template renders field by field (label, value, error next to the field, aria);
`payload_from_post` turns the posted form into the intake JSON of interfaces.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from events import i18n, inputs, rules
from events.errors import DomainError
from events.models import Event, Question, QuestionType
from events.read import selectors
from events.services import intake

# field: (input type, autocomplete); the labels are inputs.FIELD_LABELS.
CONTACT_INPUTS = {
    "name": ("text", "name"),
    "email": ("email", "email"),
    "phone": ("tel", "tel"),
    "company_name": ("text", "organization"),
}
TICKET_ERRORS = {"ticket_required", "invalid_ticket", "sale_not_started", "sale_ended"}
TICKET_ERRORS |= {"priced_ticket"}
SLOT_ERRORS = {"slot_required", "invalid_slot"}


def _quantity(raw: Any, limit: int) -> int:
    """The number of attendee blocks to show (1..limit)."""
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return 1
    return min(max(value, 1), limit)


def _posted_quantity(raw: Any) -> int:
    """The number of attendees to send: the posted one, so the intake service's quantity rule
    decides (`invalid_quantity`) instead of this form silently changing it. Bounded just
    outside the service's range (0 and MAX_PER_ORDER + 1 are refused all the same), so a
    posted 10**9 never builds 10**9 attendees. Missing or not a number: 1 (the form's
    default)."""
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return 1
    return min(max(value, 0), intake.MAX_PER_ORDER + 1)


def payload_from_post(post: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(intake payload, Idempotency-Key) from the posted form."""
    quantity = _posted_quantity(post.get("quantity"))
    attendees = []
    for index in range(quantity):
        prefix = f"a{index}-"
        attendee: dict[str, Any] = {f: post.get(prefix + f, "") for f in CONTACT_INPUTS}
        attendee["answers"] = {
            key[len(prefix) + 1 :]: value
            for key, value in post.items()
            if key.startswith(prefix + "q") and value != ""
        }
        attendees.append(attendee)
    if attendees:
        # Once-per-order answers are given once; the registration service copies them.
        attendees[0]["answers"].update(
            {key[len("order-q") :]: v for key, v in post.items() if key.startswith("order-q") and v}
        )
    payload = {
        "ticket_id": post.get("ticket") or None,
        "slot_id": post.get("slot") or None,
        "attendees": attendees,
    }
    utm = {k: post.get(f"utm_{k}") for k in intake.UTM_FIELDS if post.get(f"utm_{k}")}
    if utm:
        payload["utm"] = utm
    if post.get("lang"):
        payload["lang"] = post["lang"]  # the language the page was shown in
    return payload, (post.get("idempotency_key") or None)


def error_field(error: DomainError, questions: list[Question]) -> str | None:
    """The form field a refusal belongs to (None: the form as a whole)."""
    details = error.details
    if error.code in TICKET_ERRORS:
        return "ticket"
    if error.code in SLOT_ERRORS:
        return "slot"
    if error.code == "invalid_quantity":
        return "quantity"
    if error.code == "invalid_attendee" and "field" in details:
        return f"a{details.get('attendee', 0)}-{details['field']}"
    if error.code in ("question_required", "invalid_answer"):
        question = next((q for q in questions if str(q.pk) == str(details.get("question"))), None)
        if question is None:
            return None
        contact = intake.CONTACT_QUESTIONS.get(question.question_type)
        if contact:
            return f"a{details.get('attendee', 0)}-{contact}"
        if question.once_per_order:
            return f"order-q{question.pk}"
        return f"a{details.get('attendee', 0)}-q{question.pk}"
    return None


def _seats_text(available: int | None) -> str:
    if available is None:
        return ""
    if available <= 0:
        return _("Sold out")
    return ngettext("%(count)s seat left", "%(count)s seats left", available) % {
        "count": number_format(available)
    }


def price_text(amount: Any, currency: str) -> str:
    """A price in the active language's way ("12.50 EUR", "12,50 EUR")."""
    return pgettext("price", "%(amount)s %(currency)s") % {
        "amount": number_format(amount, 2, force_grouping=True),
        "currency": currency,
    }


def _best(values: list[int | None]) -> int | None:
    if any(v is None for v in values):
        return None
    return max(values) if values else 0


def build(
    *,
    event: Event,
    now: datetime,
    summaries: Mapping[tuple[int | None, int | None], Mapping[str, Any]],
    closed: str | None,
    quantity: Any,
    posted: Mapping[str, Any] | None,
    error: DomainError | None,
    idempotency_key: str,
) -> dict[str, Any]:
    tickets = list(event.tickets.all())
    slots = list(event.slots.all()) if event.is_multi_slots else []
    questions: list[Question] = list(event.active_questions)
    posted = posted or {}
    error_at = error_field(error, questions) if error is not None else None
    errors = {error_at: error.message} if error is not None and error_at else {}

    slot_keys = [s.pk for s in slots] or [None]
    ticket_options = []
    for ticket in tickets:
        available = _best([summaries[(s, ticket.pk)]["available"] for s in slot_keys])
        state = rules.sale_state(ticket=ticket, now=now)
        note = {
            "not_started": _("On sale soon"),
            "ended": _("Sales ended"),
            "priced": _("Sold through our shop"),
        }.get(state) or _seats_text(available)
        sellable = state == "open" and (available is None or available > 0)
        price = price_text(ticket.price, event.currency) if ticket.price > 0 else _("Free")
        ticket_options.append(
            {
                "value": str(ticket.pk),
                "label": i18n.localized(ticket, "name"),
                "hint": " · ".join(p for p in (price, note) if p),
                "description": i18n.localized(ticket, "description"),
                "disabled": not sellable,
                "limit": intake.max_quantity(ticket),
            }
        )
    sellable_tickets = [o for o in ticket_options if not o["disabled"]]
    if len(sellable_tickets) == 1 and not posted:
        sellable_tickets[0]["checked"] = True
    for option in ticket_options:
        if posted and posted.get("ticket") == option["value"]:
            option["checked"] = True

    slot_options = []
    for slot in slots:
        available = _best(
            [summaries[(slot.pk, t.pk if t else None)]["available"] for t in (tickets or [None])]
        )
        slot_options.append(
            {
                "value": str(slot.pk),
                "slot": slot,
                "hint": _seats_text(available),
                "disabled": available is not None and available <= 0,
                "checked": posted.get("slot") == str(slot.pk),
            }
        )

    limit = max([o["limit"] for o in sellable_tickets] or [intake.MAX_PER_ORDER])
    count = _quantity(posted.get("quantity") if posted else quantity, limit)

    def field(name: str, label: str, kind: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "id": "f-" + name,
            "label": label,
            "kind": kind,
            "value": posted.get(name, ""),
            "error": errors.get(name, ""),
            "required": extra.pop("required", False),
            **extra,
        }

    def question_field(name: str, question: Question) -> dict[str, Any]:
        if question.question_type == QuestionType.SIMPLE_CHOICE:
            options = [
                {
                    "value": str(c.pk),
                    "label": i18n.localized(c, "name"),
                    "checked": posted.get(name) == str(c.pk),
                }
                for c in question.choices.all()
            ]
            return field(
                name,
                i18n.localized(question, "title"),
                "radio",
                options=options,
                required=question.is_mandatory_answer,
            )
        return field(
            name,
            i18n.localized(question, "title"),
            "text",
            required=question.is_mandatory_answer,
        )

    contact_questions = {
        intake.CONTACT_QUESTIONS[q.question_type]: q
        for q in questions
        if q.question_type in intake.CONTACT_QUESTIONS
    }
    attendees = []
    for index in range(count):
        fields = []
        for contact, (kind, autocomplete) in CONTACT_INPUTS.items():
            question = contact_questions.get(contact)
            fields.append(
                field(
                    f"a{index}-{contact}",
                    i18n.localized(question, "title") if question else inputs.FIELD_LABELS[contact],
                    kind,
                    autocomplete=autocomplete,
                    # The column's size, from the one source the service checks against.
                    maxlength=inputs.limit(contact),
                    required=contact == "name" or bool(question and question.is_mandatory_answer),
                )
            )
        for question in questions:
            if question.question_type in intake.CONTACT_QUESTIONS or question.once_per_order:
                continue
            fields.append(question_field(f"a{index}-q{question.pk}", question))
        attendees.append({"number": index + 1, "fields": fields})

    order_fields = [
        question_field(f"order-q{q.pk}", q)
        for q in questions
        if q.once_per_order and q.question_type not in intake.CONTACT_QUESTIONS
    ]
    sold_out = selectors.sold_out(event, summaries=summaries)
    on_sale = not tickets or bool(sellable_tickets)
    return {
        "closed": closed,
        "open": closed is None and not sold_out and on_sale,
        "sold_out": closed is None and sold_out,
        "no_sale": closed is None and not sold_out and not on_sale,
        "tickets": ticket_options,
        "ticket_error": errors.get("ticket", ""),
        "slots": slot_options,
        "slot_error": errors.get("slot", ""),
        "quantity": count,
        "quantity_choices": list(range(1, limit + 1)),
        "quantity_error": errors.get("quantity", ""),
        "attendees": attendees,
        "order_fields": order_fields,
        "error": error,
        "error_anchor": {None: "", "quantity": "quantity-select"}.get(error_at, f"f-{error_at}"),
        "idempotency_key": idempotency_key,
    }
