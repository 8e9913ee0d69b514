"""The attendee's pages and the door in French and Dutch, in a real browser (Debian's chromium
driven by Playwright), desktop and mobile: the event page, an intake error, my-tickets and the
desk scanner. On every page: `<html lang>` says the language, nothing is wider than the
viewport, and no interface sentence is left in English. Screenshots go to
test-output/screenshots/lang-<lang>-<device>-<n>-<page>.png.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone, translation

from events.models import QuestionType, Registration
from tests.browser.test_attendee_browser import SHOTS, browser  # noqa: F401 - the fixture
from tests.events import factories
from tests.test_translations import _catalog, read_po

pytestmark = pytest.mark.slow
PASSWORD = "door-pw-for-tests"
DEVICES = [("desktop", (1280, 900)), ("mobile", (390, 844))]
TEXTS = {
    "fr": {
        "event": {
            "name": "Rencontre Python Bruxelles",
            "description": "Une soirée de présentations.",
            "venue": "La Grande Salle",
            "ticket_instructions": "Montrez le code QR à l'entrée.",
        },
        "ticket": "Entrée standard",
        "question": "Besoins alimentaires",
        "register": "S'inscrire",
        "bad_email": "n'est pas une adresse e-mail",
        "checked_in": "Entrée validée — bienvenue",
    },
    "nl": {
        "event": {
            "name": "Python-ontmoeting Brussel",
            "description": "Een avond vol lezingen.",
            "venue": "De Grote Zaal",
            "ticket_instructions": "Toon de QR-code aan de ingang.",
        },
        "ticket": "Standaardticket",
        "question": "Dieetwensen",
        "register": "Inschrijven",
        "bad_email": "is geen e-mailadres",
        "checked_in": "Ingecheckt — welkom",
    },
}


def english_sentences(lang: str) -> list[str]:
    """The interface's English sentences (two words or more) that `lang` says otherwise: none
    may be on a page shown in `lang`."""
    found = []
    for entry in read_po(_catalog(lang).read_text()):
        if entry.context == "date format" or not entry.msgid or "%(" in entry.msgid:
            continue
        words = entry.msgid.split()
        if len(words) >= 2 and entry.msgid not in entry.translations and "<" not in entry.msgid:
            found.append(entry.msgid)
    return found


def check_page(page, lang: str) -> None:
    assert page.locator("html").get_attribute("lang") == lang
    overflow = page.evaluate(
        "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
        " - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{overflow}px wider than the viewport"
    text = page.locator("body").inner_text()
    left = [sentence for sentence in english_sentences(lang) if sentence in text]
    assert left == []


@pytest.fixture
def world(transactional_db, monkeypatch):
    from django.core.cache import cache
    from django.db import connections

    cache.clear()
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    user = factories.UserFactory(username="door", password=PASSWORD)
    user.groups.add(Group.objects.get(name="Event desk"))
    begin = timezone.now().replace(microsecond=0) + timedelta(minutes=30)
    event = factories.EventFactory(
        name="Python Brussels Meetup",
        description="An evening of talks.",
        venue="The Great Hall",
        address="Rue de la Loi 16, 1000 Brussels",
        ticket_instructions="Show the QR code at the entrance.",
        date_begin=begin,
        date_end=begin + timedelta(hours=3),
        seats_limited=True,
        seats_max=40,
        organizer="Python Belgium",
        translations={lang: texts["event"] for lang, texts in TEXTS.items()},
    )
    factories.TicketFactory(
        event=event,
        name="Standard entry",
        translations={lang: {"name": texts["ticket"]} for lang, texts in TEXTS.items()},
    )
    factories.QuestionFactory(
        event=event,
        title="Dietary needs",
        question_type=QuestionType.TEXT_BOX,
        translations={lang: {"title": texts["question"]} for lang, texts in TEXTS.items()},
    )
    return event


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lang", ["fr", "nl"])
@pytest.mark.parametrize(("device", "viewport"), DEVICES)
def test_the_attendee_and_the_door_in_a_language(
    world,
    live_server,
    browser,  # noqa: F811
    lang,
    device,
    viewport,
):
    texts = TEXTS[lang]
    # The browser asks for the language (Accept-Language); no cookie, no choice made.
    context = browser.new_context(
        locale=f"{lang}-BE", viewport={"width": viewport[0], "height": viewport[1]}
    )
    page = context.new_page()
    shot = lambda n, name: page.screenshot(  # noqa: E731
        path=SHOTS / f"lang-{lang}-{device}-{n}-{name}.png", full_page=True
    )

    page.goto(f"{live_server.url}/events/{world.pk}/")
    assert page.locator("h1").inner_text() == texts["event"]["name"]
    assert texts["event"]["description"] in page.content()
    assert page.get_by_label(texts["ticket"]).is_checked()
    check_page(page, lang)
    shot(1, "event-page")

    with translation.override(lang):
        full_name, email = translation.gettext("Full name"), translation.gettext("Email")
    page.get_by_label(full_name).fill("Ada Lovelace")
    page.get_by_label(email, exact=True).fill("ada-at-example.org")
    page.get_by_role("button", name=texts["register"]).click()
    page.wait_for_load_state()
    error = page.locator("#f-a0-email-error")
    assert texts["bad_email"] in error.inner_text()
    check_page(page, lang)
    shot(2, "intake-error")
    assert Registration.objects.count() == 0

    page.get_by_label(email, exact=True).fill("ada@example.org")
    page.get_by_role("button", name=texts["register"]).click()
    page.wait_for_url("**/my-tickets/**")
    registration = Registration.objects.get()
    assert registration.lang == lang
    assert texts["event"]["ticket_instructions"] in page.content()
    check_page(page, lang)
    shot(3, "my-tickets")

    page.goto(f"{live_server.url}/desk/")
    page.wait_for_url("**/admin/login/**")
    page.fill("#id_username", "door")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/desk/")
    page.goto(f"{live_server.url}/desk/{world.pk}/")
    box = page.locator("#barcode")
    box.type(registration.barcode)
    box.press("Enter")
    page.wait_for_selector('#result[data-status="confirmed_registration"]', timeout=10_000)
    assert texts["checked_in"] in page.locator("#result").inner_text()
    check_page(page, lang)
    shot(4, "desk-scanner")
    context.close()


@pytest.mark.django_db(transaction=True)
def test_the_language_switcher_is_plain_links_and_is_remembered(world, live_server, browser):  # noqa: F811
    context = browser.new_context(locale="en-GB", java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/events/{world.pk}/")
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.locator("h1").inner_text() == "Python Brussels Meetup"

    # Each language named in itself.
    switcher = page.locator("nav.languages li").all_inner_texts()
    assert switcher == ["English", "Français", "Nederlands", "Deutsch"]
    page.get_by_role("link", name="Nederlands").click()
    page.wait_for_load_state()
    assert page.url == f"{live_server.url}/events/{world.pk}/?lang=nl"
    assert page.locator("h1").inner_text() == TEXTS["nl"]["event"]["name"]
    # Remembered: the next page (a plain URL, no parameter) is in Dutch too.
    page.goto(f"{live_server.url}/events/")
    assert page.locator("html").get_attribute("lang") == "nl"
    assert page.locator("h1").inner_text() == "Komende evenementen"
    assert page.locator("nav.languages li").all_inner_texts() == switcher
    context.close()
