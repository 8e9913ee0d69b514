"""Name badges: sheets of labels (events.pdf.layouts), one badge per attendee.

Invariants:
- a badge shows the attendee's name large, their company, their ticket's name and the QR code
  of their barcode (the code the desk scans), under the event's name (and its logo on labels
  tall enough for one); nothing else of the registration;
- the name shrinks, then wraps onto a second line, to fit its box (events.pdf.text.fit): never
  over the label's edge, never cut; a name that needed less than the smallest size is logged;
- badges are drawn in the order given, page after page, from an iterable the caller streams.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import BinaryIO

from django.utils.translation import gettext as _
from pypdf import PdfReader, PdfWriter
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas

from events.pdf import draw, fonts, text
from events.pdf.layouts import Layout

logger = logging.getLogger("events.pdf")

GREY = (0.35, 0.35, 0.35)
LOGO_FORM = "badge-logo"
LOGO_MIN_HEIGHT = 50 * mm  # labels lower than this carry no logo
PAGES_PER_PART = 20  # pages drawn per reportlab document before it is saved (see `render`)


@dataclass(frozen=True)
class Badge:
    name: str
    company: str
    ticket: str
    barcode: str


@dataclass(frozen=True)
class _Frame:
    """Where a badge's parts go on a label of a layout (computed once per sheet)."""

    pad: float
    qr: float
    qr_x: float
    qr_y: float
    column: float  # the text column's width
    column_x: float
    event_size: float
    name_height: float
    name_size: float
    company_size: float
    ticket_size: float
    logo_height: float


def _frame(layout: Layout, with_logo: bool) -> _Frame:
    width, height = layout.label
    pad = max(2.5 * mm, min(width, height) * 0.06)
    portrait = height > width
    logo_height = min(14 * mm, height * 0.12) if with_logo and height >= LOGO_MIN_HEIGHT else 0.0
    if portrait:
        qr = min(width * 0.5, height * 0.32)
        return _Frame(
            pad=pad,
            qr=qr,
            qr_x=(width - qr) / 2,
            qr_y=pad,
            column=width - 2 * pad,
            column_x=pad,
            event_size=min(12.0, height * 0.03),
            name_height=height * 0.26,
            name_size=min(40.0, height * 0.1),
            company_size=min(16.0, height * 0.04),
            ticket_size=min(12.0, height * 0.03),
            logo_height=logo_height,
        )
    qr = min(height - 2 * pad, width * 0.36)
    return _Frame(
        pad=pad,
        qr=qr,
        qr_x=width - pad - qr,
        qr_y=(height - qr) / 2,
        column=width - 3 * pad - qr,
        column_x=pad,
        event_size=max(5.5, height * 0.06),
        name_height=height * 0.42,
        name_size=height * 0.2,
        company_size=max(6.5, height * 0.09),
        ticket_size=max(5.5, height * 0.07),
        logo_height=logo_height,
    )


class Sheet:
    """A badge sheet being drawn: `add` each badge, then `finish`."""

    def __init__(
        self,
        out: BinaryIO,
        *,
        layout: Layout,
        event_name: str,
        logo: bytes | None = None,
        title: str = "",
    ) -> None:
        self.layout = layout
        self.chain = fonts.chain()
        self.canvas = Canvas(out, pagesize=layout.page, invariant=1, pageCompression=1)
        self.canvas.setTitle(title or _("Name badges: %(event)s") % {"event": event_name})
        self.canvas.setCreator("backbone-events")
        reader = draw.logo_reader(logo)
        self.frame = _frame(layout, with_logo=reader is not None)
        if reader is not None and self.frame.logo_height:
            # Drawn once into a form the badges then place: the image is in the file once.
            self.canvas.beginForm(LOGO_FORM)
            self.logo_width = draw.logo(
                self.canvas,
                reader,
                x=0,
                top=self.frame.logo_height,
                width=40 * mm,
                height=self.frame.logo_height,
            )
            self.canvas.endForm()
        else:
            self.logo_width = 0.0
        frame = self.frame
        portrait = layout.label[1] > layout.label[0]
        event_width = layout.label[0] - 2 * frame.pad if portrait else frame.column
        if self.logo_width:
            event_width -= self.logo_width + 2 * mm
        self.event_line = text.fit(
            event_name,
            self.chain,
            width=event_width,
            height=frame.event_size * text.LEADING * 2,
            size=frame.event_size,
            min_size=5,
            max_lines=2,
        )
        self.count = 0
        self.shrunk = 0

    def add(self, badge: Badge) -> None:
        layout, frame, canvas = self.layout, self.frame, self.canvas
        slot = self.count % layout.per_page
        if slot == 0 and self.count:
            canvas.showPage()
        x, y = layout.origin(slot)
        width, height = layout.label
        top = y + height - frame.pad
        # Header: logo and event name.
        left = x + frame.column_x
        if self.logo_width:
            canvas.saveState()
            canvas.translate(left, top - frame.logo_height)
            canvas.doForm(LOGO_FORM)
            canvas.restoreState()
        canvas.setFillColorRGB(*GREY)
        event_left = left + (self.logo_width + 2 * mm if self.logo_width else 0)
        header_bottom = text.draw_fitted(canvas, self.event_line, x=event_left, top=top)
        header_bottom = min(header_bottom, top - frame.logo_height)
        canvas.setFillColorRGB(0, 0, 0)
        portrait = height > width
        # The name, large, in the middle of its box.
        name = text.fit(
            badge.name or "—",
            self.chain,
            width=frame.column,
            height=frame.name_height,
            size=frame.name_size,
            min_size=6,
            max_lines=3,
            one_line_down_to=frame.name_size * 0.6,
        )
        if name.shrunk_below:
            self.shrunk += 1
        box_top = header_bottom - 1.5 * mm
        name_top = box_top - max(0.0, (frame.name_height - name.height) / 2)
        if portrait:
            below = text.draw_fitted(canvas, name, x=x + width / 2, top=name_top, align="centre")
        else:
            below = text.draw_fitted(canvas, name, x=left, top=name_top)
        below = min(below, box_top - frame.name_height)
        if badge.company:
            company = text.fit(
                badge.company,
                self.chain,
                width=frame.column,
                height=frame.company_size * text.LEADING,
                size=frame.company_size,
                min_size=5,
            )
            if portrait:
                below = text.draw_fitted(
                    canvas, company, x=x + width / 2, top=below, align="centre"
                )
            else:
                below = text.draw_fitted(canvas, company, x=left, top=below)
        if badge.ticket:
            ticket = text.fit(
                badge.ticket,
                self.chain,
                width=frame.column,
                height=frame.ticket_size * text.LEADING,
                size=frame.ticket_size,
                min_size=5,
            )
            canvas.setFillColorRGB(*GREY)
            if portrait:
                text.draw_fitted(
                    canvas, ticket, x=x + width / 2, top=below - 1 * mm, align="centre"
                )
            else:
                text.draw_fitted(canvas, ticket, x=left, top=y + frame.pad + ticket.height)
            canvas.setFillColorRGB(0, 0, 0)
        draw.qr(canvas, badge.barcode, x=x + frame.qr_x, y=y + frame.qr_y, size=frame.qr)
        self.count += 1

    def finish(self) -> int:
        """Close the document (an empty sheet is one blank page); returns the badges drawn."""
        self.canvas.showPage()
        self.canvas.save()
        if self.shrunk:
            logger.warning(
                "badge sheet: %s names were drawn below the smallest size to fit", self.shrunk
            )
        return self.count


def render(
    badges: Iterable[Badge],
    out: BinaryIO,
    *,
    layout: Layout,
    event_name: str,
    logo: bytes | None = None,
    progress: Callable[[int], None] | None = None,
    every: int = 500,
) -> int:
    """Draw every badge onto `out`; `progress(count)` every `every` badges. Returns the count.

    reportlab holds a document's pages until it is saved, so a long sheet is drawn in parts of
    PAGES_PER_PART pages, each saved (compressed) to a temporary file as soon as it is full,
    then the parts are joined into `out` (pypdf): what is held at once is one part's pages,
    whatever the number of badges."""
    title = _("Name badges: %(event)s") % {"event": event_name}
    per_part = PAGES_PER_PART * layout.per_page
    with ExitStack() as stack:
        parts: list[BinaryIO] = []
        sheet: Sheet | None = None
        count = 0
        for badge in badges:
            if sheet is None:
                parts.append(stack.enter_context(tempfile.TemporaryFile()))
                sheet = Sheet(
                    parts[-1], layout=layout, event_name=event_name, logo=logo, title=title
                )
            sheet.add(badge)
            count += 1
            if progress is not None and count % every == 0:
                progress(count)
            if sheet.count == per_part:
                sheet.finish()
                sheet = None
        if sheet is not None:
            sheet.finish()
        if not parts:  # no badge: one blank page says so
            Sheet(out, layout=layout, event_name=event_name, title=title).finish()
            return 0
        if len(parts) == 1:
            parts[0].seek(0)
            shutil.copyfileobj(parts[0], out)
            return count
        writer = PdfWriter()
        for part in parts:
            part.seek(0)
            writer.append(PdfReader(part))
        writer.add_metadata({"/Title": title, "/Creator": "backbone-events"})
        writer.write(out)
    return count
