"""The waiting list in a real browser (Debian's chromium driven by Playwright): on a sold-out
event, join the waiting list from the event page; a seat frees up, the offer pass holds it and
mails the link; open the offer link from the mail and take the seat, landing on the new
registration's tickets page. Screenshots go to test-output/screenshots/waitlist-*.png.
"""

from __future__ import annotations

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from events.models import MailOutbox, Registration, WaitlistEntry
from events.services import nudge, registrations, seats, waitlist
from tests.browser import test_attendee_browser
from tests.browser.test_attendee_browser import SHOTS
from tests.events import factories

pytestmark = pytest.mark.slow
browser = test_attendee_browser.browser  # the one launcher of Debian's chromium (a fixture)


@pytest.fixture
def sold_out(transactional_db, monkeypatch, actor, settings):
    from django.core.cache import cache
    from django.db import connections

    cache.clear()
    # Every browser request comes from 127.0.0.1: limits lifted (they are tested elsewhere).
    settings.EVENT_RATE_LIMITS = {"intake": (10_000, 60), "token": (10_000, 60)}
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
        seats_max=2,
    )
    regs = [
        registrations.register(
            event=event, attendees=[{"name": n, "email": f"{n.lower()}@example.org"}], actor=actor
        )[0]
        for n in ("Ada", "Grace")
    ]
    with mock.patch.object(nudge, "publish"):  # no Celery: the test runs the offer pass
        yield event, regs


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("device", "viewport"), [("mobile", (390, 844)), ("desktop", (1280, 900))])
def test_join_the_waiting_list_then_take_the_offered_seat(
    sold_out, live_server, browser, device, viewport, actor
):
    event, regs = sold_out
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})

    # a sold-out event page offers the waiting list
    page.goto(f"{live_server.url}/events/{event.pk}/")
    assert "This event is sold out." in page.locator("main").inner_text()
    form = page.locator("#waitlist-form")
    assert form.is_visible()
    page.get_by_label("Full name").last.fill("Katherine Johnson")
    page.get_by_label("Email").last.fill("katherine@example.org")
    page.screenshot(path=SHOTS / f"waitlist-{device}-1-sold-out.png", full_page=True)
    page.get_by_role("button", name="Join the waiting list").click()
    page.wait_for_url(f"**/events/{event.pk}/waitlist")

    assert page.locator("h1").inner_text() == "You are on the waiting list"
    assert "we email katherine@example.org a link" in page.get_by_role("status").inner_text()
    page.screenshot(path=SHOTS / f"waitlist-{device}-2-joined.png", full_page=True)
    entry = WaitlistEntry.objects.get()
    assert (entry.name, entry.email, entry.state) == (
        "Katherine Johnson",
        "katherine@example.org",
        "waiting",
    )

    # a seat frees up: the pass holds it and mails the offer link
    registrations.cancel(registration=regs[0], actor=actor)
    (offered,) = waitlist.offer_freed_seats(event=event)
    assert offered.pk == entry.pk
    (mail,) = MailOutbox.objects.all()
    path = re.search(r"http://[^/]+(/waitlist/offer/[^/\s\"]+/)", mail.body_text).group(1)

    page.goto(f"{live_server.url}{path}")
    assert page.locator("h1").inner_text() == "A seat is held for you"
    assert "Katherine Johnson" in page.locator("article").inner_text()
    assert page.locator("#offer-expires").is_visible()
    page.screenshot(path=SHOTS / f"waitlist-{device}-3-offer.png", full_page=True)

    page.get_by_role("button", name="Take the seat").click()
    page.wait_for_url("**/my-tickets/*/")

    assert page.locator(".status").inner_text() == "Registered"
    assert "Katherine Johnson" in page.locator("main").inner_text()
    page.screenshot(path=SHOTS / f"waitlist-{device}-4-registered.png", full_page=True)
    page.close()

    entry.refresh_from_db()
    assert entry.state == "accepted"
    assert entry.registration.state == "open"
    assert Registration.objects.filter(event=event, state="open").count() == 2
    assert seats.audit(event=event) == []
    assert seats.event_summary(event=event).available == 0
