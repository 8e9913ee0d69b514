"""The booths admin (spec.md §9, spec-overlay.md §2): what each staff group sees and may do,
actions that call the booking verbs and show a typed refusal as an error message (nothing
written), the Event admin's booth column, summary and inline, and bounded queries."""

from __future__ import annotations

import re

import pytest
from django.contrib import messages
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from booths.models import Booth, BoothBooking, BoothCategory
from booths.services import block_booth, confirm_booking, request_booking
from events.models import EventAuditLog
from tests.booths import factories
from tests.booths.helpers import booths_snapshot
from tests.events import factories as event_factories
from tests.events.admin.test_permissions import change_form_data

pytestmark = pytest.mark.django_db

BOOTHS = "/admin/booths/booth/"
BOOKINGS = "/admin/booths/boothbooking/"
CATEGORIES = "/admin/booths/boothcategory/"
TYPE_BOOTHS = "/admin/booths/typebooth/"
EVENTS = "/admin/events/event/"


def staff_client(client, group_name: str):
    user = event_factories.UserFactory(username=group_name.lower().replace(" ", "-"))
    user.groups.add(Group.objects.get(name=group_name))
    client.force_login(user)
    return client


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def errors_of(response) -> list[str]:
    """The messages shown at error level (a typed refusal is an error, not a notice)."""
    return [str(m) for m in response.context["messages"] if m.level == messages.ERROR]


def action_names(response) -> set[str]:
    form = response.context["action_form"]
    return set() if form is None else {name for name, _ in form.fields["action"].choices if name}


def request(booth, order_ref, actor):
    return request_booking(
        booth=booth,
        order_ref=order_ref,
        order_line_ref="",
        partner_ref=f"P-{order_ref}",
        contact={"name": f"Renter {order_ref}"},
        actor=actor,
    )


@pytest.fixture
def fair(actor):
    """An event with two booths: one booked by SO1, one free with SO3's request pending."""
    event = event_factories.EventFactory(name="Fair")
    booked, free = (
        factories.BoothFactory(event=event, name="Stand A"),
        factories.BoothFactory(event=event, name="Stand B"),
    )
    confirm_booking(booking=request(booked, "SO1", actor), actor=actor)
    request(free, "SO3", actor)
    return event, booked, free


# --- Event desk: reads events (with their booth counts), nothing of the booths' admin ------


def test_desk_sees_booth_counts_on_events_and_no_booth_admin(client, fair):
    event, _, _ = fair
    desk = staff_client(client, "Event desk")
    for url in (BOOTHS, BOOKINGS, CATEGORIES, TYPE_BOOTHS, f"{BOOTHS}add/"):
        assert desk.get(url).status_code == 403, url

    listing = desk.get(EVENTS)
    assert listing.status_code == 200
    assert "booths (free / total)" in listing.content.decode().lower()
    assert re.findall(r'<td class="field-booth_counts">([^<]*)</td>', listing.content.decode()) == [
        "1 / 2"
    ]
    page = desk.get(f"{EVENTS}{event.pk}/change/")
    assert page.status_code == 200
    assert "total 2 · available 1 · booked 1" in page.content.decode()
    assert Booth not in {f.formset.model for f in page.context["inline_admin_formsets"]}
    # and it cannot act: the booking and booth actions refuse, nothing written
    _, booked, free = fair
    before = booths_snapshot()
    pending = free.bookings.get()
    for url, action, pk in (
        (BOOKINGS, "confirm", pending.pk),
        (BOOKINGS, "release", booked.bookings.get().pk),
        (BOOTHS, "block", free.pk),
        (BOOTHS, "release", booked.pk),
    ):
        response = desk.post(url, {"action": action, "_selected_action": [pk]})
        assert response.status_code == 403, (url, action)
    assert booths_snapshot() == before


# --- Event user: manages booths and bookings, reads categories and template lines ----------


def test_user_reads_booths_and_bookings_and_has_the_booking_actions(client, fair):
    user = staff_client(client, "Event user")
    booths = user.get(BOOTHS)
    assert booths.status_code == 200
    assert action_names(booths) == {"block", "release"}  # no delete
    bookings = user.get(BOOKINGS)
    assert bookings.status_code == 200
    assert action_names(bookings) == {"confirm", "release", "cancel"}
    assert user.get(f"{BOOTHS}add/").status_code == 200
    _, booked, free = fair
    assert user.get(f"{BOOTHS}{free.pk}/delete/").status_code == 403
    # categories and template lines: view only
    category = free.booth_category
    assert user.get(f"{CATEGORIES}{category.pk}/change/").context["has_change_permission"] is False
    assert user.get(f"{CATEGORIES}add/").status_code == 403
    assert user.get(f"{TYPE_BOOTHS}add/").status_code == 403
    # the booking history on the booth's page
    page = user.get(f"{BOOTHS}{booked.pk}/change/")
    (history,) = (
        f for f in page.context["inline_admin_formsets"] if f.formset.model is BoothBooking
    )
    assert list(history.formset.queryset.values_list("order_ref", "state")) == [
        ("SO1", "confirmed")
    ]


def test_confirm_action_shows_booth_unavailable_and_writes_nothing(client, fair, actor):
    _, booked, _ = fair
    late = factories.BoothBookingFactory(booth=booked, order_ref="SO9")  # pending, stale
    user = staff_client(client, "Event user")
    before = booths_snapshot()
    response = user.post(
        BOOKINGS, {"action": "confirm", "_selected_action": [late.pk]}, follow=True
    )
    assert response.status_code == 200
    (message,) = errors_of(response)
    assert "booth_unavailable" in message
    assert messages_of(response) == [message]  # no "Confirmed" beside it
    assert booths_snapshot() == before


def test_release_action_on_a_pending_booking_shows_invalid_transition(client, fair):
    _, _, free = fair
    pending = free.bookings.get()
    user = staff_client(client, "Event user")
    before = booths_snapshot()
    response = user.post(
        BOOKINGS, {"action": "release", "_selected_action": [pending.pk]}, follow=True
    )
    (message,) = errors_of(response)
    assert "invalid_transition" in message
    assert messages_of(response) == [message]
    assert booths_snapshot() == before


def test_confirm_then_release_actions_call_the_verbs(client, fair, actor):
    _, _, free = fair
    competitor = request(free, "SO4", actor)
    pending = free.bookings.get(order_ref="SO3")
    user = staff_client(client, "Event user")
    response = user.post(
        BOOKINGS, {"action": "confirm", "_selected_action": [pending.pk]}, follow=True
    )
    assert messages_of(response) == ["Confirmed: 1.", "Requests of other orders cancelled: SO4"]
    assert BoothBooking.objects.get(pk=competitor.pk).state == "cancelled"
    free.refresh_from_db()
    assert (free.state, free.order_ref) == ("unavailable", "SO3")
    entry = EventAuditLog.objects.filter(verb="booth.booked").latest("pk")
    assert entry.actor_type == "user"

    response = user.post(
        BOOKINGS, {"action": "release", "_selected_action": [pending.pk]}, follow=True
    )
    assert messages_of(response) == ["Released: 1."]
    assert Booth.objects.get(pk=free.pk).state == "available"


def test_booth_actions_block_and_release_with_refusals_as_messages(client, fair):
    _, booked, free = fair
    user = staff_client(client, "Event user")
    before = booths_snapshot()
    response = user.post(BOOTHS, {"action": "block", "_selected_action": [booked.pk]}, follow=True)
    assert ["booth_unavailable" in m for m in errors_of(response)] == [True]
    response = user.post(BOOTHS, {"action": "release", "_selected_action": [free.pk]}, follow=True)
    assert ["invalid_transition" in m for m in errors_of(response)] == [True]
    assert booths_snapshot() == before
    user.post(BOOTHS, {"action": "block", "_selected_action": [free.pk]})
    assert Booth.objects.get(pk=free.pk).state == "unavailable"


def request_form(booth, order_ref: str) -> dict:
    return {
        "booth": booth.pk,
        "order_ref": order_ref,
        "order_line_ref": f"{order_ref}/2",
        "partner_ref": "P9",
        "contact_name": "Quinn Quote",
        "contact_email": "quinn@example.org",
        "contact_phone": "+32 2 555 01 09",
    }


def test_staff_request_a_booking_in_the_admin_through_request_booking(client, fair):
    _, _, free = fair
    user = staff_client(client, "Event user")
    assert user.get(f"{BOOKINGS}add/").status_code == 200

    response = user.post(f"{BOOKINGS}add/", request_form(free, "SO7"), follow=True)

    assert response.status_code == 200
    assert errors_of(response) == []
    booking = BoothBooking.objects.get(order_ref="SO7")
    assert (booking.booth, booking.state, booking.order_line_ref, booking.partner_ref) == (
        free,
        "pending",
        "SO7/2",
        "P9",
    )
    assert (booking.contact_name, booking.contact_email) == ("Quinn Quote", "quinn@example.org")
    entry = EventAuditLog.objects.get(verb="booth_booking.requested", data__order_ref="SO7")
    assert (entry.actor_type, entry.data["booking"]) == ("user", booking.pk)
    # the request is a quotation: the booth stays free, beside SO3's
    assert Booth.objects.get(pk=free.pk).state == "available"
    assert set(free.bookings.values_list("order_ref", flat=True)) == {"SO3", "SO7"}
    # a booking row stays read only
    page = user.get(f"{BOOKINGS}{booking.pk}/change/")
    assert page.context["has_change_permission"] is False


@pytest.mark.parametrize("order_ref, code", [("SO8", "booth_unavailable"), ("  ", "invalid_value")])
def test_a_refused_request_in_the_admin_is_an_error_message_and_writes_nothing(
    client, fair, order_ref, code
):
    _, booked, free = fair
    booth = booked if code == "booth_unavailable" else free
    user = staff_client(client, "Event user")
    before = booths_snapshot()

    response = user.post(f"{BOOKINGS}add/", request_form(booth, order_ref), follow=True)

    assert response.status_code == 200
    assert [code in m for m in errors_of(response)] == [True]
    assert booths_snapshot() == before


def test_the_desk_cannot_request_a_booking(client, fair):
    _, _, free = fair
    desk = staff_client(client, "Event desk")
    before = booths_snapshot()
    assert desk.get(f"{BOOKINGS}add/").status_code == 403
    assert desk.post(f"{BOOKINGS}add/", request_form(free, "SO7")).status_code == 403
    assert booths_snapshot() == before


def test_renaming_a_booked_booth_in_the_admin_is_booth_locked(client, fair):
    _, booked, _ = fair
    user = staff_client(client, "Event user")
    url = f"{BOOTHS}{booked.pk}/change/"
    data = change_form_data(user.get(url))
    data["name"] = "Renamed"
    before = booths_snapshot()
    response = user.post(url, data, follow=True)
    assert any("booth_locked" in m for m in errors_of(response))
    assert booths_snapshot() == before


def test_adding_a_booth_in_the_admin_goes_through_create_booth(client, fair):
    event, _, free = fair
    user = staff_client(client, "Event user")
    response = user.post(
        f"{BOOTHS}add/",
        {
            "event": event.pk,
            "booth_category": free.booth_category_id,
            "name": "Stand C",
            "bookings-TOTAL_FORMS": "0",
            "bookings-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.context and response.context["errors"]
    booth = Booth.objects.get(name="Stand C")
    assert EventAuditLog.objects.filter(verb="booth.created", data__booth=booth.pk).exists()


def test_a_booth_added_in_the_event_inline_goes_through_create_booth(client, fair):
    event, _, free = fair
    user = staff_client(client, "Event user")
    url = f"{EVENTS}{event.pk}/change/"
    data = change_form_data(user.get(url))
    n = int(data["booths-TOTAL_FORMS"])
    data.update(
        {
            "booths-TOTAL_FORMS": str(n + 1),
            f"booths-{n}-name": "Stand D",
            f"booths-{n}-booth_category": str(free.booth_category_id),
        }
    )
    response = user.post(url, data)
    assert response.status_code == 302, response.context and response.context["errors"]
    booth = Booth.objects.get(name="Stand D", event=event)
    assert EventAuditLog.objects.filter(verb="booth.created", data__booth=booth.pk).exists()


# --- Event manager: everything, deletions included (fenced) --------------------------------


def test_manager_deletes_a_free_booth_but_not_a_booked_one(client, fair, actor):
    _, booked, free = fair
    free.bookings.update(state="cancelled")
    manager = staff_client(client, "Event manager")
    before = booths_snapshot()
    response = manager.post(f"{BOOTHS}{booked.pk}/delete/", {"post": "yes"}, follow=True)
    assert any("booth_locked" in m for m in errors_of(response))
    assert booths_snapshot() == before

    response = manager.post(f"{BOOTHS}{free.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Booth.objects.filter(pk=free.pk).exists()
    assert EventAuditLog.objects.filter(verb="booth.deleted").count() == 1


def test_manager_edits_categories_and_template_lines_through_their_verbs(client):
    event_type = event_factories.EventTypeFactory()
    manager = staff_client(client, "Event manager")
    response = manager.post(
        f"{CATEGORIES}add/",
        {"name": "Island", "sequence": "3", "active": "on", "price": "1500.00"},
    )
    assert response.status_code == 302, response.context and response.context["errors"]
    category = BoothCategory.objects.get(name="Island")
    response = manager.post(
        f"{TYPE_BOOTHS}add/",
        {"event_type": event_type.pk, "booth_category": category.pk, "name": "Island 1"},
    )
    assert response.status_code == 302, response.context and response.context["errors"]
    assert set(EventAuditLog.objects.values_list("verb", flat=True)) == {
        "booth_category.created",
        "type_booth.created",
    }
    # a category in use is not deleted (the delete page lists what protects it)
    response = manager.post(f"{CATEGORIES}{category.pk}/delete/", {"post": "yes"})
    assert response.context["protected"]
    assert BoothCategory.objects.filter(pk=category.pk).exists()


# --- bounded queries ----------------------------------------------------------------------


def queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url", [BOOTHS, BOOKINGS])
def test_booth_and_booking_changelists_take_constant_queries(admin_client, url, actor):
    def grow(n):
        for _ in range(n):
            booth = factories.BoothFactory()
            request(booth, f"SO-{booth.pk}", actor)
            block_booth(booth=factories.BoothFactory(event=booth.event), actor=actor)

    grow(2)
    few = queries(admin_client, url)
    grow(10)
    assert queries(admin_client, url) == few


def test_event_changelist_booth_column_takes_one_query_for_the_page(admin_client, actor):
    def event_with_booths():
        event = event_factories.EventFactory()
        factories.BoothFactory(event=event)
        block_booth(booth=factories.BoothFactory(event=event), actor=actor)

    event_with_booths()
    few = queries(admin_client, EVENTS)
    for _ in range(15):
        event_with_booths()
    assert queries(admin_client, EVENTS) == few
    html = admin_client.get(EVENTS).content.decode()
    assert re.findall(r'<td class="field-booth_counts">([^<]*)</td>', html) == ["1 / 2"] * 16
