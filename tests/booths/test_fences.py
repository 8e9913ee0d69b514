"""Fences of spec-overlay.md §2.2: each refused patch and delete is `booth_locked`, nothing
written; creation only on an event that is neither cancelled nor done."""

from __future__ import annotations

import pytest

from booths.models import BookingState, Booth, BoothState
from booths.services import (
    block_booth,
    confirm_booking,
    create_booth,
    delete_booth,
    release_booking,
    request_booking,
    update_booth,
)
from events.errors import DomainError
from events.models import EventAuditLog, KanbanState
from tests.booths import factories
from tests.booths.helpers import booths_snapshot
from tests.events import factories as event_factories

pytestmark = pytest.mark.django_db


def booked_booth(actor, **kwargs) -> Booth:
    booth = factories.BoothFactory(**kwargs)
    booking = request_booking(
        booth=booth,
        order_ref="SO1",
        order_line_ref="SO1/1",
        partner_ref="P1",
        contact={"name": "Acme", "email": "a@acme.example", "phone": "+3225550000"},
        actor=actor,
    )
    confirm_booking(booking=booking, actor=actor)
    return Booth.objects.get(pk=booth.pk)


def refused(code: str, verb, **kwargs) -> DomainError:
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        verb(**kwargs)
    assert info.value.code == code
    assert booths_snapshot() == before
    return info.value


# --- patch ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    ["name", "booth_category", "event"],
)
def test_name_category_and_event_of_a_booked_booth_cannot_change(field, actor):
    booth = booked_booth(actor)
    new = {
        "name": "Renamed",
        "booth_category": factories.BoothCategoryFactory(),
        "event": event_factories.EventFactory(),
    }[field]
    error = refused("booth_locked", update_booth, booth=booth, actor=actor, **{field: new})
    assert error.details["fields"] == [field]


def test_a_refused_patch_writes_none_of_its_other_fields(actor):
    booth = booked_booth(actor)
    refused(
        "booth_locked",
        update_booth,
        booth=booth,
        actor=actor,
        name="Renamed",
        contact_name="Someone else",
    )
    assert Booth.objects.get(pk=booth.pk).contact_name == "Acme"


@pytest.mark.parametrize("held_by", ["order", "staff block"])
def test_a_booked_booth_is_not_set_back_to_available_by_a_patch(held_by, actor):
    if held_by == "order":
        booth = booked_booth(actor)
    else:
        booth = factories.BoothFactory()
        block_booth(booth=booth, actor=actor)
    refused("booth_locked", update_booth, booth=booth, actor=actor, state=BoothState.AVAILABLE)
    assert Booth.objects.get(pk=booth.pk).state == BoothState.UNAVAILABLE


def test_what_a_booking_does_not_pin_can_change(actor):
    booth = booked_booth(actor)
    update_booth(booth=booth, actor=actor, contact_name="Acme Europe", is_paid=True)
    booth.refresh_from_db()
    assert (booth.contact_name, booth.is_paid, booth.state) == ("Acme Europe", True, "unavailable")
    entry = EventAuditLog.objects.get(verb="booth.updated")
    assert entry.data["contact_name"] == ["Acme", "Acme Europe"]


def test_a_booth_with_pending_requests_only_can_be_renamed_and_moved(actor):
    booth = factories.BoothFactory(name="Stand 1")
    request_booking(
        booth=booth, order_ref="SO1", order_line_ref="", partner_ref="", contact={}, actor=actor
    )
    other_event = event_factories.EventFactory()
    update_booth(booth=booth, actor=actor, name="Stand 1A", event=other_event)
    booth.refresh_from_db()
    assert (booth.name, booth.event_id) == ("Stand 1A", other_event.pk)


def test_after_release_the_booth_can_be_renamed_again(actor):
    booth = booked_booth(actor)
    release_booking(booking=booth.bookings.get(state=BookingState.CONFIRMED), actor=actor)
    update_booth(booth=booth, actor=actor, name="Renamed")
    assert Booth.objects.get(pk=booth.pk).name == "Renamed"


def test_setting_a_free_booth_unavailable_is_a_staff_block(actor):
    booth = factories.BoothFactory()
    update_booth(booth=booth, actor=actor, state=BoothState.UNAVAILABLE)
    booth.refresh_from_db()
    block = booth.bookings.get()
    assert (booth.state, block.state, block.order_ref) == ("unavailable", "confirmed", "")


# --- delete ---------------------------------------------------------------------------------


def test_a_booth_with_a_confirmed_booking_cannot_be_deleted(actor):
    booth = booked_booth(actor)
    refused("booth_locked", delete_booth, booth=booth, actor=actor)


def test_a_staff_blocked_booth_cannot_be_deleted(actor):
    booth = factories.BoothFactory()
    block_booth(booth=booth, actor=actor)
    refused("booth_locked", delete_booth, booth=booth, actor=actor)


def test_a_booth_with_a_pending_booking_of_an_order_cannot_be_deleted(actor):
    booth = factories.BoothFactory()
    request_booking(
        booth=booth, order_ref="SO9", order_line_ref="", partner_ref="", contact={}, actor=actor
    )
    error = refused("booth_locked", delete_booth, booth=booth, actor=actor)
    assert error.details["booth"] == booth.pk


def test_a_booth_whose_bookings_are_all_cancelled_is_deleted_and_audited(actor):
    booth = factories.BoothFactory()
    factories.BoothBookingFactory(booth=booth, state=BookingState.CANCELLED)
    delete_booth(booth=booth, actor=actor)
    assert not Booth.objects.filter(pk=booth.pk).exists()
    entry = EventAuditLog.objects.get(verb="booth.deleted")
    assert (entry.event_id, entry.data["booth"]) == (booth.event_id, booth.pk)


# --- create ---------------------------------------------------------------------------------


def test_a_booth_is_created_and_audited(actor):
    event = event_factories.EventFactory()
    category = factories.BoothCategoryFactory()
    booth = create_booth(event=event, booth_category=category, name=" Stand 7 ", actor=actor)
    assert (booth.name, booth.state, booth.event_id) == ("Stand 7", "available", event.pk)
    assert EventAuditLog.objects.get(verb="booth.created").event_id == event.pk


@pytest.mark.parametrize("closed", ["cancelled", "done"])
def test_no_booth_is_created_on_a_cancelled_or_done_event(closed, actor):
    if closed == "cancelled":
        event = event_factories.EventFactory(kanban_state=KanbanState.CANCEL)
    else:
        event = event_factories.EventFactory(stage=event_factories.stage("Ended"))
    category = factories.BoothCategoryFactory()
    refused(
        "registrations_closed",
        create_booth,
        event=event,
        booth_category=category,
        name="Stand",
        actor=actor,
    )


def test_a_booth_is_not_moved_onto_a_cancelled_event(actor):
    booth = factories.BoothFactory()
    cancelled = event_factories.EventFactory(kanban_state=KanbanState.CANCEL)
    refused("registrations_closed", update_booth, booth=booth, actor=actor, event=cancelled)


def test_a_booth_needs_a_name(actor):
    refused(
        "invalid_value",
        create_booth,
        event=event_factories.EventFactory(),
        booth_category=factories.BoothCategoryFactory(),
        name="  ",
        actor=actor,
    )
