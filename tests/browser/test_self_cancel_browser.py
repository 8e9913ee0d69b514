"""Self-service cancellation in a real browser (Debian's chromium driven by Playwright): open
my-tickets, follow "Cancel my registration", confirm on the confirm step (a real form post with
its CSRF token and the page's own Origin), and see the registration cancelled. Screenshots go
to test-output/screenshots/self-cancel-*.png.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from events.models import MailOutbox, Registration
from events.services import capability, registrations, seats
from tests.browser import test_attendee_browser
from tests.browser.test_attendee_browser import SHOTS
from tests.events import factories

pytestmark = pytest.mark.slow
browser = test_attendee_browser.browser  # the one launcher of Debian's chromium (a fixture)


@pytest.fixture
def booked(transactional_db, monkeypatch, actor):
    from django.core.cache import cache
    from django.db import connections

    cache.clear()
    # The live server's request threads keep browser connections alive: close their database
    # connection at the end of each request so none outlives the test.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    begin = timezone.now().replace(microsecond=0) + timedelta(days=20)
    event = factories.EventFactory(
        name="Python Brussels Meetup",
        date_begin=begin,
        date_end=begin + timedelta(hours=3),
        venue="La Grande Salle",
        organizer="Python Brussels",
        seats_limited=True,
        seats_max=40,
        cancel_deadline_hours=48,
    )
    ticket = factories.TicketFactory(event=event, name="Standard")
    regs = registrations.register(
        event=event,
        ticket=ticket,
        attendees=[
            {"name": "Ada Lovelace", "email": "ada@example.org"},
            {"name": "Grace Hopper", "email": "grace@example.org"},
        ],
        sale_order_ref="SO-42",
        actor=actor,
    )
    return event, regs


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("device", "viewport"), [("mobile", (390, 844)), ("desktop", (1280, 900))])
def test_cancel_from_my_tickets_with_the_confirm_step(
    booked, live_server, browser, device, viewport
):
    event, (ada, grace) = booked
    token = capability.mint(purpose="tickets", subject=ada)
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})

    page.goto(f"{live_server.url}/my-tickets/{token}/")
    assert page.locator(".status").inner_text() == "Registered"
    cancel = page.get_by_role("link", name="Cancel my registration")
    assert cancel.is_visible()
    assert "until" in page.locator("p.cancel").inner_text()  # the 48-hour deadline is shown
    page.screenshot(path=SHOTS / f"self-cancel-{device}-1-my-tickets.png", full_page=True)

    cancel.click()
    page.wait_for_url("**/cancel?registration=*")
    assert page.locator("h1").inner_text() == "Cancel your registration"
    assert "Ada Lovelace" in page.locator("article").inner_text()
    assert Registration.objects.get(pk=ada.pk).state == "open"  # nothing before the confirm
    page.screenshot(path=SHOTS / f"self-cancel-{device}-2-confirm.png", full_page=True)

    page.get_by_role("button", name="Cancel my registration").click()
    page.wait_for_url("**/my-tickets/*/?cancelled=*")

    assert page.locator(".status").inner_text() == "Cancelled"
    assert page.get_by_role("status").inner_text().startswith("Your registration is cancelled")
    assert page.locator(".qr").count() == 0
    assert page.get_by_role("link", name="Cancel my registration").count() == 0
    page.screenshot(path=SHOTS / f"self-cancel-{device}-3-cancelled.png", full_page=True)
    page.close()

    assert Registration.objects.get(pk=ada.pk).state == "cancel"
    assert Registration.objects.get(pk=grace.pk).state == "open"
    assert seats.event_summary(event=event).taken == 1
    assert seats.audit(event=event) == []
    assert list(MailOutbox.objects.values_list("recipient", flat=True)) == ["ada@example.org"]


@pytest.mark.django_db(transaction=True)
def test_an_order_link_offers_one_button_per_registration(booked, live_server, browser):
    event, (ada, grace) = booked
    token = capability.mint(purpose="order", subject="SO-42")
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    page.goto(f"{live_server.url}/my-tickets/{token}/")
    buttons = page.get_by_role("link", name="Cancel my registration")
    assert buttons.count() == 2
    page.screenshot(path=SHOTS / "self-cancel-order-1-my-tickets.png", full_page=True)

    buttons.nth(1).click()  # Grace's
    page.wait_for_url("**/cancel?registration=*")
    assert "Grace Hopper" in page.locator("article").inner_text()
    page.get_by_role("button", name="Cancel my registration").click()
    page.wait_for_url("**/my-tickets/*/?cancelled=*")

    assert page.locator(".status").all_inner_texts() == ["Registered", "Cancelled"]
    assert page.get_by_role("link", name="Cancel my registration").count() == 1
    page.screenshot(path=SHOTS / "self-cancel-order-2-one-cancelled.png", full_page=True)
    page.close()
    assert dict(Registration.objects.values_list("pk", "state")) == {
        ada.pk: "open",
        grace.pk: "cancel",
    }
    assert seats.audit(event=event) == []
