"""The booking lifecycle of spec-overlay.md §2.3, one booking at a time."""

from __future__ import annotations

import pytest

from booths.models import BookingState, Booth, BoothBooking
from booths.services import (
    block_booth,
    cancel_booking,
    confirm_booking,
    release_booking,
    release_booth,
    request_booking,
)
from events.errors import DomainError
from events.models import EventAuditLog
from tests.booths import factories
from tests.booths.helpers import booths_snapshot, confirmed

pytestmark = pytest.mark.django_db


def request(booth, order_ref, actor, **contact):
    return request_booking(
        booth=booth,
        order_ref=order_ref,
        order_line_ref=f"{order_ref}/1",
        partner_ref=f"P-{order_ref}",
        contact={"name": f"Renter {order_ref}", "email": f"{order_ref}@x.example", **contact},
        actor=actor,
    )


def test_confirming_one_of_three_pending_bookings_cancels_the_other_two(actor):
    booth = factories.BoothFactory()
    first, second, third = (request(booth, ref, actor) for ref in ("SO1", "SO2", "SO3"))

    cancelled_refs = confirm_booking(booking=second, actor=actor)

    assert cancelled_refs == ["SO1", "SO3"]
    states = dict(BoothBooking.objects.filter(booth=booth).values_list("order_ref", "state"))
    assert states == {"SO1": "cancelled", "SO2": "confirmed", "SO3": "cancelled"}
    assert all(b.decided_at is not None for b in BoothBooking.objects.filter(booth=booth))
    booth.refresh_from_db()
    assert (
        booth.state,
        booth.order_ref,
        booth.order_line_ref,
        booth.partner_ref,
        booth.contact_name,
        booth.contact_email,
    ) == ("unavailable", "SO2", "SO2/1", "P-SO2", "Renter SO2", "SO2@x.example")
    entry = EventAuditLog.objects.get(verb="booth.booked")
    assert entry.event_id == booth.event_id
    assert entry.data["cancelled_order_refs"] == ["SO1", "SO3"]
    assert entry.data["cancelled_bookings"] == [first.pk, third.pk]


def test_a_second_confirmation_on_a_booked_booth_is_booth_unavailable(actor):
    booth = factories.BoothFactory()
    first = request(booth, "SO1", actor)
    confirm_booking(booking=first, actor=actor)
    # A stale pending row written around the service (a replayed import, say).
    late = factories.BoothBookingFactory(booth=booth, order_ref="SO2", state="pending")
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        confirm_booking(booking=late, actor=actor)
    assert info.value.code == "booth_unavailable"
    assert info.value.details["booths"] == [booth.pk]
    assert booths_snapshot() == before


def test_confirming_the_holding_booking_again_changes_nothing(actor):
    booth = factories.BoothFactory()
    booking = request(booth, "SO1", actor)
    confirm_booking(booking=booking, actor=actor)
    before = booths_snapshot()
    assert confirm_booking(booking=booking, actor=actor) == []
    assert booths_snapshot() == before


def test_a_cancelled_booking_on_a_free_booth_is_not_confirmed(actor):
    booth = factories.BoothFactory()
    booking = request(booth, "SO1", actor)
    cancel_booking(booking=booking, actor=actor)
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        confirm_booking(booking=booking, actor=actor)
    assert info.value.code == "invalid_transition"
    assert booths_snapshot() == before


def test_a_request_on_a_booked_booth_is_refused(actor):
    booth = factories.BoothFactory()
    confirm_booking(booking=request(booth, "SO1", actor), actor=actor)
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        request(booth, "SO2", actor)
    assert info.value.code == "booth_unavailable"
    assert booths_snapshot() == before


def test_the_same_order_line_asking_again_gets_its_pending_booking(actor):
    booth = factories.BoothFactory()
    first = request(booth, "SO1", actor)
    assert request(booth, "SO1", actor).pk == first.pk
    assert BoothBooking.objects.filter(booth=booth).count() == 1
    assert EventAuditLog.objects.filter(verb="booth_booking.requested").count() == 1


def test_release_frees_the_booth_and_clears_the_renter(actor):
    booth = factories.BoothFactory()
    booking = request(booth, "SO1", actor)
    confirm_booking(booking=booking, actor=actor)
    Booth.objects.filter(pk=booth.pk).update(is_paid=True)

    release_booking(booking=booking, actor=actor)

    booth.refresh_from_db()
    assert (booth.state, booth.partner_ref, booth.contact_name, booth.order_ref) == (
        "available",
        "",
        "",
        "",
    )
    assert booth.is_paid is False
    assert BoothBooking.objects.get(pk=booking.pk).state == "cancelled"
    assert EventAuditLog.objects.filter(verb="booth.released").count() == 1
    # and another order can now have it
    confirm_booking(booking=request(booth, "SO2", actor), actor=actor)
    assert [b.order_ref for b in confirmed(booth)] == ["SO2"]


@pytest.mark.parametrize("state", [BookingState.PENDING, BookingState.CANCELLED])
def test_only_a_confirmed_booking_is_released(state, actor):
    booking = factories.BoothBookingFactory(state=state)
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        release_booking(booking=booking, actor=actor)
    assert info.value.code == "invalid_transition"
    assert booths_snapshot() == before


def test_a_staff_block_holds_the_booth_like_a_booking(actor):
    booth = factories.BoothFactory()
    pending = request(booth, "SO1", actor)
    block = block_booth(booth=booth, actor=actor)
    booth.refresh_from_db()
    assert (booth.state, block.state, block.order_ref) == ("unavailable", "confirmed", "")
    assert BoothBooking.objects.get(pk=pending.pk).state == "cancelled"
    assert EventAuditLog.objects.filter(verb="booth.blocked").count() == 1
    with pytest.raises(DomainError) as info:
        confirm_booking(booking=factories.BoothBookingFactory(booth=booth), actor=actor)
    assert info.value.code == "booth_unavailable"
    release_booth(booth=booth, actor=actor)
    assert Booth.objects.get(pk=booth.pk).state == "available"


def test_releasing_a_free_booth_is_refused(actor):
    booth = factories.BoothFactory()
    with pytest.raises(DomainError) as info:
        release_booth(booth=booth, actor=actor)
    assert info.value.code == "invalid_transition"
