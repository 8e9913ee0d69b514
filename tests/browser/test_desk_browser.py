"""The desk scanner in a real browser: Debian's chromium driven by Playwright.

Log in as a desk user, open the scanner page, type a barcode and Enter (as a keyboard-wedge
scanner does): the green "checked in" answer with its "To pay" badge for a ticket not paid yet
and the counter going up; the same ticket again: "already registered", still to pay; a
cancelled ticket: the refusal; a ticket of another event: the manual confirmation; the server's
answer cut off with no door list to decide from: "not recorded" (the offline mode, with a
list: test_desk_offline_browser.py). On a multi-slot event: the slot chosen on the page, its own
counters, a ticket of another slot asked about. Screenshots go to
test-output/screenshots/desk-*.png.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from events.models import QuestionType, Registration
from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture
from tests.events import factories

pytestmark = pytest.mark.slow
PASSWORD = "door-pw-for-tests"


@pytest.fixture
def world(transactional_db, monkeypatch):
    from django.db import connections

    # Request threads of the live server close their connection after each request.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    user = factories.UserFactory(username="door", password=PASSWORD)
    user.groups.add(Group.objects.get(name="Event desk"))
    begin = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    event = factories.EventFactory(
        name="Open Source Summit", date_begin=begin, date_end=begin + timedelta(hours=9)
    )
    other = factories.EventFactory(
        name="Django Workshop", date_begin=begin, date_end=begin + timedelta(hours=9)
    )
    ticket = factories.TicketFactory(event=event, name="Community")
    shirt = factories.QuestionFactory(
        event=event, title="T-shirt size", question_type=QuestionType.SIMPLE_CHOICE
    )
    size_m = factories.QuestionChoiceFactory(question=shirt, name="M")
    regs = {
        "ada": factories.RegistrationFactory(
            event=event,
            ticket=ticket,
            name="Ada Lovelace",
            company_name="Analytical Engines Ltd",
            barcode="4201000000000001",
            sale_status="sold",  # an order confirmed by the host, not paid yet
            sale_order_ref="SO-4201",
        ),
        "grace": factories.RegistrationFactory(
            event=event, ticket=ticket, name="Grace Hopper", barcode="4201000000000002"
        ),
        "cancelled": factories.RegistrationFactory(
            event=event, name="Alan Turing", state="cancel", barcode="4201000000000003"
        ),
        "elsewhere": factories.RegistrationFactory(
            event=other, name="Linus Torvalds", barcode="4201000000000004"
        ),
    }
    factories.RegistrationAnswerFactory(
        registration=regs["ada"], question=shirt, choice=size_m, text_value=None
    )
    return {"event": event, "regs": regs}


def scan(page, barcode: str, status: str) -> None:
    box = page.locator("#barcode")
    box.type(barcode)  # keystrokes, as a keyboard-wedge scanner sends them
    box.press("Enter")
    page.wait_for_selector(f'#result[data-status="{status}"]', timeout=10_000)
    # cleared and refocused for the next ticket
    assert box.input_value() == ""
    assert page.evaluate("document.activeElement.id") == "barcode"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("device", "viewport"), [("desktop", (1280, 900)), ("mobile", (390, 844))])
def test_the_door_in_a_real_browser(world, live_server, browser, device, viewport):  # noqa: F811
    event, regs = world["event"], world["regs"]
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    shot = lambda n, name: page.screenshot(  # noqa: E731
        path=SHOTS / f"desk-{device}-{n}-{name}.png", full_page=True
    )
    page.route("**/snapshot", lambda route: route.abort())  # no door list: no offline decision

    page.goto(f"{live_server.url}/desk/")
    page.wait_for_url("**/admin/login/**")
    page.fill("#id_username", "door")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/desk/")
    shot(1, "events")
    page.get_by_role("link", name="Open Source Summit").click()
    page.wait_for_url(f"**/desk/{event.pk}/")
    assert page.evaluate("document.activeElement.id") == "barcode"  # autofocus
    assert page.locator("#count-attended").inner_text() == "0"
    assert page.locator("#count-expected").inner_text() == "2"
    shot(2, "ready")

    scan(page, regs["ada"].barcode, "confirmed_registration")
    result = page.locator("#result")
    assert "Checked in" in result.inner_text()
    assert "Ada Lovelace" in result.inner_text()
    assert "Community" in result.inner_text()
    assert "T-shirt size: M" in result.inner_text()
    badge = result.locator('.result-head [data-flag="to-pay"]')
    assert badge.is_visible() and badge.text_content() == "To pay"
    assert "collect the payment, or send to the cash desk" in result.inner_text()
    assert result.locator(".result-icon svg").count() == 1
    expect(page.locator("#count-attended")).to_have_text("1")
    assert page.locator("#count-expected").inner_text() == "2"
    assert Registration.objects.get(pk=regs["ada"].pk).state == "done"
    shot(3, "checked-in")

    scan(page, regs["ada"].barcode, "already_registered")
    assert "Already registered" in result.inner_text()
    assert badge.is_visible()  # still to pay on a second scan
    shot(4, "already-registered")

    scan(page, regs["cancelled"].barcode, "canceled_registration")
    assert "Cancelled ticket — do not admit" in result.inner_text()
    assert result.locator('[data-flag="to-pay"]').count() == 0  # a free ticket: no badge
    assert Registration.objects.get(pk=regs["cancelled"].pk).state == "cancel"
    shot(5, "cancelled")

    scan(page, regs["elsewhere"].barcode, "need_manual_confirmation")
    assert "Django Workshop" in result.inner_text()
    confirm = page.get_by_role("button", name="Confirm entry anyway")
    assert confirm.is_visible()
    shot(6, "manual-confirmation")
    confirm.click()
    page.wait_for_selector('#result[data-status="confirmed_registration"]')
    assert not confirm.is_visible()
    assert Registration.objects.get(pk=regs["elsewhere"].pk).state == "done"

    # The server's answer never arrives: the page must not look like a success.
    page.route("**/desk/api/scan", lambda route: route.abort("connectionrefused"))
    scan(page, regs["grace"].barcode, "not_recorded")
    assert "Not recorded — scan again" in result.inner_text()
    assert Registration.objects.get(pk=regs["grace"].pk).state == "open"
    shot(7, "not-recorded")
    page.unroute("**/desk/api/scan")

    scan(page, regs["grace"].barcode, "confirmed_registration")
    expect(page.locator("#count-attended")).to_have_text("2")
    recent = page.locator("#recent li")
    assert recent.count() == 7
    assert [recent.nth(i).get_attribute("data-status") for i in range(3)] == [
        "confirmed_registration",
        "not_recorded",
        "confirmed_registration",
    ]
    # Ada's two scans keep their badge in the list; nobody else's has one.
    assert page.locator('#recent [data-flag="to-pay"]').count() == 2
    shot(8, "last-scans")
    page.close()


@pytest.fixture
def slotted(transactional_db, monkeypatch):
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    user = factories.UserFactory(username="door", password=PASSWORD)
    user.groups.add(Group.objects.get(name="Event desk"))
    begin = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    event = factories.EventFactory(
        name="Workshop days",
        date_begin=begin,
        date_end=begin + timedelta(days=2),
        is_multi_slots=True,
    )
    morning = factories.SlotFactory(event=event, start_hour=9.0, end_hour=12.0)
    afternoon = factories.SlotFactory(
        event=event,
        start_hour=13.0,
        end_hour=16.0,
        start_datetime=begin + timedelta(hours=4),
        end_datetime=begin + timedelta(hours=7),
    )
    regs = {
        "hedy": factories.RegistrationFactory(
            event=event,
            slot=morning,
            name="Hedy Lamarr",
            barcode="4202000000000001",
            sale_status="sold",
            sale_order_ref="SO-4202",
        ),
        "edsger": factories.RegistrationFactory(
            event=event, slot=afternoon, name="Edsger Dijkstra", barcode="4202000000000002"
        ),
        "radia": factories.RegistrationFactory(
            event=event, slot=afternoon, name="Radia Perlman", barcode="4202000000000003"
        ),
    }
    return {"event": event, "morning": morning, "afternoon": afternoon, "regs": regs}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("device", "viewport"), [("desktop", (1280, 900)), ("mobile", (390, 844))])
def test_a_multi_slot_door_admits_for_the_slot_it_chose(
    slotted,
    live_server,
    browser,  # noqa: F811
    device,
    viewport,
):
    event, regs = slotted["event"], slotted["regs"]
    morning, afternoon = slotted["morning"], slotted["afternoon"]
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    shot = lambda n, name: page.screenshot(  # noqa: E731
        path=SHOTS / f"desk-slots-{device}-{n}-{name}.png", full_page=True
    )
    page.goto(f"{live_server.url}/desk/{event.pk}/")
    page.wait_for_url("**/admin/login/**")
    page.fill("#id_username", "door")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**/desk/{event.pk}/")
    assert page.locator("#slot").input_value() == ""  # any slot until one is chosen
    assert page.locator("#count-expected").inner_text() == "3"
    shot(1, "choose-a-slot")

    page.select_option("#slot", str(morning.pk))  # the page reloads for that slot
    page.wait_for_url(f"**/desk/{event.pk}/?slot={morning.pk}")
    assert page.evaluate("document.activeElement.id") == "barcode"
    assert page.locator("#count-expected").inner_text() == "1"
    assert page.locator("#count-attended").inner_text() == "0"

    scan(page, regs["hedy"].barcode, "confirmed_registration")
    result = page.locator("#result")
    assert "Hedy Lamarr" in result.inner_text() and str(morning) in result.inner_text()
    assert result.locator('[data-flag="to-pay"]').is_visible()
    expect(page.locator("#count-attended")).to_have_text("1")
    shot(2, "checked-in-to-pay")

    scan(page, regs["edsger"].barcode, "need_manual_confirmation")
    assert "Ticket for another slot — check before admitting" in result.inner_text()
    assert str(afternoon) in result.inner_text()
    assert Registration.objects.get(pk=regs["edsger"].pk).state == "open"
    confirm = page.get_by_role("button", name="Confirm entry anyway")
    assert confirm.is_visible()
    shot(3, "another-slot")
    confirm.click()
    page.wait_for_selector('#result[data-status="confirmed_registration"]')
    assert Registration.objects.get(pk=regs["edsger"].pk).state == "done"

    page.select_option("#slot", str(afternoon.pk))
    page.wait_for_url(f"**/desk/{event.pk}/?slot={afternoon.pk}")
    assert page.locator("#count-attended").inner_text() == "1"
    assert page.locator("#count-expected").inner_text() == "2"
    scan(page, regs["radia"].barcode, "confirmed_registration")
    expect(page.locator("#count-attended")).to_have_text("2")  # the afternoon's, from the API
    shot(4, "afternoon")
    page.close()


@pytest.mark.django_db(transaction=True)
def test_a_server_error_or_a_timeout_is_not_recorded(world, live_server, browser):  # noqa: F811
    """Without a door list, a proxy's 502 (the app server is down, retried first) and a request
    that never answers (the page gives up after its timeout, on a controlled clock) both show
    "not recorded", never a success."""
    event, grace = world["event"], world["regs"]["grace"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.route("**/snapshot", lambda route: route.abort())  # no door list: no offline decision
    page.clock.install()  # the page's timers run on a clock the test moves
    page.goto(f"{live_server.url}/desk/{event.pk}/")
    page.wait_for_url("**/admin/login/**")
    page.fill("#id_username", "door")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**/desk/{event.pk}/")
    result = page.locator("#result")

    page.route(
        "**/desk/api/scan",
        lambda route: route.fulfill(
            status=502, content_type="text/html", body="<h1>502 Bad Gateway</h1>"
        ),
    )
    scan(page, grace.barcode, "not_recorded")
    assert "Not recorded — scan again" in result.inner_text()
    page.screenshot(path=SHOTS / "desk-502-not-recorded.png", full_page=True)
    page.unroute("**/desk/api/scan")

    held = []
    page.route("**/desk/api/scan", lambda route: held.append(route))  # sent, never answered
    box = page.locator("#barcode")
    with page.expect_request("**/desk/api/scan"):
        box.type(grace.barcode)
        box.press("Enter")
    page.wait_for_selector('#result[data-status="pending"]')
    page.clock.run_for(5_000)  # still waiting: not yet a verdict
    assert page.locator("#result").get_attribute("data-status") == "pending"
    page.clock.run_for(2_000)  # past the page's timeout
    page.wait_for_selector('#result[data-status="not_recorded"]', timeout=10_000)
    assert "Not recorded — scan again" in result.inner_text()
    assert page.locator("#recent li").first.get_attribute("data-status") == "not_recorded"
    page.screenshot(path=SHOTS / "desk-timeout-not-recorded.png", full_page=True)
    page.unroute_all(behavior="ignoreErrors")

    assert Registration.objects.get(pk=grace.pk).state == "open"
    scan(page, grace.barcode, "confirmed_registration")  # scanned again: recorded this time
    assert Registration.objects.get(pk=grace.pk).state == "done"
    page.close()
