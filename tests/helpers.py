"""Assertions shared by the tests: what a refusal must leave untouched."""

from __future__ import annotations

from events.models import (
    EventAuditLog,
    MailRegistration,
    Registration,
    RegistrationAnswer,
    SeatLedger,
)


def snapshot(event) -> dict:
    """Everything a verb on `event` could write: its registrations (state, contact, dates),
    answers, audit rows, seat ledger and scheduler rows. Equal before and after = nothing
    written."""
    return {
        "registrations": list(
            Registration.objects.filter(event=event)
            .order_by("pk")
            .values_list(
                "pk",
                "state",
                "active",
                "name",
                "email",
                "phone",
                "confirmed_at",
                "date_closed",
                "updated_at",
            )
        ),
        "answers": RegistrationAnswer.objects.count(),
        "audit": list(EventAuditLog.objects.order_by("pk").values_list("pk", flat=True)),
        "ledger": sorted(
            SeatLedger.objects.filter(event=event).values_list(
                "slot_id", "ticket_id", "reserved", "used"
            ),
            key=str,
        ),
        "mail_rows": MailRegistration.objects.count(),
    }
