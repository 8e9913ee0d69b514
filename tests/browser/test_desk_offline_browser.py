"""The desk's offline mode in a real browser (Debian's chromium, Playwright).

With the network cut (`context.set_offline`), scans are decided from the door list the page
fetched, shown marked "Offline" and queued; back online the queue is sent and the server's rows
match. Two doors admitting one ticket offline: one attendance, one conflict, shown on the page
that lost. Two tabs of one browser share the queue: a tab closed offline loses none of its
scans. A fresh door list keeps the queued admissions admitted. Screenshots of the offline
states, desktop and mobile, go to test-output/screenshots/desk-offline-*.png.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from desk.models import OfflineConflict
from events.models import EventAuditLog, Registration
from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture
from tests.browser.test_desk_browser import PASSWORD, scan, world  # noqa: F401 - the fixture
from tests.events import factories

pytestmark = pytest.mark.slow
DESKTOP, MOBILE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}


def open_scanner(browser, live_server, event, username: str, viewport=DESKTOP):  # noqa: F811
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.goto(f"{live_server.url}/desk/{event.pk}/")
    page.wait_for_url("**/admin/login/**")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**/desk/{event.pk}/")
    page.wait_for_selector('#list-age[data-age="fresh"]')  # the door list is in
    return context, page


def shot(page, name: str) -> None:
    page.screenshot(path=SHOTS / f"desk-offline-{name}.png", full_page=True)


@pytest.mark.django_db(transaction=True)
def test_offline_scans_are_decided_from_the_list_then_sent(world, live_server, browser):  # noqa: F811
    event, regs = world["event"], world["regs"]
    context, page = open_scanner(browser, live_server, event, "door")
    result, net = page.locator("#result"), page.locator("#net")
    expect(net).to_have_attribute("data-mode", "online")

    context.set_offline(True)
    expect(net).to_have_attribute("data-mode", "offline")
    scan(page, regs["grace"].barcode, "confirmed_registration")
    assert result.get_attribute("data-offline") == "true"
    assert result.locator('[data-flag="offline"]').text_content() == "Offline"
    assert "Grace Hopper" in result.inner_text() and "Community" in result.inner_text()
    assert "Decided offline from the door list" in result.inner_text()
    expect(page.locator("#count-attended")).to_have_text("1")
    shot(page, "desktop-1-admitted")
    scan(page, regs["grace"].barcode, "already_registered")  # this page's list knows it now
    scan(page, regs["cancelled"].barcode, "canceled_registration")
    scan(page, "0000000000000000", "invalid_ticket")
    expect(page.locator("#queue-count")).to_have_text("4")
    assert page.locator('#recent [data-flag="offline"]').count() == 4
    shot(page, "desktop-2-unknown-queued")
    page.set_viewport_size(MOBILE)
    scan(page, regs["ada"].barcode, "confirmed_registration")  # to pay: badge kept offline
    assert result.locator('[data-flag="to-pay"]').is_visible()
    shot(page, "mobile-1-admitted-to-pay")
    page.set_viewport_size(DESKTOP)
    # Nothing reached the server.
    assert Registration.objects.get(pk=regs["grace"].pk).state == "open"
    assert not EventAuditLog.objects.filter(verb="registration.scanned").exists()

    context.set_offline(False)
    expect(page.locator("#queue-count")).to_have_text("0", timeout=10_000)
    expect(net).to_have_attribute("data-mode", "online")
    expect(page.locator("#count-attended")).to_have_text("2")  # the server's counter
    assert Registration.objects.get(pk=regs["grace"].pk).state == "done"
    assert Registration.objects.get(pk=regs["ada"].pk).state == "done"
    rows = EventAuditLog.objects.filter(verb="registration.scanned").order_by("at", "id")
    assert [(r.data["status"], r.data["offline"]) for r in rows] == [
        ("confirmed_registration", True),
        ("already_registered", True),
        ("canceled_registration", True),
        ("invalid_ticket", True),
        ("confirmed_registration", True),
    ]
    assert not OfflineConflict.objects.exists()
    assert page.locator("#conflicts").is_hidden()
    shot(page, "desktop-3-back-online")
    context.close()


@pytest.mark.django_db(transaction=True)
def test_two_doors_admit_one_ticket_offline(world, live_server, browser):  # noqa: F811
    event, grace = world["event"], world["regs"]["grace"]
    west = factories.UserFactory(username="west", password=PASSWORD)
    west.groups.add(Group.objects.get(name="Event desk"))
    north, north_page = open_scanner(browser, live_server, event, "door")
    south, south_page = open_scanner(browser, live_server, event, "west", viewport=MOBILE)

    north.set_offline(True)
    south.set_offline(True)
    scan(north_page, grace.barcode, "confirmed_registration")
    scan(south_page, grace.barcode, "confirmed_registration")  # neither door knows
    shot(south_page, "mobile-2-admitted-queued")

    north.set_offline(False)
    expect(north_page.locator("#queue-count")).to_have_text("0", timeout=10_000)
    south.set_offline(False)
    expect(south_page.locator("#queue-count")).to_have_text("0", timeout=10_000)
    conflicts = south_page.locator("#conflicts")
    expect(conflicts).to_be_visible()
    assert "Grace Hopper" in conflicts.inner_text()
    assert "Already registered" in conflicts.inner_text()
    assert north_page.locator("#conflicts").is_hidden()
    shot(south_page, "mobile-3-conflict")
    south_page.set_viewport_size(DESKTOP)
    shot(south_page, "desktop-4-conflict")

    assert Registration.objects.get(pk=grace.pk).state == "done"
    admitted = EventAuditLog.objects.filter(
        registration=grace, data__status="confirmed_registration"
    )
    assert admitted.count() == 1
    (conflict,) = OfflineConflict.objects.all()
    assert (conflict.registration_id, conflict.server_status) == (grace.pk, "already_registered")
    assert (conflict.kept_actor_label, conflict.offline_actor_label) == ("door", "west")
    north.close()
    south.close()


@pytest.mark.django_db(transaction=True)
def test_two_tabs_of_one_door_keep_each_others_offline_scans(world, live_server, browser):  # noqa: F811
    """The queue is the browser's (localStorage), shared by every desk tab: a tab that queues a
    scan must not write back the queue as it last read it, dropping another tab's scans."""
    event, regs = world["event"], world["regs"]
    context, first = open_scanner(browser, live_server, event, "door")
    second = context.new_page()  # the same browser, the same login: a second tab
    second.goto(f"{live_server.url}/desk/{event.pk}/")
    second.wait_for_selector('#list-age[data-age="fresh"]')

    context.set_offline(True)
    scan(first, regs["grace"].barcode, "confirmed_registration")
    scan(second, regs["ada"].barcode, "confirmed_registration")
    expect(first.locator("#queue-count")).to_have_text("2")  # told of the other tab's scan
    expect(second.locator("#queue-count")).to_have_text("2")
    first.close()  # the tab that scanned Grace is gone before the network returns

    context.set_offline(False)
    expect(second.locator("#queue-count")).to_have_text("0", timeout=10_000)
    assert Registration.objects.get(pk=regs["grace"].pk).state == "done"
    assert Registration.objects.get(pk=regs["ada"].pk).state == "done"
    assert EventAuditLog.objects.filter(verb="registration.scanned").count() == 2
    context.close()


@pytest.mark.django_db(transaction=True)
def test_a_new_door_list_keeps_the_queued_admissions_admitted(world, live_server, browser):  # noqa: F811
    """A fresh list (a new hashing key, the server not told yet of the queued admission) still
    shows a ticket admitted offline as admitted: scanned again offline, it is not let in twice."""
    event, grace = world["event"], world["regs"]["grace"]
    context, page = open_scanner(browser, live_server, event, "door")
    list_key = f"desk.snapshot.{event.pk}"
    first_list = page.evaluate(f"() => JSON.parse(sessionStorage.getItem('{list_key}')).signature")

    context.set_offline(True)
    scan(page, grace.barcode, "confirmed_registration")
    # The network returns for the door list only: the queued scan cannot be sent yet.
    context.route("**/desk/api/scan", lambda route: route.abort())
    context.set_offline(False)
    page.wait_for_function(
        """([key, first]) => {
            const list = JSON.parse(sessionStorage.getItem(key) || "null");
            return list && list.signature !== first
                && list.registrations.some(r => r.name === "Grace Hopper" && r.state === "done");
        }""",
        arg=[list_key, first_list],
        timeout=10_000,
    )
    context.set_offline(True)
    scan(page, grace.barcode, "already_registered")

    context.unroute("**/desk/api/scan")
    context.set_offline(False)
    expect(page.locator("#queue-count")).to_have_text("0", timeout=15_000)
    assert Registration.objects.get(pk=grace.pk).state == "done"
    answers = EventAuditLog.objects.filter(registration=grace, verb="registration.scanned")
    assert sorted(a.data["status"] for a in answers) == [
        "already_registered",
        "confirmed_registration",
    ]
    assert not OfflineConflict.objects.exists()
    context.close()


def _desk_keys(page) -> dict[str, list[str]]:
    """The keys the desk keeps in this tab's storage (its own start with "desk.")."""
    return page.evaluate(
        """() => ({
            local: Object.keys(localStorage).filter(k => k.startsWith("desk.")).sort(),
            session: Object.keys(sessionStorage).filter(k => k.startsWith("desk.")).sort(),
        })"""
    )


@pytest.mark.django_db(transaction=True)
def test_logging_out_clears_the_door_list_and_asks_first_when_scans_wait(
    world,  # noqa: F811
    live_server,
    browser,  # noqa: F811
):
    event, grace = world["event"], world["regs"]["grace"]
    context, page = open_scanner(browser, live_server, event, "door")
    snapshot_key = f"desk.snapshot.{event.pk}"
    assert snapshot_key in _desk_keys(page)["session"]  # the door list, for this session only

    # A scan waits to be sent: logging out asks first, and "cancel" keeps everything.
    context.set_offline(True)
    scan(page, grace.barcode, "confirmed_registration")
    expect(page.locator("#queue-count")).to_have_text("1")
    asked: list[str] = []

    def cancel(dialog) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", cancel)
    page.click("#logout-form button")
    expect(page.locator("#queue-count")).to_have_text("1")
    assert asked and "not sent yet" in asked[0]
    assert page.url.endswith(f"/desk/{event.pk}/")
    kept = _desk_keys(page)
    assert "desk.queue" in kept["local"] and snapshot_key in kept["session"]

    # Sent, then logged out without a question: nothing of the desk is left in the browser.
    context.set_offline(False)
    expect(page.locator("#queue-count")).to_have_text("0", timeout=10_000)
    assert Registration.objects.get(pk=grace.pk).state == "done"
    page.on("dialog", lambda dialog: asked.append(dialog.message) or dialog.dismiss())
    page.click("#logout-form button")
    page.wait_for_url("**/admin/logout/")
    assert len(asked) == 1  # no second question
    assert _desk_keys(page) == {"local": [], "session": []}
    # And the session is gone: the list is not served to this browser any more.
    answer = context.request.get(f"{live_server.url}/desk/api/events/{event.pk}/snapshot")
    assert answer.status == 403
    assert "no-store" in answer.headers["cache-control"]
    context.close()
