"""The booths catalog read (`GET /api/v1/catalog/booths?event=<id>`): what a host needs to put
booth lines on its orders — ids, names, categories with price, currency and product ref, and
availability — guarded like the linked products."""

from __future__ import annotations

from decimal import Decimal

import pytest

from booths.services import block_booth, request_booking
from events import hooks
from events.services.audit import Actor
from tests.booths import factories as booth_factories
from tests.events import factories as ev
from tests.seams.host import order_message, ticket_line

pytestmark = pytest.mark.django_db
URL = "/api/v1/catalog/booths"
STAFF = Actor("user", label="staff")


def get(client, event_id):
    return client.get(URL, {"event": event_id})


def booth_line(ref: str, *booths) -> dict:
    return {"ref": ref, "kind": "booth", "booth_ids": [b.pk for b in booths], "price_total": "500"}


def test_each_booth_with_its_category_and_availability(client, host):
    event = ev.EventFactory(currency="CHF")
    premium = booth_factories.BoothCategoryFactory(
        name="Premium", price=Decimal("900.00"), product_ref="BOOTH-P"
    )
    sold, blocked, quoted, free = (
        booth_factories.BoothFactory(event=event, booth_category=premium, name=f"Stand {i}")
        for i in range(1, 5)
    )
    ticket = ev.TicketFactory(event=event)
    assert host.post(order_message(lines=[booth_line("SO042/1", sold)])).status_code == 200
    block_booth(booth=blocked, actor=STAFF)
    request_booking(
        booth=quoted, order_ref="SO-Q", order_line_ref="", partner_ref="", contact={}, actor=STAFF
    )
    booth_factories.BoothFactory()  # another event's

    response = get(client, event.pk)

    assert response.status_code == 200
    category = {
        "id": premium.pk,
        "name": "Premium",
        "price": "900.00",
        "currency": "CHF",
        "product_ref": "BOOTH-P",
    }
    assert response.json() == {
        "event": event.pk,
        "booths": [
            {
                "booth_id": b.pk,
                "name": b.name,
                "state": state,
                "available": available,
                "category": category,
            }
            for b, state, available in (
                (sold, "unavailable", False),
                (blocked, "unavailable", False),
                (quoted, "available", True),  # a quotation does not hold the booth
                (free, "available", True),
            )
        ],
    }
    # what the read offers, the seam sells
    order = order_message(
        ref="SO-NEXT", lines=[ticket_line(ticket, 1, ref="N/1"), booth_line("N/2", free)]
    )
    assert host.post(order).json()["booths"]["confirmed"] == [free.pk]
    assert [b["available"] for b in get(client, event.pk).json()["booths"]] == [
        False,
        False,
        True,
        False,
    ]


def test_the_query_count_is_fixed_whatever_the_number_of_booths(
    client, django_assert_max_num_queries
):
    def read(n: int) -> None:
        event = ev.EventFactory()
        categories = booth_factories.BoothCategoryFactory.create_batch(3)
        for i in range(n):
            booth_factories.BoothFactory(event=event, booth_category=categories[i % 3])
        with django_assert_max_num_queries(2):  # the event, the booths with their category
            assert len(get(client, event.pk).json()["booths"]) == n

    read(1)
    read(15)


def test_an_event_without_booths_is_an_empty_list(client):
    event = ev.EventFactory()
    response = get(client, event.pk)
    assert (response.status_code, response.json()) == (200, {"event": event.pk, "booths": []})


def test_hidden_unknown_and_bad_ids_are_refused_like_the_linked_products(client):
    hidden = booth_factories.BoothFactory(event=ev.EventFactory(is_published=False))
    archived = booth_factories.BoothFactory(event=ev.EventFactory(active=False))
    for event_id in (hidden.event_id, archived.event_id, 10**9):
        response = get(client, event_id)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    for bad in ("", "x", "-1", "1.5", "0"):
        response = get(client, bad)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_value"
    assert client.post(f"{URL}?event={hidden.event_id}").status_code == 405


def test_without_the_booths_overlay_the_read_is_not_found(client, monkeypatch):
    monkeypatch.setattr(hooks, "catalogs", {})
    event = ev.EventFactory()
    booth_factories.BoothFactory(event=event)
    response = get(client, event.pk)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
