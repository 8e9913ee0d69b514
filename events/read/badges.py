"""Name badge sheets of an event: which registrations (filters like the registrations list),
read in chunks and drawn page after page (events.pdf.badges).

Invariants:
- a sheet holds the event's active registrations in the chosen states (registered and/or
  attended; never drafts, cancelled or archived ones), optionally of one ticket and one slot,
  ordered by name (then id), so staff find a badge where the alphabet puts it;
- registrations are read in chunks of CHUNK by keyset (name, id): memory does not grow with
  the sheet, and neither does the document held while drawing (events.pdf.badges.render);
- a sheet of more than BACKGROUND_BADGES badges is built by the worker through the attendee
  export machinery (events.read.exports: an `AttendeeExport` of format `pdf` whose `options`
  are these filters), with its progress page; a smaller one is drawn during the request.
A sheet prints names, companies and admission codes of many attendees: it needs the export
permission (events.read.exports.PERMISSION), like every attendee list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.text import slugify

from events.errors import Code, ValidationFailed
from events.models import Event, Registration, RegistrationState
from events.pdf.layouts import DEFAULT_LAYOUT, LAYOUTS
from events.services import ticket_pdf

if TYPE_CHECKING:
    from events.pdf import badges as drawing

# The drawing (`events.pdf.badges`: reportlab, pypdf) is imported by the sheet being drawn, not
# by every process that loads the app (the admin imports this module): it costs each a third
# of a second.

CHUNK = 1000
BACKGROUND_BADGES = 300
STATES = {
    "open_done": (RegistrationState.OPEN, RegistrationState.DONE),
    "open": (RegistrationState.OPEN,),
    "done": (RegistrationState.DONE,),
}
STATE_TITLES = {
    "open_done": "Registered and attended",
    "open": "Registered (not yet attended)",
    "done": "Attended",
}


@dataclass(frozen=True)
class Options:
    layout: str = DEFAULT_LAYOUT
    states: str = "open_done"
    ticket_id: int | None = None
    slot_id: int | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Options:
        return cls(
            **{
                key: data[key]
                for key in ("layout", "states", "ticket_id", "slot_id")
                if key in data
            }
        )


def options(
    *, event: Event, layout: str, states: str, ticket_id: int | None, slot_id: int | None
) -> Options:
    """Checked options for `event` (`invalid_value` naming the field otherwise)."""
    if layout not in LAYOUTS:
        raise ValidationFailed("Unknown label layout.", code=Code.INVALID_VALUE, field="layout")
    if states not in STATES:
        raise ValidationFailed("Unknown state filter.", code=Code.INVALID_VALUE, field="states")
    if ticket_id is not None and not event.tickets.filter(pk=ticket_id).exists():
        raise ValidationFailed(
            "No such ticket on this event.", code=Code.INVALID_VALUE, field="ticket"
        )
    if slot_id is not None and not event.slots.filter(pk=slot_id).exists():
        raise ValidationFailed("No such slot on this event.", code=Code.INVALID_VALUE, field="slot")
    return Options(layout=layout, states=states, ticket_id=ticket_id, slot_id=slot_id)


def registrations(event_id: int, chosen: Options) -> QuerySet[Registration]:
    query = Registration.objects.filter(
        event_id=event_id, active=True, state__in=STATES[chosen.states]
    )
    if chosen.ticket_id is not None:
        query = query.filter(ticket_id=chosen.ticket_id)
    if chosen.slot_id is not None:
        query = query.filter(slot_id=chosen.slot_id)
    return query


def count(event_id: int, chosen: Options) -> int:
    return registrations(event_id, chosen).count()


def rows(event_id: int, chosen: Options) -> Iterator[drawing.Badge]:
    """The badges in name order, read CHUNK at a time (keyset on name, id)."""
    from events.pdf import badges as drawing

    base = registrations(event_id, chosen).order_by("name", "pk")
    fields = ("pk", "name", "company_name", "barcode", "ticket__name")
    after: tuple[str, int] | None = None
    while True:
        query = base
        if after is not None:
            query = query.filter(Q(name__gt=after[0]) | Q(name=after[0], pk__gt=after[1]))
        chunk = list(query.values_list(*fields)[:CHUNK])
        if not chunk:
            return
        for _pk, name, company, barcode, ticket in chunk:
            yield drawing.Badge(name=name, company=company, ticket=ticket or "", barcode=barcode)
        after = (chunk[-1][1], chunk[-1][0])


def filename(event: Event, chosen: Options) -> str:
    stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
    name = slugify(event.name)[:40].strip("-") or f"event-{event.pk}"
    return f"badges-{name}-{chosen.layout}-{stamp}.pdf"


def write(
    event: Event,
    chosen: Options,
    out: BinaryIO,
    *,
    progress: Callable[[int], None] | None = None,
    every: int = CHUNK,
) -> int:
    """Draw the sheet of `event` onto `out`; returns the number of badges."""
    from events.pdf import badges as drawing

    return drawing.render(
        rows(event.pk, chosen),
        out,
        layout=LAYOUTS[chosen.layout],
        event_name=event.name,
        logo=ticket_pdf.logo_of(event.pk),
        progress=progress,
        every=every,
    )
