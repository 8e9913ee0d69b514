"""`manage.py seed_demo` loads a demo that shows every part, and a second run changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command

from booths.models import TypeBooth
from events.management.commands.seed_demo import SOLD_OUT
from events.models import Event, EventType, Mail, Registration

pytestmark = pytest.mark.django_db


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed and not model._meta.proxy
    }


@pytest.fixture
def seeded(demo_data):
    """The demo, seeded once for the module (tests/conftest.py `demo_data`)."""


def test_a_second_run_changes_no_row_count(seeded):
    before = row_counts()
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert row_counts() == before
    assert before["events.Registration"] > 0
    assert out.getvalue().startswith("demo: event type 'Conference', events #")


def test_the_event_type_has_every_kind_of_template_line(seeded):
    event_type = EventType.objects.get(name="Conference")
    assert event_type.tickets.count() == 3
    assert event_type.questions.count() == 4
    assert event_type.questions.filter(question_type="simple_choice", choices__isnull=False)
    assert event_type.mails.count() == 3
    assert set(event_type.mails.values_list("notification_type", flat=True)) == {"mail", "sms"}
    assert TypeBooth.objects.filter(event_type=event_type).count() == 5
    assert event_type.tags.count() == 4


def test_two_events_one_multi_slot_and_the_template_applied(seeded):
    # (the third demo event, the sold-out one with a waiting list:
    # tests/events/waitlist/test_waitlist.py)
    events = list(Event.objects.exclude(name=SOLD_OUT).order_by("name"))
    assert [(e.name, e.is_multi_slots, e.is_published) for e in events] == [
        ("Hands-on Django Workshops", True, True),
        ("Open Source Summit", False, True),
    ]
    workshops, summit = events
    assert workshops.slots.count() == 3
    assert summit.event_type.name == "Conference"
    assert summit.tickets.count() == 3
    assert summit.questions.count() == 4
    # The event type's three lines, plus the sms overlay's confirmation SMS (sms/demo.py).
    assert sorted(
        Mail.objects.filter(event=summit).values_list("template_ref", "notification_type")
    ) == [
        ("event-reminder", "mail"),
        ("event-reminder-sms", "sms"),
        ("registration-confirmation", "mail"),
        ("registration-confirmation-sms", "sms"),
    ]
    assert Registration.objects.filter(event=workshops, slot__isnull=True).count() == 0


def test_registrations_in_every_state(seeded):
    states = set(Registration.objects.values_list("state", flat=True))
    assert states == {"draft", "open", "done", "cancel"}
    partner = Registration.objects.get(sale_order_ref="SO-2041")
    assert (partner.contact_source, partner.sale_status) == ("partner", "sold")


def test_the_seat_ledger_is_consistent_after_the_seed(seeded):
    out = StringIO()
    call_command("seats_audit", stdout=out)
    assert out.getvalue().strip() == "seats_audit: 3 event(s) consistent"


def test_the_summit_speaks_four_languages(seeded, client):
    """Its texts, tickets, questions, choices and mail templates in en (the columns), fr, nl
    and de; its attendees registered in several of them."""
    from events.management.commands.seed_demo import SUMMIT
    from events.models import MessageTemplate

    summit = Event.objects.get(name=SUMMIT)
    assert summit.lang == "en"
    assert set(summit.translations) == {"fr", "nl", "de"}
    for texts in summit.translations.values():
        assert set(texts) == {"name", "description", "venue", "ticket_instructions"}
    for ticket in summit.tickets.all():
        assert set(ticket.translations) == {"fr", "nl", "de"}
    for question in summit.questions.all():
        assert set(question.translations) == {"fr", "nl", "de"}
    refs = ("registration-confirmation", "event-reminder", "event-reminder-sms")
    for template in MessageTemplate.objects.filter(ref__in=refs):
        assert set(template.translations) == {"fr", "nl", "de"}
    assert set(summit.registrations.values_list("lang", flat=True)) == {"en", "fr", "nl", "de"}
    for lang, words in {
        "fr": ("Sommet de l&#x27;open source", "Communauté", "Comment avez-vous entendu"),
        "nl": ("Opensourcetop", "Gemeenschap", "Hoe hebt u over ons gehoord?"),
        "de": ("Open-Source-Gipfel", "Gemeinschaft", "Wie haben Sie von uns erfahren?"),
    }.items():
        page = client.get(f"/events/{summit.pk}/?lang={lang}").content.decode()
        for word in words:
            assert word in page, (lang, word)
