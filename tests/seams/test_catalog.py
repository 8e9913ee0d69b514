"""The catalog read over `event_linked_products` (spec-overlay.md §6)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from events.services import registrations, seats
from tests.events import factories as ev

pytestmark = pytest.mark.django_db
URL = "/api/v1/catalog/linked-products"


def get(client, event_id):
    return client.get(URL, {"event": event_id})


def test_rows_of_a_published_event_with_availability_from_the_seat_module(client, actor):
    event = ev.EventFactory(seats_limited=True, seats_max=10)
    limited = ev.TicketFactory(event=event, seats_max=3, price=Decimal("25.00"), product_ref="PR1")
    unlimited = ev.TicketFactory(event=event, product_ref="PR2")
    registrations.register(event=event, ticket=limited, attendees=[{"name": "A"}], actor=actor)
    registrations.register(
        event=event, ticket=unlimited, attendees=[{"name": "B"}, {"name": "C"}], actor=actor
    )
    response = get(client, event.pk)
    assert response.status_code == 200
    products = response.json()["products"]
    assert [(p["ticket_id"], p["product_ref"], p["price"], p["available"]) for p in products] == [
        (limited.pk, "PR1", "25.00", 2),  # min(ticket 3 − 1, event 10 − 3)
        (unlimited.pk, "PR2", "0.00", 7),  # the event limit applies
    ]
    assert products[0]["event_name"] == event.name


def test_null_when_no_limit_applies(client):
    event = ev.EventFactory(seats_limited=False)
    ticket = ev.TicketFactory(event=event)
    products = get(client, event.pk).json()["products"]
    assert [(p["ticket_id"], p["available"]) for p in products] == [(ticket.pk, None)]


def test_a_published_event_without_tickets_is_an_empty_list(client):
    event = ev.EventFactory()
    response = get(client, event.pk)
    assert response.status_code == 200
    assert response.json() == {"event": event.pk, "products": []}


def test_unpublished_archived_and_unknown_ids_answer_the_same_404(client):
    """A deliberate divergence (docs/spec.md, seams register S4): an id that names no
    published, active event is `not_found`, whether it is unknown or hidden, so the public read
    never tells a hidden event from a missing one."""
    hidden = ev.TicketFactory(event=ev.EventFactory(is_published=False))
    archived = ev.TicketFactory(event=ev.EventFactory(active=False))
    answers = [get(client, pk) for pk in (hidden.event_id, archived.event_id, 10**9)]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert {a.json()["error"]["code"] for a in answers} == {"not_found"}


def test_bad_ids_are_invalid_value(client):
    for bad in ("", "x", "-1", "1.5", "0", "9" * 30):
        response = get(client, bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == "invalid_value"


def test_multi_slot_event_availability_is_the_best_slot(client, actor):
    event = ev.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=2)
    first, second = ev.SlotFactory(event=event), ev.SlotFactory(event=event)
    ticket = ev.TicketFactory(event=event)
    registrations.register(
        event=event,
        ticket=ticket,
        slot=first,
        attendees=[{"name": "A"}, {"name": "B"}],
        actor=actor,
    )
    registrations.register(
        event=event, ticket=ticket, slot=second, attendees=[{"name": "C"}], actor=actor
    )
    assert get(client, event.pk).json()["products"][0]["available"] == 1


def test_query_count_is_constant_in_the_number_of_tickets(client):
    def queries(n: int) -> int:
        event = ev.EventFactory(seats_limited=True, seats_max=100)
        for _ in range(n):
            ev.TicketFactory(event=event, seats_max=5)
        with CaptureQueriesContext(connection) as captured:
            assert len(get(client, event.pk).json()["products"]) == n
        return len(captured)

    assert queries(1) == queries(12)


def test_availability_is_the_seat_modules_for_every_ticket(client, actor):
    """Whatever the limits (event, ticket, slot), each row carries exactly what
    `seats.availability(event=, ticket=)` answers."""
    limited = ev.EventFactory(seats_limited=True, seats_max=6)
    free = ev.EventFactory(seats_limited=False)
    multi = ev.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=3)
    slot_a, slot_b = ev.SlotFactory(event=multi), ev.SlotFactory(event=multi)
    plan = [
        (limited, [2, 0, 5], None),
        (free, [4, 0], None),
        (multi, [2, 0], slot_a),
    ]
    for event, limits, slot in plan:
        tickets = [ev.TicketFactory(event=event, seats_max=n) for n in limits]
        for ticket in tickets:
            registrations.register(
                event=event, ticket=ticket, slot=slot, attendees=[{"name": "A"}], actor=actor
            )
    registrations.register(
        event=multi,
        ticket=multi.tickets.first(),
        slot=slot_b,
        attendees=[{"name": "B"}],
        actor=actor,
    )
    for event, _, _ in plan:
        products = get(client, event.pk).json()["products"]
        expected = {
            t.pk: seats.availability(event=event, ticket=t) for t in event.tickets.order_by("pk")
        }
        assert {p["ticket_id"]: p["available"] for p in products} == expected, event.name
    # the control: a limited ticket of an unlimited event counts, an unlimited one is null
    assert {p["available"] for p in get(client, free.pk).json()["products"]} == {3, None}
