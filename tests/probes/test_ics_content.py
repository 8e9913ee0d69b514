"""The .ics body (spec.md §7.2): parses with icalendar and vobject, stable UID free of personal
data, DTSTAMP, TZID with its VTIMEZONE, CRLF, folding at 75 octets, slot times, SEQUENCE."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, date, datetime, timedelta
from urllib.parse import urlsplit

import icalendar
import pytest
import vobject
from django.conf import settings
from django.core.cache import cache
from django.urls import reverse

from events.models import Event
from events.services import capability, events, registrations
from tests.events import factories

BRUSSELS = zoneinfo.ZoneInfo("Europe/Brussels")


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def fetch(client, registration) -> bytes:
    token = capability.mint(purpose="ics", subject=registration)
    response = client.get(reverse("ics", kwargs={"token": token}))
    assert response.status_code == 200
    return response.content


def vevent(body: bytes) -> icalendar.Event:
    cal = icalendar.Calendar.from_ical(body)
    (event,) = [c for c in cal.walk("VEVENT")]
    return event


@pytest.fixture
def registration():
    event = factories.EventFactory(
        name="Django Day",
        date_begin=datetime(2030, 6, 3, 7, 0, tzinfo=UTC),
        date_end=datetime(2030, 6, 3, 15, 30, tzinfo=UTC),
        date_tz="Europe/Brussels",
        venue="Main hall",
        address="Rue Haute 1\n1000 Brussels",
        ticket_instructions="Bring your ID.",
    )
    return factories.RegistrationFactory(
        event=event, name="Zoë Secret", email="zoe.secret@example.org", phone="+32470000000"
    )


@pytest.mark.django_db
def test_parses_with_icalendar_and_vobject_with_the_pinned_properties(client, registration):
    body = fetch(client, registration)
    cal = icalendar.Calendar.from_ical(body)
    assert str(cal["VERSION"]) == "2.0"
    assert str(cal["PRODID"]) == "-//backbone-events//attendee calendar//EN"
    assert str(cal["METHOD"]) == "PUBLISH"
    ev = vevent(body)
    assert str(ev["SUMMARY"]) == "Django Day"
    assert str(ev["LOCATION"]) == "Main hall, Rue Haute 1 1000 Brussels"
    assert str(ev["STATUS"]) == "CONFIRMED"
    assert str(ev["DESCRIPTION"]).startswith("Bring your ID.\n\nYour tickets: http")
    assert "/my-tickets/" in str(ev["URL"])
    assert ev.decoded("DTSTAMP").tzinfo is not None

    parsed = vobject.readOne(body.decode())
    assert parsed.vevent.summary.value == "Django Day"
    assert parsed.vevent.dtstart.value == datetime(2030, 6, 3, 9, 0, tzinfo=BRUSSELS)
    assert parsed.vevent.dtend.value == datetime(2030, 6, 3, 17, 30, tzinfo=BRUSSELS)
    assert parsed.vevent.uid.value == str(ev["UID"])


@pytest.mark.django_db
def test_uid_is_stable_and_holds_no_personal_data(client, registration):
    first, second = fetch(client, registration), fetch(client, registration)
    uid = str(vevent(first)["UID"])
    assert uid == str(vevent(second)["UID"])
    for personal in ("Zo", "Secret", "zoe", "example.org", "32470", registration.barcode):
        assert personal not in uid
    host = urlsplit(settings.EVENT_PUBLIC_URL).hostname
    assert uid == f"event-{registration.event_id}-registration-{registration.pk}@{host}"
    other = factories.RegistrationFactory(event=registration.event)
    assert str(vevent(fetch(client, other))["UID"]) != uid


@pytest.mark.django_db
def test_times_carry_the_tzid_of_a_matching_vtimezone(client, registration):
    body = fetch(client, registration)
    cal = icalendar.Calendar.from_ical(body)
    timezones = [str(tz["TZID"]) for tz in cal.walk("VTIMEZONE")]
    assert timezones == ["Europe/Brussels"]
    assert b"DTSTART;TZID=Europe/Brussels:20300603T090000\r\n" in body
    assert b"DTEND;TZID=Europe/Brussels:20300603T173000\r\n" in body
    assert b"DTSTAMP:" in body and b"Z\r\n" in body.split(b"DTSTAMP:")[1][:20]


@pytest.mark.django_db
def test_a_utc_event_uses_utc_times_and_no_vtimezone(client):
    event = factories.EventFactory(
        date_begin=datetime(2030, 1, 2, 10, 0, tzinfo=UTC),
        date_end=datetime(2030, 1, 2, 12, 0, tzinfo=UTC),
        date_tz="UTC",
    )
    body = fetch(client, factories.RegistrationFactory(event=event))
    assert b"BEGIN:VTIMEZONE" not in body
    assert b"DTSTART:20300102T100000Z\r\n" in body


@pytest.mark.django_db
def test_crlf_line_ends_and_folding_at_75_octets_with_a_multibyte_name(client):
    name = "Rencontre été 🎉 — " + "日本語のイベント名 " * 6
    event = factories.EventFactory(name=name, ticket_instructions="Ä" * 200)
    body = fetch(client, factories.RegistrationFactory(event=event))
    assert body.endswith(b"\r\n")
    assert b"\n" not in body.replace(b"\r\n", b"")
    lines = body.split(b"\r\n")[:-1]
    assert max(len(line) for line in lines) <= 75
    assert any(line.startswith(b" ") for line in lines), "long lines were folded"
    for line in lines:
        line.decode("utf-8")  # never split inside a character
    assert str(vevent(body)["SUMMARY"]) == name
    assert vobject.readOne(body.decode()).vevent.summary.value == name


@pytest.mark.django_db
def test_a_multi_slot_event_gives_the_slot_times(client, actor):
    event = factories.EventFactory(
        is_multi_slots=True,
        date_begin=datetime(2030, 6, 3, 6, 0, tzinfo=UTC),
        date_end=datetime(2030, 6, 5, 20, 0, tzinfo=UTC),
    )
    events.add_slot(event=event, date=date(2030, 6, 3), start_hour=9, end_hour=12, actor=actor)
    second = events.add_slot(
        event=event, date=date(2030, 6, 4), start_hour=14.5, end_hour=16, actor=actor
    )
    (reg,) = registrations.register(
        event=event, attendees=[{"name": "A"}], slot=second, actor=actor
    )
    body = fetch(client, reg)
    assert b"DTSTART;TZID=Europe/Brussels:20300604T143000\r\n" in body
    assert b"DTEND;TZID=Europe/Brussels:20300604T160000\r\n" in body
    ev = vevent(body)
    assert ev.decoded("DTSTART") == second.start_datetime


@pytest.mark.django_db
def test_sequence_is_bumped_by_a_date_change(client, registration, actor):
    before = vevent(fetch(client, registration))
    assert int(before["SEQUENCE"]) == 0
    event = Event.objects.get(pk=registration.event_id)
    events.update_event(
        event=event,
        date_begin=event.date_begin + timedelta(hours=1),
        date_end=event.date_end + timedelta(hours=1),
        actor=actor,
    )
    after = vevent(fetch(client, registration))
    assert int(after["SEQUENCE"]) == 1
    assert after.decoded("DTSTART") == before.decoded("DTSTART") + timedelta(hours=1)
    assert str(after["UID"]) == str(before["UID"])


@pytest.mark.django_db
def test_headers_name_the_file_after_the_event(client, registration):
    token = capability.mint(purpose="ics", subject=registration)
    response = client.get(reverse("ics", kwargs={"token": token}))
    assert response["Content-Disposition"] == 'attachment; filename="django-day.ics"'
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    assert response["Cache-Control"] == "private, no-store"
    assert response["Referrer-Policy"] == "no-referrer"
