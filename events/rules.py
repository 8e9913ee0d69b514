"""The derived flags of events, tickets and registrations (computed, never stored): pure rules on
rows already loaded, shared by the verbs, the read models, the pages and the overlays."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q
from django.utils.translation import gettext as _

from events.models import Event, KanbanState, Registration, SaleStatus, Ticket

# The one definition of each flag: pages, the intake, the desk, the catalog and the seam call
# these instead of comparing dates themselves. Every "now" is a parameter.


def is_ongoing(event: Event, *, now: datetime) -> bool:
    """begin ≤ now < end."""
    return event.date_begin <= now < event.date_end


def is_finished(event: Event, *, now: datetime) -> bool:
    """end ≤ now."""
    return event.date_end <= now


def is_cancelled(event: Event) -> bool:
    """kanban_state = cancel (sticky: spec.md §2.1). The event's own flag only: whether it is
    closed, a cancelled stage included, is `closed_reason`'s."""
    return event.kanban_state == KanbanState.CANCEL


def in_closed_stage(event: Event) -> bool:
    """The event's stage is a `pipe_end` stage. `event.stage_pipe_end`, when the caller
    loaded it with the event (the intake's one statement), spares reading the stage."""
    pipe_end = getattr(event, "stage_pipe_end", None)
    if pipe_end is None:
        pipe_end = event.stage.pipe_end
    return bool(pipe_end)


def in_cancelled_stage(event: Event) -> bool:
    """The event's stage is flagged `is_cancelled` (never by its name: names are edited).

    A cancelled stage is an ending one (check `stage_cancelled_is_pipe_end`), so an event
    outside a `pipe_end` stage answers False without reading the stage;
    `event.stage_is_cancelled`, when the caller loaded it with the event, spares the read."""
    if not in_closed_stage(event):
        return False
    cancelled = getattr(event, "stage_is_cancelled", None)
    if cancelled is None:
        cancelled = event.stage.is_cancelled
    return bool(cancelled)


def closed_reason(event: Event, *, now: datetime) -> str | None:
    """Why the event is closed — to registrations and to admissions at the desk alike —
    whatever the ticket and the seats: `cancelled` (kanban cancel, or a cancelled stage),
    `over` (another `pipe_end` stage), `ended` (is_finished), or None.

    The one decision of "closed": the intake, the waiting list, the event page, the desk
    (spec-overlay §5.1 step 4) and `closed_events` (its queryset form) all answer by it."""
    if is_cancelled(event) or in_cancelled_stage(event):
        return "cancelled"
    if in_closed_stage(event):
        return "over"
    if is_finished(event, now=now):
        return "ended"
    return None


def closed_message(reason: str) -> str:
    """Why registrations are closed (`closed_reason`), in words."""
    if reason == "cancelled":
        return _("Registrations are closed: this event is cancelled.")
    if reason in ("over", "ended"):
        return _("Registrations are closed: this event is over.")
    return _("Registrations are closed.")


def is_closed(event: Event, *, now: datetime) -> bool:
    return closed_reason(event, now=now) is not None


def closed_events(*, now: datetime) -> Q:
    """`closed_reason` as a filter on events: a list of the open ones is `.exclude(...)`. A
    cancelled stage is a `pipe_end` one (the stage's check), so `pipe_end` covers it."""
    return Q(kanban_state=KanbanState.CANCEL) | Q(stage__pipe_end=True) | Q(date_end__lte=now)


def has_to_pay(registration: Registration) -> bool:
    """The attendee still owes the ticket: sold through an order (`sold`) or marked `to_pay`,
    and not paid (`is_paid`, set by the host's payment). A free ticket never has to pay."""
    return registration.sale_status != SaleStatus.FREE and not registration.is_paid


def is_launched(ticket: Ticket, *, now: datetime) -> bool:
    """Sales have started: no start of sale, or start ≤ now."""
    return ticket.start_sale_datetime is None or ticket.start_sale_datetime <= now


def is_expired(ticket: Ticket, *, now: datetime) -> bool:
    """Sales have ended: an end of sale < now."""
    return ticket.end_sale_datetime is not None and ticket.end_sale_datetime < now


def sale_available(ticket: Ticket, *, now: datetime) -> bool:
    """Inside its sale window (launched and not expired). Seats are `sold_out`'s concern and
    price is the intake's (a priced ticket is on sale, through the host's shop)."""
    return is_launched(ticket, now=now) and not is_expired(ticket, now=now)


def sales_started(event: Event, *, now: datetime) -> bool:
    """The event has no tickets, or at least one ticket is sale_available."""
    tickets = list(event.tickets.all())
    return not tickets or any(sale_available(t, now=now) for t in tickets)


def sale_state(*, ticket: Ticket, now: datetime) -> str:
    """`not_started`, `ended`, `priced` (sold by the host) or `open`, in the intake's order."""
    if not is_launched(ticket, now=now):
        return "not_started"
    if is_expired(ticket, now=now):
        return "ended"
    if ticket.price > 0:
        return "priced"
    return "open"
