"""The /ics calendar cache (events.read.ics): calendar clients poll, so a repeat is cheap.

A repeated request is answered from the cache (this process's entries, else the shared Redis
cache): one statement (the gates' read, which also carries everything the file shows) and no
rendering. Whatever the file shows is part of the key, so a change made by a service or behind
the services' back is served at once; a cancelled calendar is never served from (nor written
to) the cache; a revoked, archived or draft link is refused before the cache is consulted; a
cache fault costs a render, never an answer; a connection dropped between requests is replaced
by the one statement itself (no `SELECT 1` first). Each test has its own redis-server
(`own_redis`): no other test's `cache.clear()` interferes.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime, timedelta
from unittest import mock

import pytest
import redis
from django.db import connection, connections
from django.test import override_settings
from django.urls import reverse

from events.models import Event, Registration, Slot
from events.read import ics, selectors
from events.services import capability, events, registrations
from tests.events import factories
from tests.helpers import terminate_backend

STAMP = re.compile(rb"\r\nDTSTAMP:\d{8}T\d{6}Z\r\n")
ICS_LOGGER = "events.read.ics"


@pytest.fixture(autouse=True)
def no_local_entries():
    """Each test starts with this process's entries empty (as a fresh worker would)."""
    ics._local.clear()
    yield
    ics._local.clear()


@pytest.fixture(autouse=True)
def redis_stats(own_redis):
    """The test's own Redis; `redis_stats()` counts the GET and SET commands it has served."""
    client = redis.Redis(port=own_redis.port)

    def stats() -> dict[str, int]:
        info = client.info("commandstats")
        return {cmd: info.get(f"cmdstat_{cmd}", {}).get("calls", 0) for cmd in ("get", "set")}

    yield stats
    client.close()


@pytest.fixture
def renders(monkeypatch) -> list[ics.CalendarData]:
    """Every calendar rendered (a cache hit renders nothing)."""
    calls: list[ics.CalendarData] = []
    real = ics._render

    def counting(data: ics.CalendarData) -> bytes:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(ics, "_render", counting)
    return calls


@pytest.fixture
def registration() -> Registration:
    event = factories.EventFactory(
        name="Django Day",
        date_begin=datetime(2030, 6, 3, 7, 0, tzinfo=UTC),
        date_end=datetime(2030, 6, 3, 15, 30, tzinfo=UTC),
        date_tz="Europe/Brussels",
        venue="Main hall",
        address="Rue Haute 1\n1000 Brussels",
        ticket_instructions="Bring your ID.",
    )
    return factories.RegistrationFactory(event=event)


def ics_path(registration: Registration) -> str:
    return reverse("ics", kwargs={"token": capability.mint(purpose="ics", subject=registration)})


def fetch(client, registration: Registration, path: str | None = None):
    response = client.get(path or ics_path(registration))
    assert response.status_code == 200
    return response


def unstamped(body: bytes) -> bytes:
    assert len(STAMP.findall(body)) == 1
    return STAMP.sub(b"\r\nDTSTAMP:-\r\n", body)


def fresh(registration: Registration) -> bytes:
    """The calendar rendered from the database as it is now, bypassing the cache."""
    current = selectors.calendar_registration(registration_id=registration.pk)
    return unstamped(ics.calendar(registration=current))


# --- hits ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_repeated_request_is_one_statement_and_no_render(
    client, registration, renders, redis_stats, django_assert_num_queries
):
    path = ics_path(registration)
    before = redis_stats()
    with django_assert_num_queries(1):  # the miss: the gates' read carries the calendar's columns
        first = fetch(client, registration, path)
    after_miss = redis_stats()
    assert len(renders) == 1
    assert after_miss == {"get": before["get"] + 1, "set": before["set"] + 1}

    with django_assert_num_queries(1):  # the hit: the same one statement, then the local entry
        second = fetch(client, registration, path)
    assert len(renders) == 1
    assert redis_stats() == after_miss  # not even a round trip to Redis

    ics._local.clear()  # another worker: its own entries are empty, Redis has the file
    with django_assert_num_queries(1):
        third = fetch(client, registration, path)
    assert len(renders) == 1
    assert redis_stats() == {"get": after_miss["get"] + 1, "set": after_miss["set"]}

    assert unstamped(third.content) == unstamped(second.content) == unstamped(first.content)
    assert unstamped(first.content) == fresh(registration)
    for response in (first, second, third):
        assert response["Content-Disposition"] == 'attachment; filename="django-day.ics"'
        assert response["Content-Type"] == "text/calendar; charset=utf-8"
        assert response["Cache-Control"] == "private, no-store"
        assert response["Referrer-Policy"] == "no-referrer"


@pytest.mark.django_db
def test_a_multi_slot_registration_is_one_statement_too(
    client, actor, renders, django_assert_num_queries
):
    event = factories.EventFactory(
        is_multi_slots=True,
        date_begin=datetime(2030, 6, 3, 6, 0, tzinfo=UTC),
        date_end=datetime(2030, 6, 5, 20, 0, tzinfo=UTC),
    )
    slot = events.add_slot(
        event=event, date=date(2030, 6, 4), start_hour=14.5, end_hour=16, actor=actor
    )
    (reg,) = registrations.register(event=event, attendees=[{"name": "A"}], slot=slot, actor=actor)
    path = ics_path(reg)
    for _ in range(2):
        with django_assert_num_queries(1):
            body = fetch(client, reg, path).content
        assert b"DTSTART;TZID=Europe/Brussels:20300604T143000\r\n" in body
    assert len(renders) == 1


@pytest.mark.django_db
def test_a_cached_file_is_byte_for_byte_a_fresh_render_with_its_own_dtstamp(registration, renders):
    current = selectors.calendar_registration(registration_id=registration.pk)
    first_now = datetime(2030, 1, 1, 8, 0, 1, tzinfo=UTC)
    later = datetime(2030, 2, 3, 9, 10, 11, 999_999, tzinfo=UTC)

    first = ics.calendar_file(registration=current, now=first_now)
    cached = ics.calendar_file(registration=current, now=later)

    assert len(renders) == 1
    assert b"\r\nDTSTAMP:20300101T080001Z\r\n" in first.body
    assert b"\r\nDTSTAMP:20300203T091011Z\r\n" in cached.body
    assert cached.body == ics.calendar(registration=current, now=later)
    assert cached.filename == first.filename == "django-day.ics"


# --- what the file shows is the key --------------------------------------------------------------


CHANGES = {
    "name": ({"name": "Django Night"}, [b"SUMMARY:Django Night\r\n"]),
    "dates": (
        {
            "date_begin": datetime(2030, 6, 4, 7, 0, tzinfo=UTC),
            "date_end": datetime(2030, 6, 4, 15, 30, tzinfo=UTC),
        },
        [b"DTSTART;TZID=Europe/Brussels:20300604T090000\r\n", b"SEQUENCE:1\r\n"],
    ),
    "time zone": ({"date_tz": "America/New_York"}, [b"DTSTART;TZID=America/New_York:"]),
    "venue": ({"venue": "Small hall"}, [b"LOCATION:Small hall\\, Rue Haute 1 1000 Brussels\r\n"]),
    "address": ({"address": "Rue Basse 2"}, [b"LOCATION:Main hall\\, Rue Basse 2\r\n"]),
    "instructions": ({"ticket_instructions": "Bring a pen."}, [b"DESCRIPTION:Bring a pen."]),
}


@pytest.mark.django_db
@pytest.mark.parametrize(("fields", "shown"), CHANGES.values(), ids=CHANGES.keys())
def test_an_event_change_is_served_at_once(client, registration, actor, renders, fields, shown):
    path = ics_path(registration)
    before = fetch(client, registration, path).content
    fetch(client, registration, path)
    assert len(renders) == 1  # warm

    events.update_event(event=Event.objects.get(pk=registration.event_id), actor=actor, **fields)
    after = fetch(client, registration, path).content

    assert len(renders) == 2
    assert unstamped(after) == fresh(registration) != unstamped(before)
    for line in shown:
        assert line in after


@pytest.mark.django_db
def test_a_new_name_renames_the_file(client, registration, actor):
    path = ics_path(registration)
    assert fetch(client, registration, path)["Content-Disposition"].endswith('"django-day.ics"')
    events.update_event(event=registration.event, name="PyCon Night", actor=actor)
    assert fetch(client, registration, path)["Content-Disposition"].endswith('"pycon-night.ics"')


@pytest.mark.django_db
def test_a_write_behind_the_services_back_is_served_at_once(client, actor, renders):
    """QuerySet.update touches neither updated_at nor ics_sequence: the key is the content."""
    event = factories.EventFactory(
        is_multi_slots=True,
        date_begin=datetime(2030, 6, 3, 6, 0, tzinfo=UTC),
        date_end=datetime(2030, 6, 5, 20, 0, tzinfo=UTC),
    )
    slot = events.add_slot(
        event=event, date=date(2030, 6, 4), start_hour=9, end_hour=12, actor=actor
    )
    (reg,) = registrations.register(event=event, attendees=[{"name": "A"}], slot=slot, actor=actor)
    path = ics_path(reg)
    fetch(client, reg, path)

    Event.objects.filter(pk=event.pk).update(name="Renamed quietly")
    assert b"SUMMARY:Renamed quietly\r\n" in fetch(client, reg, path).content

    Slot.objects.filter(pk=slot.pk).update(
        start_datetime=slot.start_datetime + timedelta(hours=1),
        end_datetime=slot.end_datetime + timedelta(hours=1),
    )
    body = fetch(client, reg, path).content
    assert len(renders) == 3
    assert b"DTSTART;TZID=Europe/Brussels:20300604T100000\r\n" in body
    assert unstamped(body) == fresh(reg)


@pytest.mark.django_db
def test_the_public_url_and_the_capability_secret_are_part_of_the_key(client, registration):
    path = ics_path(registration)
    before = fetch(client, registration, path).content
    with override_settings(EVENT_PUBLIC_URL="https://tickets.example.com"):
        moved = fetch(client, registration, path).content
    assert b"URL:https://tickets.example.com/my-tickets/" in moved
    assert b"@tickets.example.com\r\n" in moved  # the UID's host

    with override_settings(EVENT_CAPABILITY_SECRET="another-capability-secret-" + "z" * 32):
        new_secret = fetch(client, registration, ics_path(registration)).content
        tickets = capability.mint(purpose="tickets", subject=registration)
    assert tickets.encode() in new_secret.replace(b"\r\n ", b"")
    assert unstamped(new_secret) != unstamped(before)


# --- cancelled, revoked, archived, draft ---------------------------------------------------------


@pytest.mark.django_db
def test_a_cancelled_registration_is_never_served_from_nor_stored_in_the_cache(
    client, registration, actor, renders, redis_stats
):
    path = ics_path(registration)
    fetch(client, registration, path)
    fetch(client, registration, path)  # CONFIRMED, cached
    registrations.cancel(registration=registration, actor=actor)

    before = redis_stats()
    bodies = [fetch(client, registration, path).content for _ in range(2)]

    assert len(renders) == 3  # each cancelled answer was rendered
    assert redis_stats() == before  # the cache was neither read nor written
    for body in bodies:
        assert b"STATUS:CANCELLED\r\n" in body
        assert b"STATUS:CONFIRMED" not in body
        assert unstamped(body) == fresh(registration)


@pytest.mark.django_db
def test_a_cancelled_event_is_never_served_from_nor_stored_in_the_cache(
    client, registration, actor, renders, redis_stats
):
    path = ics_path(registration)
    fetch(client, registration, path)
    events.cancel_event(event=registration.event, actor=actor)

    before = redis_stats()
    bodies = [fetch(client, registration, path).content for _ in range(2)]

    assert len(renders) == 3
    assert redis_stats() == before
    assert all(b"STATUS:CANCELLED\r\n" in body for body in bodies)


@pytest.mark.django_db
def test_a_revoked_link_is_refused_before_the_cache_and_the_new_one_shows_the_new_links(
    client, registration, actor, renders, redis_stats
):
    old_path = ics_path(registration)
    old_tickets = capability.mint(purpose="tickets", subject=registration)
    assert old_tickets.encode() in fetch(client, registration, old_path).content.replace(
        b"\r\n ", b""
    )

    revoked = capability.revoke_links(registration=registration, actor=actor)
    before = redis_stats()
    assert client.get(old_path).status_code == 404
    assert redis_stats() == before

    body = fetch(client, revoked, ics_path(revoked)).content.replace(b"\r\n ", b"")
    assert capability.mint(purpose="tickets", subject=revoked).encode() in body
    assert old_tickets.encode() not in body
    assert len(renders) == 2


def _archived(registration, actor):
    registrations.cancel(registration=registration, actor=actor)
    registrations.archive(registration=registration, actor=actor)


def _draft(registration, actor):
    registrations.reset_to_draft(registration=registration, actor=actor)


@pytest.mark.django_db
@pytest.mark.parametrize("change", [_archived, _draft], ids=["archived", "draft"])
def test_an_archived_or_draft_registration_is_refused_before_the_cache(
    client, registration, actor, redis_stats, change
):
    path = ics_path(registration)
    fetch(client, registration, path)
    change(registration, actor)
    before = redis_stats()
    response = client.get(path)
    assert response.status_code == 404
    assert response.content == b"Not found.\n"
    assert redis_stats() == before


# --- the one statement's connection -------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_connection_dropped_since_the_last_request_is_replaced_without_a_select_1(
    client, registration
):
    """CONN_HEALTH_CHECKS would send `SELECT 1` before the request's first statement; /ics
    lets its one statement find a dropped connection, replaces it and reads again."""
    path = ics_path(registration)
    fetch(client, registration, path)
    dropped = connection.connection.info.backend_pid
    terminate_backend(dropped)
    connection.health_check_done = False  # a new request, as request_started leaves it
    wrapper = connections["default"]
    with mock.patch.object(wrapper, "is_usable", wraps=wrapper.is_usable) as is_usable:
        body = fetch(client, registration, path).content
    assert is_usable.call_count == 0
    assert b"SUMMARY:Django Day\r\n" in body
    assert connection.connection.info.backend_pid != dropped


# --- cache faults ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_cache_fault_on_the_route_costs_a_render_never_an_answer(
    client, registration, renders, monkeypatch, free_port, caplog
):
    """The limiter answers (its Redis is up) but the calendar cache does not."""
    unreachable = redis.Redis(port=free_port, socket_connect_timeout=0.5, socket_timeout=0.5)
    monkeypatch.setattr(ics, "_redis", lambda backend, *, write: unreachable)
    path = ics_path(registration)
    with caplog.at_level(logging.WARNING, logger=ICS_LOGGER):
        body = fetch(client, registration, path).content
    assert len(renders) == 1
    assert unstamped(body) == fresh(registration)
    assert [r.getMessage() for r in caplog.records if r.name == ICS_LOGGER] == [
        "ics: calendar cache unavailable (ConnectionError): rendering",
        "ics: calendar cache unavailable (ConnectionError): not stored",
    ]


@pytest.mark.django_db
def test_redis_down_renders_the_calendar(registration, own_redis, renders, caplog):
    current = selectors.calendar_registration(registration_id=registration.pk)
    now = datetime(2030, 1, 1, tzinfo=UTC)
    own_redis.stop()
    with caplog.at_level(logging.WARNING, logger=ICS_LOGGER):
        served = ics.calendar_file(registration=current, now=now)
    assert served.body == ics.calendar(registration=current, now=now)
    assert served.filename == "django-day.ics"
    assert len(renders) == 2  # the answer's render and the comparison's
    assert [r.getMessage() for r in caplog.records if r.name == ICS_LOGGER] == [
        "ics: calendar cache unavailable (ConnectionError): rendering",
        "ics: calendar cache unavailable (ConnectionError): not stored",
    ]


def test_the_local_entries_keep_the_most_recently_used():
    entries = ics._LocalEntries(2)
    entries.put("a", b"A")
    entries.put("b", b"B")
    assert entries.get("a") == b"A"  # "b" is now the least recently used
    entries.put("c", b"C")
    assert [entries.get(key) for key in ("a", "b", "c")] == [b"A", None, b"C"]
