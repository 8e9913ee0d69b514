"""Reads of the attendance desk (spec-overlay.md §5); each one a fixed number of queries.

Date and cancellation flags come from `events.selectors` (`is_finished`, `is_cancelled`). §5.1
step 4 also counts an event in the cancelled stage as cancelled, which core's kanban flag does
not: that part is added here, from a stage name the caller already loaded (no query of its own).
Counters come from the one seat module: attended = `used`, expected = `taken`.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from events import selectors as core_selectors
from events.models import Event, KanbanState, Registration, RegistrationAnswer
from events.reference_data import STAGES
from events.services import seats

# The cancelled stage created by core's data migration (spec.md §2.2), named there.
CANCELLED_STAGE = next(name for name, *_ in STAGES if name == "Cancelled")
UPCOMING_LIMIT = 50


def scanned_registration(*, barcode: str) -> Registration | None:
    """The registration whose barcode is exactly `barcode` (the unique index: no case folding,
    no prefix), with its event and the event's stage, ticket and slot: one query."""
    rows = list(
        Registration.objects.select_related("event__stage", "ticket", "slot").filter(
            barcode=barcode
        )[:1]
    )
    return rows[0] if rows else None


def desk_registration(*, registration_id: int) -> Registration | None:
    """One registration for the manual confirmation, joined like `scanned_registration`."""
    rows = list(
        Registration.objects.select_related("event__stage", "ticket", "slot").filter(
            pk=registration_id
        )[:1]
    )
    return rows[0] if rows else None


def is_cancelled(event: Event, *, stage_name: str) -> bool:
    """Kanban `cancel`, or the event sits in the cancelled stage."""
    return core_selectors.is_cancelled(event) or stage_name == CANCELLED_STAGE


def is_not_ongoing(event: Event, *, stage_name: str, now: datetime) -> bool:
    """§5.1 step 4: finished (end ≤ now) or cancelled. Not started yet is fine (early entrance)."""
    return core_selectors.is_finished(event, now=now) or is_cancelled(event, stage_name=stage_name)


def choice_answers(*, registration_id: int) -> list[str]:
    """The registration's choice answers as "Question: Choice", in question order (one query)."""
    rows = (
        RegistrationAnswer.objects.filter(registration_id=registration_id, choice__isnull=False)
        .order_by("question__sequence", "question_id")
        .values_list("question__title", "choice__name")
    )
    return [f"{title}: {choice}" for title, choice in rows]


def counters(*, event: Event) -> dict[str, int]:
    """attended (seats `used`) / expected (seats `taken` = open + done), from the seat ledger."""
    summary = seats.event_summary(event=event)
    return {"attended": summary.used, "expected": summary.taken}


def desk_event(*, event_id: int) -> Event | None:
    return Event.objects.select_related("stage").filter(pk=event_id, active=True).first()


def desk_events(*, now: datetime) -> list[dict]:
    """Ongoing and upcoming events to pick at the desk (not finished, not cancelled), soonest
    first, each with its counters: three queries whatever the number of events."""
    events = list(
        Event.objects.filter(active=True, date_end__gt=now)
        .exclude(Q(kanban_state=KanbanState.CANCEL) | Q(stage__name=CANCELLED_STAGE))
        .select_related("stage")
        .order_by("date_begin", "id")[:UPCOMING_LIMIT]
    )
    totals = seats.summaries(events)
    return [
        {
            "event": event,
            "ongoing": core_selectors.is_ongoing(event, now=now),
            "attended": totals[event.pk].used,
            "expected": totals[event.pk].taken,
        }
        for event in events
    ]
