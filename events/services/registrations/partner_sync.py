"""The partner's contact details copied onto the registrations that took them from the partner."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events import inputs
from events.errors import (
    ValidationFailed,
)
from events.models import (
    ContactSource,
    Registration,
)
from events.services import audit
from events.services.contacts import normalise_phone
from events.services.registrations.rules import S


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
