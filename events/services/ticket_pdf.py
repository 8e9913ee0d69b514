"""The PDF ticket of a registration, for its download from the tickets page and for the
confirmation mail (drawing: events.pdf.ticket).

Invariants:
- a read: nothing is written to make or serve a ticket;
- a ticket exists for a registration that holds a seat (registered or attended), is active,
  and whose event is not cancelled: the registrations a tickets link shows with a QR code.
  Cancelled ones have none (their code no longer opens a door);
- the confirmation mail is the event's first per-attendee (`after_sub`) mail scheduler, the
  same rule as the staff's "resend confirmation" (`confirmation_schedulers`); it carries the
  ticket when the event says `attach` (`Event.ticket_pdf`), decided when the mail is sent;
- drawn in the registration's language: its own when it has one, else the event's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.conf import settings
from django.db.models import Q
from django.utils import translation
from django.utils.text import slugify

from events import rules
from events.models import (
    EventLogo,
    IntervalType,
    Mail,
    MailOutbox,
    NotificationType,
    Registration,
    RegistrationState,
    TicketPdf,
)

CONTENT_TYPE = "application/pdf"


def has_ticket(registration: Registration) -> bool:
    """Loaded with its event."""
    return (
        registration.active
        and registration.state in (RegistrationState.OPEN, RegistrationState.DONE)
        and not rules.is_cancelled(registration.event)
    )


def language_of(registration: Registration) -> str:
    return getattr(registration, "lang", "") or registration.event.lang or settings.LANGUAGE_CODE


def logo_of(event_id: int) -> bytes | None:
    content = EventLogo.objects.filter(event_id=event_id).values_list("content", flat=True).first()
    return bytes(content) if content is not None else None


def filename(registration: Registration) -> str:
    name = slugify(registration.event.name)[:48].strip("-") or "event"
    return f"ticket-{name}-{registration.pk}.pdf"


def render(*, registration: Registration, logo: bytes | None) -> bytes:
    """The ticket of `registration` (loaded with event, ticket and slot)."""
    with translation.override(language_of(registration)):
        # The drawing (reportlab, HarfBuzz) is imported by the first ticket drawn, not by every
        # process that loads the app (it costs each a tenth of a second).
        from events.pdf import ticket

        return ticket.render(registration=registration, logo=logo)


def confirmation_schedulers(event_ids: Iterable[int]) -> dict[int, int]:
    """{event id: its confirmation mail scheduler's id}, for the events that have one."""
    rows = (
        Mail.objects.filter(
            event_id__in=set(event_ids),
            interval_type=IntervalType.AFTER_SUB,
            notification_type=NotificationType.MAIL,
        )
        .order_by("event_id", "sequence", "pk")
        .distinct("event_id")
        .values_list("event_id", "pk")
    )
    return dict(rows)


def attachments(rows: Sequence[MailOutbox]) -> dict[int, tuple[Registration, bytes | None]]:
    """{outbox row id: (registration, logo)} for the rows of a delivery batch that are
    confirmation mails to carry the ticket. Three queries per batch."""
    wanted = {row.registration_id for row in rows if row.registration_id and row.scheduler_id}
    if not wanted:
        return {}
    registrations = {
        reg.pk: reg
        for reg in Registration.objects.filter(pk__in=wanted, event__ticket_pdf=TicketPdf.ATTACH)
        .filter(Q(state=RegistrationState.OPEN) | Q(state=RegistrationState.DONE), active=True)
        .select_related("event", "ticket", "slot")
    }
    if not registrations:
        return {}
    event_ids = {reg.event_id for reg in registrations.values()}
    confirmations = confirmation_schedulers(event_ids)
    logos = {
        event_id: bytes(content)
        for event_id, content in EventLogo.objects.filter(event_id__in=event_ids).values_list(
            "event_id", "content"
        )
    }
    found = {}
    for row in rows:
        reg = registrations.get(row.registration_id or 0)
        if (
            reg is not None
            and has_ticket(reg)
            and confirmations.get(reg.event_id) == row.scheduler_id
        ):
            found[row.pk] = (reg, logos.get(reg.event_id))
    return found
