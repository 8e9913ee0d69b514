"""An order's booths (spec-overlay.md §2.3, §1.4): all or none; a cancelled order frees them."""

from __future__ import annotations

import pytest

from booths.models import Booth, BoothBooking
from booths.services import (
    confirm_order_booths,
    mark_order_booths_paid,
    release_order_booths,
    request_booking,
)
from events.errors import DomainError
from events.models import EventAuditLog
from tests.booths import factories
from tests.booths.helpers import booths_snapshot, confirmed

pytestmark = pytest.mark.django_db

PARTNER = {"name": "Acme", "email": "booths@acme.example", "phone": "+32 2 555 00 00"}


def confirm(order_ref, booth_ids, actor, line_ref=None):
    return confirm_order_booths(
        order_ref=order_ref,
        lines=[{"ref": line_ref or f"{order_ref}/2", "booth_ids": booth_ids}],
        partner_ref=f"P-{order_ref}",
        contact=PARTNER,
        actor=actor,
    )


def test_an_order_confirms_all_its_booths(actor):
    a, b = factories.BoothFactory.create_batch(2)
    result = confirm("SO1", [b.pk, a.pk], actor)
    assert sorted(x.booth_id for x in result.confirmed) == [a.pk, b.pk]
    for booth in (a, b):
        booth.refresh_from_db()
        assert (booth.state, booth.order_ref, booth.order_line_ref, booth.contact_email) == (
            "unavailable",
            "SO1",
            "SO1/2",
            "booths@acme.example",
        )


def test_an_order_with_two_booths_one_taken_books_neither(actor):
    free, taken = factories.BoothFactory.create_batch(2)
    confirm("SO1", [taken.pk], actor)
    pending = request_booking(
        booth=free, order_ref="SO3", order_line_ref="", partner_ref="", contact={}, actor=actor
    )
    before = booths_snapshot()

    with pytest.raises(DomainError) as info:
        confirm("SO2", [free.pk, taken.pk], actor)

    assert info.value.code == "booth_unavailable"
    assert info.value.details["booths"] == [taken.pk]
    assert info.value.details["booth_names"] == [taken.name]
    assert taken.name in info.value.message
    assert booths_snapshot() == before
    assert Booth.objects.get(pk=free.pk).state == "available"
    assert BoothBooking.objects.get(pk=pending.pk).state == "pending"  # not cancelled either


def test_every_taken_booth_is_named(actor):
    free, one, two = factories.BoothFactory.create_batch(3)
    confirm("SO1", [one.pk], actor)
    confirm("SO9", [two.pk], actor)
    with pytest.raises(DomainError) as info:
        confirm_order_booths(
            order_ref="SO2",
            lines=[
                {"ref": "SO2/1", "booth_ids": [two.pk]},
                {"ref": "SO2/2", "booth_ids": [free.pk, one.pk]},
            ],
            partner_ref="P2",
            contact=PARTNER,
            actor=actor,
        )
    assert info.value.details["booths"] == sorted([one.pk, two.pk])


def test_the_orders_pending_booking_is_the_one_confirmed_and_competitors_are_reported(actor):
    booth = factories.BoothFactory()
    mine = request_booking(
        booth=booth,
        order_ref="SO1",
        order_line_ref="SO1/2",
        partner_ref="P1",
        contact={},
        actor=actor,
    )
    request_booking(
        booth=booth,
        order_ref="SO2",
        order_line_ref="SO2/1",
        partner_ref="P2",
        contact={},
        actor=actor,
    )
    result = confirm("SO1", [booth.pk], actor)
    assert [b.pk for b in result.confirmed] == [mine.pk]
    assert result.cancelled_order_refs == ["SO2"]
    assert BoothBooking.objects.filter(booth=booth).count() == 2


def test_a_replayed_confirmation_confirms_nothing_twice(actor):
    a, b = factories.BoothFactory.create_batch(2)
    confirm("SO1", [a.pk, b.pk], actor)
    before = booths_snapshot()
    result = confirm("SO1", [a.pk, b.pk], actor)
    assert result.confirmed == []
    assert sorted(x.booth_id for x in result.already_confirmed) == [a.pk, b.pk]
    assert booths_snapshot() == before


def test_an_unknown_booth_is_refused_whole(actor):
    booth = factories.BoothFactory()
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        confirm("SO1", [booth.pk, 999_999], actor)
    assert (info.value.code, info.value.details["booths"]) == ("not_found", [999_999])
    assert booths_snapshot() == before


def test_releasing_the_orders_booths_lets_another_order_book_them(actor):
    a, b = factories.BoothFactory.create_batch(2)
    confirm("SO1", [a.pk, b.pk], actor)
    with pytest.raises(DomainError):
        confirm("SO2", [a.pk, b.pk], actor)

    released = release_order_booths(order_ref="SO1", actor=actor)

    assert released.released_booths == [a.pk, b.pk]
    for booth in (a, b):
        booth.refresh_from_db()
        assert (booth.state, booth.order_ref, booth.partner_ref) == ("available", "", "")
    assert EventAuditLog.objects.filter(verb="booth.released").count() == 2
    confirm("SO2", [a.pk, b.pk], actor)
    assert [x.order_ref for x in confirmed(a) + confirmed(b)] == ["SO2", "SO2"]


def test_releasing_an_order_cancels_its_pending_requests_and_is_idempotent(actor):
    booth = factories.BoothFactory()
    held = factories.BoothFactory()
    pending = request_booking(
        booth=booth, order_ref="SO1", order_line_ref="", partner_ref="", contact={}, actor=actor
    )
    other = request_booking(
        booth=booth, order_ref="SO2", order_line_ref="", partner_ref="", contact={}, actor=actor
    )
    confirm("SO1", [held.pk], actor)
    result = release_order_booths(order_ref="SO1", actor=actor)
    assert (result.released_booths, result.cancelled_bookings) == ([held.pk], [pending.pk])
    assert BoothBooking.objects.get(pk=other.pk).state == "pending"
    before = booths_snapshot()
    again = release_order_booths(order_ref="SO1", actor=actor)
    assert (again.released_booths, again.cancelled_bookings) == ([], [])
    assert booths_snapshot() == before


def test_paid_marks_the_orders_booths_once(actor):
    a, b, other = factories.BoothFactory.create_batch(3)
    confirm("SO1", [a.pk, b.pk], actor)
    confirm("SO2", [other.pk], actor)
    assert mark_order_booths_paid(order_ref="SO1", actor=actor) == [a.pk, b.pk]
    assert dict(Booth.objects.values_list("pk", "is_paid")) == {
        a.pk: True,
        b.pk: True,
        other.pk: False,
    }
    before = booths_snapshot()
    assert mark_order_booths_paid(order_ref="SO1", actor=actor) == []
    assert booths_snapshot() == before
    assert EventAuditLog.objects.filter(verb="booth.paid").count() == 2
