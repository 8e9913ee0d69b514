"""Booth lines of host orders through the signed webhook (a booth confirmed for one order at
most, released when the order is cancelled; the
booths overlay's handler registered at `events.hooks.sale_order_lines["booth"]`)."""

from __future__ import annotations

import pytest

from booths.models import BookingState, BoothBooking
from events.models import Registration
from events.services.audit import Actor
from seams.models import InboxStatus, SeamInbox
from seams.services import replay
from tests.booths import factories as booth_factories
from tests.booths.helpers import booths_snapshot
from tests.events import factories as ev
from tests.seams.host import order_message, ticket_line

pytestmark = pytest.mark.django_db
STAFF = Actor("user", label="staff")


def booth_line(ref: str, *booths) -> dict:
    return {"ref": ref, "kind": "booth", "booth_ids": [b.pk for b in booths], "price_total": "500"}


def confirmed(booth) -> list[str]:
    return list(
        BoothBooking.objects.filter(booth=booth, state=BookingState.CONFIRMED).values_list(
            "order_ref", flat=True
        )
    )


def test_an_order_with_a_taken_booth_books_nothing_mints_nothing_and_parks(host, ticket):
    free, taken = booth_factories.BoothFactory.create_batch(2, event=ticket.event)
    rival = order_message(ref="SO-RIVAL", lines=[booth_line("SO-RIVAL/1", taken)])
    assert host.post(rival).json()["status"] == "applied"
    assert confirmed(taken) == ["SO-RIVAL"]

    ours = order_message(
        ref="SO-OURS", lines=[ticket_line(ticket, 2), booth_line("SO-OURS/2", free, taken)]
    )
    response = host.post(ours, msg_id="msg_ours")
    assert response.status_code == 409
    assert response.json()["status"] == "parked"
    assert response.json()["error"]["code"] == "booth_unavailable"
    assert confirmed(free) == [] and confirmed(taken) == ["SO-RIVAL"]
    assert not Registration.objects.filter(sale_order_ref="SO-OURS").exists()
    parked = SeamInbox.objects.get(message_id="msg_ours")
    assert (parked.status, parked.error_code) == (InboxStatus.PARKED, "booth_unavailable")

    # The rival cancels: its booth is released, and the replay applies our order once.
    cancel = order_message("order.cancelled", ref="SO-RIVAL", version=2, lines=[])
    assert host.post(cancel).json()["status"] == "applied"
    assert confirmed(taken) == []
    assert replay(inbox_id=parked.pk, actor=STAFF).status == "applied"
    assert confirmed(free) == ["SO-OURS"] and confirmed(taken) == ["SO-OURS"]
    assert Registration.objects.filter(sale_order_ref="SO-OURS").count() == 2
    second = replay(inbox_id=parked.pk, actor=STAFF)
    assert second.payload == {"status": "applied", "replayed": False}  # nothing done again
    assert Registration.objects.filter(sale_order_ref="SO-OURS").count() == 2


def test_cancelling_the_order_releases_its_booth_for_another_order(host, ticket):
    booth = booth_factories.BoothFactory(event=ticket.event)
    first = order_message(ref="SO-A", lines=[booth_line("SO-A/1", booth)])
    assert host.post(first).json()["status"] == "applied"
    second = order_message(ref="SO-B", lines=[booth_line("SO-B/1", booth)])
    assert host.post(second).json()["error"]["code"] == "booth_unavailable"

    assert host.post(order_message("order.cancelled", ref="SO-A", version=2)).status_code == 200
    assert confirmed(booth) == []
    again = order_message(ref="SO-B", version=2, lines=[booth_line("SO-B/1", booth)])
    assert host.post(again).json()["status"] == "applied"
    assert confirmed(booth) == ["SO-B"]


def test_order_paid_marks_the_orders_booths_paid(host, ticket):
    booth = booth_factories.BoothFactory(event=ticket.event)
    line = booth_line("SO-P/1", booth)
    assert host.post(order_message(ref="SO-P", lines=[line])).json()["status"] == "applied"
    paid = order_message("order.paid", ref="SO-P", version=2, lines=[line])
    assert host.post(paid).json()["status"] == "applied"
    booth.refresh_from_db()
    assert (booth.order_ref, booth.is_paid) == ("SO-P", True)


def test_sold_out_tickets_book_no_booth_and_the_replay_books_both_once(host):
    """All or nothing the other way round: the tickets are refused, so the order's free booth
    is not booked either; after staff raise the limit, the replay books tickets and booth."""
    ticket = ev.TicketFactory(seats_max=1)
    booth = booth_factories.BoothFactory(event=ticket.event)
    before = booths_snapshot()
    ours = order_message(
        ref="SO-OURS", lines=[ticket_line(ticket, 2), booth_line("SO-OURS/2", booth)]
    )
    response = host.post(ours, msg_id="msg_ours")
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "sold_out"
    assert booths_snapshot()["booths"] == before["booths"]
    assert booths_snapshot()["bookings"] == before["bookings"] == []
    assert not Registration.objects.filter(sale_order_ref="SO-OURS").exists()

    ticket.seats_max = 2
    ticket.save(update_fields=["seats_max"])
    parked = SeamInbox.objects.get(message_id="msg_ours")
    assert replay(inbox_id=parked.pk, actor=STAFF).status == "applied"
    assert replay(inbox_id=parked.pk, actor=STAFF).payload["replayed"] is False
    assert confirmed(booth) == ["SO-OURS"]
    assert BoothBooking.objects.filter(booth=booth).count() == 1
    assert Registration.objects.filter(sale_order_ref="SO-OURS").count() == 2
