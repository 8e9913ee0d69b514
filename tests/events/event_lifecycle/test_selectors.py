"""The derived flags of spec.md §2.1 / §2.5 as named selectors, one decision each that every
reader shares."""

from __future__ import annotations

from datetime import timedelta

import pytest

from events import rules
from events.models import Event, KanbanState, Stage
from events.read import selectors
from events.services import registrations
from tests.events import factories


@pytest.fixture
def event(db, now):
    return factories.EventFactory(
        date_begin=now + timedelta(days=1), date_end=now + timedelta(days=2)
    )


def test_ticket_sale_window_flags(db, now):
    hour = timedelta(hours=1)
    cases = [
        # (start, end) → (is_launched, is_expired, sale_available)
        ((None, None), (True, False, True)),
        ((now + hour, None), (False, False, False)),
        ((now, None), (True, False, True)),  # starts now: launched
        ((None, now - hour), (True, True, False)),
        ((None, now), (True, False, True)),  # ends now: not yet expired
        ((now - 2 * hour, now + hour), (True, False, True)),
    ]
    for (start, end), expected in cases:
        ticket = factories.TicketFactory(start_sale_datetime=start, end_sale_datetime=end)
        got = (
            rules.is_launched(ticket, now=now),
            rules.is_expired(ticket, now=now),
            rules.sale_available(ticket, now=now),
        )
        assert got == expected, (start, end)


def test_closed_reason_in_its_order(event, now):
    assert rules.closed_reason(event, now=now) is None
    assert rules.closed_reason(event, now=event.date_end) == "ended"
    event.stage = Stage.objects.get(name="Ended")
    assert rules.closed_reason(event, now=now) == "over"
    event.kanban_state = KanbanState.CANCEL
    assert rules.closed_reason(event, now=now) == "cancelled"
    assert rules.is_cancelled(event)


def test_sold_out_counts_every_limit_through_the_seat_module(event, actor):
    ticket = factories.TicketFactory(event=event, seats_max=1)
    assert not selectors.sold_out(event)  # limited by its ticket only: one seat left
    registrations.register(
        event=event, attendees=[{"name": "A"}], ticket=ticket, state="open", actor=actor
    )
    assert selectors.sold_out(event)
    assert not selectors.sold_out(factories.EventFactory())  # no limit at all


def test_registrations_open_needs_every_condition(event, now, actor):
    assert selectors.registrations_open(event, now=now)
    assert not selectors.registrations_open(event, now=event.date_end)

    ticket = factories.TicketFactory(event=event, start_sale_datetime=now + timedelta(hours=1))
    event = Event.objects.get(pk=event.pk)
    assert not selectors.registrations_open(event, now=now)  # no ticket launched yet
    assert selectors.registrations_open(event, now=now + timedelta(hours=2))

    Event.objects.filter(pk=event.pk).update(seats_limited=True, seats_max=1)
    event = Event.objects.get(pk=event.pk)
    registrations.register(
        event=event, attendees=[{"name": "A"}], ticket=ticket, state="draft", actor=actor
    )
    assert selectors.registrations_open(event, now=now + timedelta(hours=2))  # a draft holds none
    registrations.confirm(registration=event.registrations.get(), actor=actor)
    assert not selectors.registrations_open(event, now=now + timedelta(hours=2))  # sold out
