"""The calendar file of one registration (spec.md §7.2), built with `icalendar`.

Invariants:
- the UID is stable for a registration and holds no personal data (ids only, never the
  name, email or barcode); SEQUENCE is the event's `ics_sequence` (bumped when times change);
- times are the slot's on a multi-slot event; they carry the event's TZID with a matching
  VTIMEZONE (UTC events use UTC times and no VTIMEZONE);
- a cancelled registration or a cancelled event gives STATUS:CANCELLED, otherwise CONFIRMED;
- the output uses CRLF line ends and folds lines at 75 octets (icalendar's serializer).
"""

from __future__ import annotations

import zoneinfo
from datetime import date, datetime
from functools import lru_cache
from urllib.parse import urlsplit

import icalendar
from django.conf import settings
from django.utils import timezone
from django.utils.text import slugify

from events.models import KanbanState, Registration, RegistrationState
from events.services import links

PRODID = "-//backbone-events//attendee calendar//EN"


def uid_for(registration: Registration) -> str:
    host = urlsplit(settings.EVENT_PUBLIC_URL).hostname or "backbone-events"
    return f"event-{registration.event_id}-registration-{registration.pk}@{host}"


def filename_for(registration: Registration) -> str:
    return f"{slugify(registration.event.name) or 'event'}.ics"


def is_cancelled(registration: Registration) -> bool:
    return (
        registration.state == RegistrationState.CANCEL
        or registration.event.kanban_state == KanbanState.CANCEL
    )


@lru_cache(maxsize=256)
def _vtimezone(tz_name: str, first_year: int, last_year: int) -> bytes:
    """The serialized VTIMEZONE of a zone over the years an event spans. Computing and
    serializing it is most of the cost of a calendar, and it depends on nothing else."""
    return icalendar.Timezone.from_tzinfo(
        zoneinfo.ZoneInfo(tz_name),
        tzid=tz_name,
        first_date=date(first_year, 1, 1),
        last_date=date(last_year, 12, 31),
    ).to_ical()


def calendar(*, registration: Registration, now: datetime | None = None) -> bytes:
    """The .ics body for one registration (the caller checked the capability)."""
    event = registration.event
    now = now or timezone.now()
    slot = registration.slot if event.is_multi_slots else None
    begin = slot.start_datetime if slot is not None else event.date_begin
    end = slot.end_datetime if slot is not None else event.date_end
    tz_name = event.date_tz or "UTC"
    use_utc = tz_name == "UTC"
    zone = zoneinfo.ZoneInfo("UTC" if use_utc else tz_name)

    cal = icalendar.Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("method", "PUBLISH")
    cal.add("calscale", "GREGORIAN")

    tickets_url = links.tickets_url(registration)
    vevent = icalendar.Event()
    vevent.add("uid", uid_for(registration))
    vevent.add("dtstamp", now.astimezone(zoneinfo.ZoneInfo("UTC")))
    vevent.add("dtstart", begin.astimezone(zone))
    vevent.add("dtend", end.astimezone(zone))
    vevent.add("sequence", event.ics_sequence)
    vevent.add("summary", event.name)
    description = "\n\n".join(
        part for part in (event.ticket_instructions.strip(), f"Your tickets: {tickets_url}") if part
    )
    vevent.add("description", description)
    location = ", ".join(part for part in (event.venue, " ".join(event.address.split())) if part)
    if location:
        vevent.add("location", location)
    vevent.add("url", tickets_url)
    vevent.add("status", "CANCELLED" if is_cancelled(registration) else "CONFIRMED")
    cal.add_component(vevent)
    body = cal.to_ical()
    if use_utc:
        return body
    # The VTIMEZONE goes before the VEVENT, as icalendar itself would place it; it comes
    # from the per-zone cache already serialized (CRLF, folded).
    vtimezone = _vtimezone(tz_name, begin.astimezone(zone).year, end.astimezone(zone).year)
    head, vevent_marker, tail = body.partition(b"BEGIN:VEVENT\r\n")
    return head + vtimezone + vevent_marker + tail
