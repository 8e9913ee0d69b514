"""Presentation of the event page's "Join the waiting list" form (no rules here: the waitlist
service decides, `waitlist.join`).

The form shows when registrations are open and some (ticket, slot) pair a visitor could book
here is sold out: its choices are the free, on-sale tickets sold out in some slot and the slots
sold out for some ticket. The seat numbers are the page's own (`seats.ticket_summaries`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from events import inputs, rules
from events.errors import DomainError
from events.models import Event

# Refusals shown next to a field (the others above the form).
FIELD_ERRORS = {
    "ticket_required": "ticket",
    "invalid_ticket": "ticket",
    "sale_not_started": "ticket",
    "sale_ended": "ticket",
    "priced_ticket": "ticket",
    "slot_required": "slot",
    "invalid_slot": "slot",
}


def _sold_out(numbers: Mapping[str, Any]) -> bool:
    return numbers["available"] is not None and numbers["available"] <= 0


def build(
    *,
    event: Event,
    now: datetime,
    summaries: Mapping[tuple[int | None, int | None], Mapping[str, Any]],
    closed: str | None,
    posted: Mapping[str, Any] | None = None,
    error: DomainError | None = None,
) -> dict[str, Any] | None:
    """The form's structure, or None when there is no waiting list to join."""
    if closed is not None:
        return None
    tickets = {t.pk: t for t in event.tickets.all()}
    on_sale = {pk for pk, t in tickets.items() if rules.sale_state(ticket=t, now=now) == "open"}
    pairs = [
        key
        for key, numbers in summaries.items()
        if _sold_out(numbers) and (key[1] is None or key[1] in on_sale)
    ]
    if not pairs:
        return None
    posted = posted or {}
    ticket_ids = {ticket_id for _, ticket_id in pairs if ticket_id is not None}
    slot_ids = {slot_id for slot_id, _ in pairs if slot_id is not None}
    at = None
    if error is not None:
        at = FIELD_ERRORS.get(error.code) or (
            error.details.get("field") if error.code == "invalid_attendee" else None
        )
    one_ticket = len(ticket_ids) == 1
    one_slot = len(slot_ids) == 1
    return {
        "tickets": [
            {
                "value": str(t.pk),
                "label": t.name,
                "checked": posted.get("ticket") == str(t.pk) or (one_ticket and not posted),
            }
            for pk, t in tickets.items()
            if pk in ticket_ids
        ],
        "slots": [
            {
                "value": str(s.pk),
                "slot": s,
                "checked": posted.get("slot") == str(s.pk) or (one_slot and not posted),
            }
            for s in event.slots.all()
            if s.pk in slot_ids
        ],
        "name": posted.get("name", ""),
        "email": posted.get("email", ""),
        "name_max": inputs.limit("name"),
        "email_max": inputs.limit("email"),
        "error": error,
        "error_at": at,
        "whole_event": all(_sold_out(n) for n in summaries.values()),
    }
