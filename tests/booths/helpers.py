"""What a refused booth verb must leave untouched: every booth and booking row, and the audit."""

from __future__ import annotations

from booths.models import Booth, BoothBooking
from events.models import EventAuditLog


def booths_snapshot() -> dict:
    """Equal before and after = nothing written (booth rows, booking rows, audit rows)."""
    return {
        "booths": list(Booth.objects.order_by("pk").values()),
        "bookings": list(BoothBooking.objects.order_by("pk").values()),
        "audit": list(EventAuditLog.objects.order_by("pk").values_list("pk", flat=True)),
    }


def confirmed(booth) -> list[BoothBooking]:
    return list(BoothBooking.objects.filter(booth=booth, state="confirmed"))
