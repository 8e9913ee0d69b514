"""The PDF ticket of one registration: one A4 page to print or keep on a phone.

Invariants:
- drawn from the registration the caller loaded with its event, ticket and slot (no query
  here) and the event's logo bytes, if any;
- it holds what the tickets page shows of that registration and nothing more: the event, its
  dates and place in the event's time zone, the attendee's name and company, ticket and slot,
  the barcode's QR code and digits, the organiser and the instructions. No link and no token
  (a PDF is forwarded and printed; a link in it would open more than the paper shows);
- attendee-facing words are translated (gettext) in the language active when it is drawn: the
  caller activates the registration's (events.read.tickets.language_of);
- the file is the same bytes for the same inputs (reportlab's invariant mode: no creation
  date nor random document id).
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from io import BytesIO

from django.utils import dateformat
from django.utils.translation import gettext as _
from reportlab.lib.pagesizes import A4
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas

from events.i18n import localized
from events.models import Registration
from events.pdf import draw, fonts, text

MARGIN = 18 * mm
QR_SIZE = 58 * mm
GREY = (0.35, 0.35, 0.35)
RULE = (0.75, 0.75, 0.75)


def when(begin: datetime, end: datetime, tz_name: str) -> str:
    """'Saturday 14 March 2026, 09:00 – 17:00 (Europe/Brussels)' in the zone, translated."""
    zone = zoneinfo.ZoneInfo(tz_name)
    start, finish = begin.astimezone(zone), end.astimezone(zone)
    first = dateformat.format(start, "l j F Y, H:i")
    last = (
        dateformat.format(finish, "H:i")
        if start.date() == finish.date()
        else dateformat.format(finish, "l j F Y, H:i")
    )
    return f"{first} – {last} ({tz_name})"


class _Page:
    """A cursor down one page: each block is drawn under the previous one."""

    def __init__(self, canvas: Canvas, chain: fonts.Chain) -> None:
        self.canvas = canvas
        self.chain = chain
        self.width = A4[0] - 2 * MARGIN
        self.y = A4[1] - MARGIN

    def label(self, words: str, *, x: float = MARGIN, width: float | None = None) -> None:
        self.text(words, x=x, width=width, size=8.5, colour=GREY)

    def text(
        self,
        words: str,
        *,
        x: float = MARGIN,
        width: float | None = None,
        size: float = 11,
        min_size: float = 7,
        lines: int = 1,
        colour: tuple[float, float, float] = (0, 0, 0),
        gap: float = 1.5 * mm,
    ) -> text.Fitted:
        box_width = width or self.width
        fitted = text.fit(
            words,
            self.chain,
            width=box_width,
            height=lines * size * text.LEADING,
            size=size,
            min_size=min_size,
            max_lines=lines,
            one_line_down_to=size * 0.6,
        )
        self.canvas.setFillColorRGB(*colour)
        self.y = text.draw_fitted(self.canvas, fitted, x=x, top=self.y) - gap
        self.canvas.setFillColorRGB(0, 0, 0)
        return fitted

    def rule(self) -> None:
        self.y -= 2 * mm
        self.canvas.setStrokeColorRGB(*RULE)
        self.canvas.setLineWidth(0.6)
        self.canvas.line(MARGIN, self.y, MARGIN + self.width, self.y)
        self.y -= 5 * mm


def render(*, registration: Registration, logo: bytes | None = None) -> bytes:
    """The ticket of `registration` (loaded with event, ticket and slot) as PDF bytes."""
    event = registration.event
    # The texts staff entered in the active language (the registration's), else the columns.
    name, venue = localized(event, "name"), localized(event, "venue")
    instructions = localized(event, "ticket_instructions")
    slot = registration.slot if event.is_multi_slots else None
    chain = fonts.chain()
    out = BytesIO()
    canvas = Canvas(out, pagesize=A4, invariant=1, pageCompression=1)
    canvas.setTitle(_("Ticket: %(event)s") % {"event": name})
    canvas.setAuthor(event.organizer or name)
    canvas.setCreator("backbone-events")
    page = _Page(canvas, chain)

    # Header: the organiser's logo, the organiser's name on the right.
    reader = draw.logo_reader(logo)
    if reader is not None:
        draw.logo(canvas, reader, x=MARGIN, top=page.y, width=60 * mm, height=22 * mm)
    if event.organizer:
        organiser = text.fit(
            _("Organised by %(organiser)s") % {"organiser": event.organizer},
            chain,
            width=page.width * 0.5,
            height=20,
            size=9,
            min_size=6,
        )
        canvas.setFillColorRGB(*GREY)
        text.draw_fitted(canvas, organiser, x=MARGIN + page.width, top=page.y, align="right")
        canvas.setFillColorRGB(0, 0, 0)
    if reader is not None:
        page.y -= 26 * mm
    else:
        page.y -= 8 * mm

    page.text(name, size=22, min_size=12, lines=2, gap=3 * mm)
    begin = slot.start_datetime if slot else event.date_begin
    end = slot.end_datetime if slot else event.date_end
    page.label(_("When"))
    page.text(when(begin, end, event.date_tz))
    place = ", ".join(part for part in (venue, " ".join(event.address.split())) if part)
    if place:
        page.label(_("Where"))
        page.text(place, lines=2)
    page.rule()

    # The ticket proper: who, which ticket, and the code the desk scans.
    column = page.width - QR_SIZE - 8 * mm
    top = page.y
    draw.qr(
        canvas, registration.barcode, x=MARGIN + page.width - QR_SIZE, y=top - QR_SIZE, size=QR_SIZE
    )
    digits = text.fit(registration.barcode, chain, width=QR_SIZE, height=14, size=11, min_size=6)
    text.draw_fitted(
        canvas, digits, x=MARGIN + page.width - QR_SIZE / 2, top=top - QR_SIZE, align="centre"
    )
    page.label(_("Attendee"), width=column)
    page.text(registration.name or "—", width=column, size=26, min_size=12, lines=2, gap=2 * mm)
    if registration.company_name:
        page.text(registration.company_name, width=column, size=13, min_size=8)
    if registration.ticket is not None:
        page.label(_("Ticket"), width=column)
        page.text(
            localized(registration.ticket, "name"), width=column, size=13, min_size=8, lines=2
        )
    if slot is not None:
        page.label(_("Time slot"), width=column)
        page.text(when(slot.start_datetime, slot.end_datetime, event.date_tz), width=column)
    page.label(_("Ticket number"), width=column)
    page.text(registration.barcode, width=column)
    page.y = min(page.y, top - QR_SIZE - 7 * mm)
    page.rule()

    if instructions.strip():
        page.label(_("Instructions"))
        room = page.y - MARGIN - 14 * mm
        fitted = text.fit(
            instructions,
            chain,
            width=page.width,
            height=room,
            size=10.5,
            min_size=7,
            max_lines=max(1, int(room // (10.5 * text.LEADING))),
        )
        text.draw_fitted(canvas, fitted, x=MARGIN, top=page.y)

    footer = text.fit(
        _("Show this ticket at the entrance, printed or on your phone."),
        chain,
        width=page.width,
        height=14,
        size=9,
        min_size=6,
    )
    canvas.setFillColorRGB(*GREY)
    text.draw_fitted(canvas, footer, x=MARGIN, top=MARGIN + 10)
    canvas.showPage()
    canvas.save()
    return out.getvalue()
