"""Lead values and description (spec-overlay.md §3.2): what the sink receives for a lead.

- name "<event> – <contact>"; the contact is the first registration whose details came from
  the host partner (`contact_source = partner`), else the first registration;
- the rule's type, team, user and tags; the event; the first non-empty utm values;
- a description listing each participant (name, email, phone) with their answers (question:
  choice or text), in registration order. An order lead that gains participants is sent the
  whole list again, so its new description is the old one with the new participants appended;
- `idempotency_key`: the lead's identity, `rule:<rule id>:event:<event id>:<group key>` — the
  provenance's unique (rule, event, group). Every pass that sends this lead sends the same key,
  so a sink can upsert by it when a lead_ref never reached us (a crash after the sink's write, a
  walker whose lease expired and whose batch is redone by the next holder).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from events.models import ContactSource, Event, Registration
from leads.models import LeadRule
from leads.services.vocabulary import Answer

HEADER = "Participants"


def participant_line(
    number: int, registration: Registration, answers: Sequence[Answer] = ()
) -> str:
    contact = ", ".join(v for v in (registration.email, registration.phone) if v)
    who = registration.name or registration.email or f"Registration #{registration.pk}"
    line = f"{number}. {who}" + (f" ({contact})" if contact else "")
    shown = [
        f"   - {a.title}: {a.choice_name if a.choice_id is not None else a.text_value}"
        for a in answers
        if (a.choice_name if a.choice_id is not None else a.text_value)
    ]
    return "\n".join([line, *shown])


def description(
    registrations: Sequence[Registration], answers: Mapping[int, Sequence[Answer]]
) -> str:
    lines = [
        participant_line(i, r, answers.get(r.pk, ())) for i, r in enumerate(registrations, start=1)
    ]
    return "\n".join([HEADER, *lines])


def _first(registrations: Sequence[Registration], field: str) -> str:
    return next((getattr(r, field) for r in registrations if getattr(r, field)), "")


def idempotency_key(*, rule_id: int, event_id: int, group_key: str) -> str:
    """The stable key of the lead of (rule, event, group). The event is part of it: a rule
    without an event scope makes one lead per event for the same order or partner."""
    return f"rule:{rule_id}:event:{event_id}:{group_key}"


def lead_values(
    *,
    rule: LeadRule,
    event: Event,
    group_key: str,
    registrations: Sequence[Registration],
    answers: Mapping[int, Sequence[Answer]],
) -> dict[str, Any]:
    """The values of the lead of `rule` for the group `group_key` of these registrations
    (ordered by id)."""
    contact = next(
        (r for r in registrations if r.contact_source == ContactSource.PARTNER and r.partner_ref),
        registrations[0],
    )
    contact_name = contact.name or contact.email or _first(registrations, "name")
    utm = {key: _first(registrations, f"utm_{key}") for key in ("source", "medium", "campaign")}
    return {
        "name": f"{event.name} – {contact_name}"[:255],
        "lead_type": rule.lead_type,
        "team_ref": rule.team_ref,
        "user_ref": rule.user_ref,
        "tag_refs": list(rule.tag_refs or []),
        "event_id": event.pk,
        "event_name": event.name,
        "rule_id": rule.pk,
        "basis": rule.lead_creation_basis,
        "group_key": group_key,
        "idempotency_key": idempotency_key(rule_id=rule.pk, event_id=event.pk, group_key=group_key),
        "partner_ref": _first(registrations, "partner_ref"),
        "contact_name": contact_name,
        "email": contact.email or _first(registrations, "email"),
        "phone": contact.phone or _first(registrations, "phone"),
        "company_name": contact.company_name or _first(registrations, "company_name"),
        "utm": {key: value for key, value in utm.items() if value},
        "registration_ids": [r.pk for r in registrations],
        "description": description(registrations, answers),
    }
