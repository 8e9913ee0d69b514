"""The attendee's language is kept (docs/spec.md "Languages"): a registration made in French,
Dutch or German gets its confirmation, reminder, SMS and calendar file in that language, while
the process that renders them runs in another one; the seam's `lang` and the French page's
registration keep theirs through a later scheduler pass."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone, translation

from events.models import MailOutbox, Registration, WaitlistEntry
from events.read import ics
from events.services import registrations, scheduler, waitlist
from sms.models import SmsOutbox
from tests.events import factories
from tests.seams.host import Host, new_secret, order_message, ticket_line
from tests.sms.gateway import wire

pytestmark = pytest.mark.django_db

BEGIN = datetime(2031, 6, 16, 8, 0, tzinfo=UTC)  # Monday 16 June 2031, 10:00 in Brussels
# Another language for the process that renders: never the attendee's.
OTHER = {"fr": "de", "nl": "fr", "de": "nl", "en": "fr"}

EVENT = {
    "fr": {"name": "Nuit du code", "ticket_instructions": "Apportez votre pièce d'identité."},
    "nl": {"name": "Codenacht", "ticket_instructions": "Breng uw identiteitskaart mee."},
    "de": {"name": "Codenacht Brüssel", "ticket_instructions": "Bringen Sie Ihren Ausweis mit."},
}
TICKET = {"fr": {"name": "Entrée"}, "nl": {"name": "Toegang"}, "de": {"name": "Eintritt"}}
CONFIRMATION = {
    "fr": {
        "subject": "Inscription confirmée : {{ event.name }}",
        "body": "<p>Bonjour {{ registration.name }}, à {{ event_begin }} ({{ ticket.name }}).</p>",
    },
    "nl": {
        "subject": "Inschrijving bevestigd: {{ event.name }}",
        "body": "<p>Beste {{ registration.name }}, tot {{ event_begin }} ({{ ticket.name }}).</p>",
    },
    "de": {
        "subject": "Anmeldung bestätigt: {{ event.name }}",
        "body": "<p>Guten Tag {{ registration.name }}, bis {{ event_begin }} "
        "({{ ticket.name }}).</p>",
    },
}
REMINDER = {
    "fr": {
        "subject": "Rappel : {{ event.name }}",
        "body": "<p>C'est demain : {{ event_begin }}.</p>",
    },
    "nl": {
        "subject": "Herinnering: {{ event.name }}",
        "body": "<p>Het is morgen: {{ event_begin }}.</p>",
    },
    "de": {
        "subject": "Erinnerung: {{ event.name }}",
        "body": "<p>Es ist morgen: {{ event_begin }}.</p>",
    },
}
SMS = {
    "fr": {"body": "{{ event.name }} commence le {{ event_begin }}."},
    "nl": {"body": "{{ event.name }} begint op {{ event_begin }}."},
    "de": {"body": "{{ event.name }} beginnt am {{ event_begin }}."},
}
# How each language writes the event's start (Django's month and day names, the catalog's order).
WHEN = {
    "en": "Monday 16 June 2031, 10:00 (Europe/Brussels)",
    "fr": "lundi 16 juin 2031, 10:00 (Europe/Brussels)",
    "nl": "maandag 16 juni 2031, 10:00 (Europe/Brussels)",
    "de": "Montag, 16. Juni 2031, 10:00 (Europe/Brussels)",
}
TICKETS_LINE = {
    "en": "Your tickets:",
    "fr": "Vos billets\u00a0:",
    "nl": "Uw tickets:",
    "de": "Ihre Tickets:",
}


def by_language(table: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {lang: dict(texts) for lang, texts in table.items()}


@pytest.fixture
def event(settings, httpserver, actor):
    """An event written in English with its texts in fr, nl and de; a confirmation mail, a
    reminder and an SMS reminder whose templates have the three languages too."""
    wire(settings, httpserver)
    event = factories.EventFactory(
        name="Code night",
        ticket_instructions="Bring your ID.",
        date_begin=BEGIN,
        date_end=BEGIN + timedelta(hours=4),
        lang="en",
        translations=by_language(EVENT),
    )
    factories.TicketFactory(event=event, name="Entry", translations=by_language(TICKET))
    factories.MessageTemplateFactory(
        ref="confirmation",
        subject="Registered: {{ event.name }}",
        body="<p>Hello {{ registration.name }}, see you on {{ event_begin }} "
        "({{ ticket.name }}).</p>",
        translations=by_language(CONFIRMATION),
    )
    factories.MessageTemplateFactory(
        ref="reminder",
        subject="Reminder: {{ event.name }}",
        body="<p>It is tomorrow: {{ event_begin }}.</p>",
        translations=by_language(REMINDER),
    )
    factories.MessageTemplateFactory(
        ref="reminder-sms",
        channel="sms",
        subject="",
        body="{{ event.name }} starts on {{ event_begin }}.",
        translations=by_language(SMS),
    )
    for ref, kind, when, unit in (
        ("confirmation", "mail", "after_sub", "now"),
        ("reminder", "mail", "before_event", "days"),
        ("reminder-sms", "sms", "before_event", "days"),
    ):
        scheduler.add_scheduler(
            event=event,
            interval_nbr=0 if unit == "now" else 1,
            interval_unit=unit,
            interval_type=when,
            template_ref=ref,
            notification_type=kind,
            actor=actor,
        )
    return event


def register_on_the_page(client, event, **headers) -> Registration:
    """The event page's form, posted as a browser does (the page's hidden fields included)."""
    page = client.get(f"/events/{event.pk}/", **headers).content.decode()
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    ticket = re.search(r'name="ticket" value="(\d+)"', page).group(1)
    response = client.post(
        f"/events/{event.pk}/",
        {
            **fields,
            "ticket": ticket,
            "a0-name": "Camille",
            "a0-email": "camille@example.org",
            "a0-phone": "0470 12 34 56",
        },
        **headers,
    )
    assert response.status_code == 303, response.content[:2000]
    return Registration.objects.get(email="camille@example.org")


def messages_in(lang: str, registration: Registration) -> dict[str, str]:
    """The confirmation, the reminder and the SMS of `registration`, rendered by scheduler
    passes while the process runs in another language; and its calendar file."""
    with translation.override(OTHER[lang]):
        scheduler.run_pass(now=timezone.now() + timedelta(minutes=1))
        confirmation = MailOutbox.objects.get(registration=registration)
        scheduler.run_pass(now=BEGIN - timedelta(hours=20))
        reminder = (
            MailOutbox.objects.filter(registration=registration).exclude(pk=confirmation.pk).get()
        )
        sms = SmsOutbox.objects.get(registration=registration)
        registration = Registration.objects.select_related("event", "slot").get(pk=registration.pk)
        calendar = ics.calendar(registration=registration).decode()
    unfolded = calendar.replace("\r\n ", "")
    return {
        "confirmation": f"{confirmation.subject}\n{confirmation.body_text}",
        "reminder": f"{reminder.subject}\n{reminder.body_text}",
        "sms": sms.body,
        "ics": unfolded,
    }


@pytest.mark.parametrize("lang", ["fr", "nl", "de"])
def test_the_intake_in_a_language_sends_every_message_in_it(client, event, lang):
    registration = register_on_the_page(client, event, HTTP_ACCEPT_LANGUAGE=f"{lang},en;q=0.5")
    assert registration.lang == lang

    got = messages_in(lang, registration)

    name = EVENT[lang]["name"]

    def filled(text: str) -> str:
        for key, value in {
            "{{ event.name }}": name,
            "{{ registration.name }}": "Camille",
            "{{ event_begin }}": WHEN[lang],
            "{{ ticket.name }}": TICKET[lang]["name"],
        }.items():
            text = text.replace(key, value)
        return text.removeprefix("<p>").removesuffix("</p>")

    for kind, template in (("confirmation", CONFIRMATION), ("reminder", REMINDER)):
        subject, body = template[lang]["subject"], template[lang]["body"]
        assert got[kind] == f"{filled(subject)}\n{filled(body)}"
    assert got["sms"] == filled(SMS[lang]["body"])
    assert f"SUMMARY:{name}\r\n" in got["ics"]
    assert f"DESCRIPTION:{EVENT[lang]['ticket_instructions']}" in got["ics"].replace("\\", "")
    assert TICKETS_LINE[lang] in got["ics"]
    for english in ("Code night", "Registered", "Reminder", "Monday", "June", "Your tickets"):
        assert english not in "\n".join(got.values())


def test_the_json_intake_keeps_the_body_lang_over_the_request_language(client, event):
    response = client.post(
        f"/api/v1/events/{event.pk}/registrations",
        {
            "ticket_id": event.tickets.get().pk,
            "lang": "nl",
            "attendees": [{"name": "Jan", "email": "jan@example.org", "phone": "0470 11 22 33"}],
        },
        content_type="application/json",
        HTTP_ACCEPT_LANGUAGE="fr",
    )
    assert response.status_code == 201
    registration = Registration.objects.get(email="jan@example.org")
    assert registration.lang == "nl"
    assert messages_in("nl", registration)["sms"].startswith("Codenacht begint op maandag")


def test_without_a_language_the_registration_takes_the_events_default(client, event):
    event.lang = "de"
    event.save(update_fields=["lang"])
    response = client.post(
        f"/api/v1/events/{event.pk}/registrations",
        {
            "ticket_id": event.tickets.get().pk,
            "attendees": [{"name": "Uta", "email": "u@example.org"}],
        },
        content_type="application/json",
    )
    assert response.status_code == 201
    assert Registration.objects.get(email="u@example.org").lang == "de"


def test_an_unknown_lang_is_refused_with_a_stable_code_and_a_translated_message(client, event):
    response = client.post(
        f"/api/v1/events/{event.pk}/registrations",
        {"ticket_id": event.tickets.get().pk, "lang": "es", "attendees": [{"name": "Ana"}]},
        content_type="application/json",
        HTTP_ACCEPT_LANGUAGE="de",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_value", "lang")
    assert error["message"] == "lang muss einer dieser Werte sein: en, fr, nl, de."
    assert not Registration.objects.exists()


def test_a_refusal_message_follows_the_request_language_its_code_does_not(client, event):
    answers = {
        lang: client.post(
            f"/api/v1/events/{event.pk}/registrations",
            {"ticket_id": event.tickets.get().pk, "attendees": []},
            content_type="application/json",
            HTTP_ACCEPT_LANGUAGE=lang,
        ).json()["error"]
        for lang in ("en", "fr", "nl", "de")
    }
    assert {error["code"] for error in answers.values()} == {"invalid_quantity"}
    assert len({error["message"] for error in answers.values()}) == 4
    assert answers["fr"]["message"] == "Inscrivez entre 1 et 30 participants à la fois."


def test_the_seams_lang_and_the_french_pages_registration_keep_their_language_through_a_pass(
    client, event, settings
):
    # The host's order message says the attendee reads Dutch.
    settings.EVENT_SEAM_SECRET = secret = new_secret()
    ticket = event.tickets.get()
    message = order_message(
        lines=[ticket_line(ticket, 1, attendees=[{"name": "Joke", "email": "joke@example.org"}])],
        amount_total="0.00",
    )
    message["data"]["order"]["lang"] = "nl"
    assert Host(secret).post(message).status_code == 200
    from_the_seam = Registration.objects.get(email="joke@example.org")
    # A visitor switches the page to French (no Accept-Language at all) and registers there.
    client.get(f"/events/{event.pk}/?lang=fr")
    on_the_french_page = register_on_the_page(client, event)
    assert (from_the_seam.lang, on_the_french_page.lang) == ("nl", "fr")

    with translation.override("de"):  # the worker's language
        scheduler.run_pass(now=timezone.now() + timedelta(minutes=1))

    seam_mail = MailOutbox.objects.get(registration=from_the_seam)
    page_mail = MailOutbox.objects.get(registration=on_the_french_page)
    assert seam_mail.subject == "Inschrijving bevestigd: Codenacht"
    assert WHEN["nl"] in seam_mail.body_text
    assert page_mail.subject == "Inscription confirmée : Nuit du code"
    assert WHEN["fr"] in page_mail.body_text


def test_a_seam_message_with_an_unknown_lang_is_malformed(event, settings):
    settings.EVENT_SEAM_SECRET = secret = new_secret()
    message = order_message(lines=[ticket_line(event.tickets.get(), 1)], amount_total="0.00")
    message["data"]["order"]["lang"] = "EN"
    response = Host(secret).post(message)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_message"
    assert not Registration.objects.exists()


def test_a_waiting_list_offer_goes_out_in_the_entrys_language_and_the_seat_keeps_it(
    client, event, actor
):
    event.seats_limited, event.seats_max = True, 1
    event.save(update_fields=["seats_limited", "seats_max"])
    holder = factories.RegistrationFactory(event=event, ticket=event.tickets.get())
    response = client.post(
        f"/api/v1/events/{event.pk}/waitlist",
        {"ticket_id": event.tickets.get().pk, "name": "Lotte", "email": "lotte@example.org"},
        content_type="application/json",
        HTTP_ACCEPT_LANGUAGE="nl-BE,nl;q=0.9",
    )
    assert response.status_code == 201, response.content
    entry = WaitlistEntry.objects.get(email="lotte@example.org")
    assert entry.lang == "nl"

    registrations.cancel(registration=holder, actor=actor)  # a seat frees up
    with translation.override("fr"):
        waitlist.offer_now(entry=entry, actor=actor)
    offer = MailOutbox.objects.get(recipient="lotte@example.org")
    assert offer.subject == "Er is een plaats vrij voor u: Codenacht"
    assert "Beste Lotte," in offer.body_text
    assert "maandag 16 juni 2031" in offer.body_text
