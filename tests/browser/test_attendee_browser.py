"""The public funnel in a real browser: Debian's chromium driven by Playwright.

Open the event list, open an event, submit the form with a mistake (the error is shown next to
its field, with aria-invalid and aria-describedby), fix it, land on my-tickets and see the QR
code. Screenshots go to test-output/screenshots/.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from events.models import QuestionType, Registration
from tests.events import factories

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module (a launch costs ~1.5 s of CPU; each test opens its own
    pages, so nothing of one test's pages is seen by the next)."""
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are
    # plain synchronous code between browser steps.
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (as root)")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from django.db import connections
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield instance
        finally:
            # ORM calls made while Playwright's loop runs get their own connection (Django's
            # connections are context-local): close them here, in that context.
            connections.close_all()
            instance.close()
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def event(transactional_db, monkeypatch):
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
        address="Rue de la Loi 16, Brussels",
        description="An evening of talks about Python and Django.\nPizza included.",
        ticket_instructions="Show the QR code at the entrance.",
        seats_limited=True,
        seats_max=40,
    )
    event.tags.add(factories.TagFactory(name="Community", color=4))
    event.tags.add(factories.TagFactory(name="internal-only", color=0))
    factories.TicketFactory(event=event, name="Standard", description="Talks and pizza")
    factories.TicketFactory(event=event, name="Supporter", price="25.00")
    factories.QuestionFactory(
        event=event,
        title="Dietary needs",
        question_type=QuestionType.TEXT_BOX,
        is_mandatory_answer=True,
    )
    shirt = factories.QuestionFactory(
        event=event, title="T-shirt size", question_type=QuestionType.SIMPLE_CHOICE
    )
    for size in ("S", "M", "L"):
        factories.QuestionChoiceFactory(question=shirt, name=size)
    return event


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("device", "viewport"), [("mobile", (390, 844)), ("desktop", (1280, 900))])
def test_register_in_a_real_browser(event, live_server, browser, device, viewport):
    page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
    page.goto(f"{live_server.url}/events/")
    assert page.locator("h1").inner_text() == "Upcoming events"
    assert page.locator(".tag").all_inner_texts() == ["Community"]
    page.screenshot(path=SHOTS / f"{device}-1-event-list.png", full_page=True)

    page.get_by_role("link", name="Python Brussels Meetup").click()
    page.wait_for_url(f"**/events/{event.pk}/")
    assert page.get_by_label("Standard").is_checked()
    assert page.get_by_label("Supporter").is_disabled()  # priced: sold by the host
    page.screenshot(path=SHOTS / f"{device}-2-event-page.png", full_page=True)

    # A mistake: the error is shown next to the email field.
    page.get_by_label("Full name").fill("Ada Lovelace")
    page.get_by_label("Email").fill("ada-at-example.org")
    page.get_by_label("Full name").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "f-a0-email"
    page.get_by_role("button", name="Register").click()
    page.wait_for_load_state()
    email = page.locator("#f-a0-email")
    assert email.get_attribute("aria-invalid") == "true"
    assert email.get_attribute("aria-describedby") == "f-a0-email-error"
    error = page.locator("#f-a0-email-error")
    assert error.is_visible()
    assert "is not an email address" in error.inner_text()
    # … right after the field, and the typed values are kept.
    assert (
        page.evaluate("document.getElementById('f-a0-email').nextElementSibling.id")
        == "f-a0-email-error"
    )
    assert page.get_by_label("Full name").input_value() == "Ada Lovelace"
    assert page.get_by_role("alert").is_visible()
    page.screenshot(path=SHOTS / f"{device}-3-validation-error.png", full_page=True)
    assert Registration.objects.count() == 0

    page.get_by_label("Email").fill("ada@example.org")
    page.get_by_label("Dietary needs").fill("Vegetarian")
    page.get_by_label("M", exact=True).check()
    page.get_by_role("button", name="Register").click()
    page.wait_for_url("**/my-tickets/**")

    reg = Registration.objects.get()
    assert (reg.name, reg.email, reg.state) == ("Ada Lovelace", "ada@example.org", "open")
    qr = page.locator(".qr svg")
    assert qr.is_visible()
    assert qr.get_attribute("role") == "img"
    assert page.locator(".barcode").inner_text() == reg.barcode
    assert "Show the QR code at the entrance." in page.content()
    assert (
        page.get_by_role("link", name="Add to calendar (.ics)")
        .get_attribute("href")
        .startswith("/ics/")
    )
    page.screenshot(path=SHOTS / f"{device}-4-my-tickets.png", full_page=True)
    page.close()
