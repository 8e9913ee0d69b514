"""The intake's request path outside the booking (its cost per request, bench/): what the checks
before
the Event lock read comes in one statement, as the ORM would load it; the rate limiter keeps
one Redis client per cache backend; links reverse each route once; the answers, codes and
check order of spec.md §7.4 stay as they were."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace
from unittest import mock

import pytest
import redis
from django.core.cache import cache
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse, set_script_prefix
from django.utils import timezone

from events import ratelimit
from events.models import (
    Event,
    IntakeIdempotency,
    Question,
    QuestionType,
    Registration,
    Slot,
    Ticket,
)
from events.services import capability, intake, links
from tests.events import factories
from tests.helpers import terminate_backend


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def post(client, event_id, payload, *, key=None, remote="10.7.0.1"):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(
        reverse("api-intake", kwargs={"event_id": event_id}),
        data=json.dumps(payload),
        content_type="application/json",
        REMOTE_ADDR=remote,
        **headers,
    )


@pytest.fixture
def world(db):
    """A multi-slot event with two tickets, two slots, a mandatory text question, a choice
    question with two choices and an inactive question; and another event's rows."""
    start = timezone.now() + timedelta(days=20)
    event = factories.EventFactory(
        is_multi_slots=True, seats_limited=True, seats_max=50, date_begin=start
    )
    free = factories.TicketFactory(event=event, name="Free", limit_max_per_order=4)
    later = factories.TicketFactory(
        event=event,
        name="Later",
        price=Decimal("12.50"),
        start_sale_datetime=timezone.now() + timedelta(days=3, microseconds=123),
        end_sale_datetime=timezone.now() + timedelta(days=9),
    )
    morning = factories.SlotFactory(event=event, start_hour=9.25, end_hour=12.5)
    afternoon = factories.SlotFactory(
        event=event,
        start_hour=14.0,
        end_hour=17.0,
        start_datetime=start + timedelta(hours=5),
        end_datetime=start + timedelta(hours=8),
    )
    diet = factories.QuestionFactory(
        event=event, title="Diet", is_mandatory_answer=True, sequence=20
    )
    shirt = factories.QuestionFactory(
        event=event, title="T-shirt", question_type=QuestionType.SIMPLE_CHOICE, sequence=10
    )
    small = factories.QuestionChoiceFactory(question=shirt, name="S")
    large = factories.QuestionChoiceFactory(question=shirt, name="L")
    factories.QuestionFactory(event=event, title="Retired", active=False, sequence=1)
    other = factories.EventFactory(is_multi_slots=True)
    other_shirt = factories.QuestionFactory(event=other, question_type=QuestionType.SIMPLE_CHOICE)
    return SimpleNamespace(
        event=event,
        free=free,
        later=later,
        morning=morning,
        afternoon=afternoon,
        diet=diet,
        shirt=shirt,
        small=small,
        large=large,
        other_ticket=factories.TicketFactory(event=other),
        other_slot=factories.SlotFactory(event=other),
        other_choice=factories.QuestionChoiceFactory(question=other_shirt),
    )


def payload(world, **changes) -> dict:
    body = {
        "ticket_id": world.free.pk,
        "slot_id": world.morning.pk,
        "attendees": [
            {
                "name": "Ann",
                "email": "ann@example.org",
                "answers": {str(world.diet.pk): "vegan", str(world.shirt.pk): world.small.pk},
            }
        ],
    }
    body.update(changes)
    return body


def fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def typed(instance) -> dict:
    return {name: (type(value), value) for name, value in fields(instance).items()}


# --- the one statement before the lock -------------------------------------------------------


@pytest.mark.django_db
def test_the_checks_before_the_lock_read_in_one_statement(client, world):
    """Every check up to the answers runs (ticket, slot, sale window, quantity, attendee,
    choice) and the request is refused at question_required: one statement was all it read."""
    body = payload(world)
    body["attendees"][0]["answers"] = {str(world.shirt.pk): world.large.pk}

    with CaptureQueriesContext(connection) as queries:
        response = post(client, world.event.pk, body)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "question_required"
    assert len(queries) == 1
    assert Registration.objects.count() == 0


@pytest.mark.django_db
def test_the_one_statement_loads_what_the_orm_loads(world):
    event, loaded = intake._read(world.event.pk)

    orm_event = Event.objects.select_related("stage").get(pk=world.event.pk)
    assert typed(event) == typed(orm_event)
    assert event.stage_pipe_end is orm_event.stage.pipe_end is False
    assert not event._state.adding
    tickets = Ticket.objects.filter(event=world.event)
    assert {pk: typed(t) for pk, t in loaded.tickets.items()} == {t.pk: typed(t) for t in tickets}
    assert str(loaded.tickets[world.later.pk].price) == "12.50"
    slots = Slot.objects.filter(event=world.event)
    assert {pk: typed(s) for pk, s in loaded.slots.items()} == {s.pk: typed(s) for s in slots}
    questions = Question.objects.filter(event=world.event, active=True).order_by("sequence", "id")
    assert [typed(q) for q in loaded.questions] == [typed(q) for q in questions]
    assert [q.pk for q in loaded.questions] == [world.shirt.pk, world.diet.pk]
    assert loaded.choices == {world.shirt.pk: {world.small.pk, world.large.pk}}


@pytest.mark.django_db
def test_an_event_without_tickets_slots_or_questions_loads_empty_sets():
    event = factories.EventFactory()

    _, loaded = intake._read(event.pk)

    assert (loaded.tickets, loaded.slots, loaded.questions, loaded.choices) == ({}, {}, [], {})


@pytest.mark.django_db
def test_a_single_slot_event_loads_no_slots(world):
    Event.objects.filter(pk=world.event.pk).update(is_multi_slots=False)

    _, loaded = intake._read(world.event.pk)

    assert loaded.slots == {}
    assert set(loaded.tickets) == {world.free.pk, world.later.pk}


@pytest.mark.django_db
def test_load_reads_again_for_an_event_the_intake_did_not_read(world):
    event = Event.objects.get(pk=world.event.pk)

    with CaptureQueriesContext(connection) as queries:
        loaded = intake._load(event)

    assert len(queries) == 1
    assert set(loaded.tickets) == {world.free.pk, world.later.pk}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        (lambda w: {"ticket_id": w.other_ticket.pk}, 400, "invalid_ticket"),
        (lambda w: {"ticket_id": None}, 400, "ticket_required"),
        (lambda w: {"slot_id": w.other_slot.pk}, 400, "invalid_slot"),
        (lambda w: {"slot_id": None}, 400, "slot_required"),
        (lambda w: {"ticket_id": w.later.pk}, 409, "sale_not_started"),
    ],
)
def test_refusals_decided_on_the_rows_of_the_one_statement(client, world, change, status, code):
    response = post(client, world.event.pk, payload(world, **change(world)))

    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert Registration.objects.count() == 0


@pytest.mark.django_db
def test_a_sale_window_refusal_names_the_stored_instant(client, world):
    response = post(client, world.event.pk, payload(world, ticket_id=world.later.pk))

    stored = Ticket.objects.get(pk=world.later.pk).start_sale_datetime
    assert response.json()["error"]["start_sale_datetime"] == stored.isoformat()


@pytest.mark.django_db
def test_a_choice_of_another_question_is_an_invalid_answer(client, world):
    body = payload(world)
    body["attendees"][0]["answers"][str(world.shirt.pk)] = world.other_choice.pk

    response = post(client, world.event.pk, body)

    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_answer")
    assert Registration.objects.count() == 0


@pytest.mark.django_db
def test_a_registration_from_the_one_statement(client, world):
    response = post(client, world.event.pk, payload(world, slot_id=world.afternoon.pk))

    assert response.status_code == 201
    reg = Registration.objects.get()
    assert (reg.ticket_id, reg.slot_id, reg.name) == (world.free.pk, world.afternoon.pk, "Ann")
    assert response.json()["registrations"][0]["id"] == reg.pk


@pytest.mark.django_db(transaction=True)  # the booking is its own transaction, as served
def test_a_registration_reads_its_booking_inputs_with_the_event_and_then_books(client, world):
    """The intake's one statement also reads the booking's inputs for the ticket the body
    names, and hands them to register(): the request sends that read and the `events_book`
    call, and no other statement reads the inputs."""
    with CaptureQueriesContext(connection) as queries:
        response = post(client, world.event.pk, payload(world))

    assert response.status_code == 201
    sent = [q["sql"] for q in queries.captured_queries]
    assert len(sent) == 2, sent
    assert "events_booking_inputs(" in sent[0] and "FROM events_book(" in sent[1]
    assert Registration.objects.filter(event=world.event).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("key", [None, "slot-gone-1"])
def test_a_slot_deleted_after_the_read_is_400_invalid_slot_with_or_without_a_key(
    client, world, actor, monkeypatch, key
):
    """The slot the intake read is deleted before the booking's call (here from the
    intake's own recheck): the booking lock refuses it, also inside the transaction an
    Idempotency-Key opens (the foreign key alone would only fail at COMMIT, a 500)."""
    from events.services import events as event_services

    checked = intake._recheck

    def delete_then_check(locked, ticket, now):
        event_services.delete_slot(slot=world.afternoon, actor=actor)
        checked(locked, ticket, now)

    monkeypatch.setattr(intake, "_recheck", delete_then_check)

    response = post(client, world.event.pk, payload(world, slot_id=world.afternoon.pk), key=key)

    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_slot")
    assert not Registration.objects.filter(event=world.event).exists()


@pytest.mark.django_db
def test_an_unpublished_event_is_404_before_the_rate_limit(client, world, settings):
    settings.EVENT_RATE_LIMITS = {"intake": (0, 60), "token": (120, 60)}
    Event.objects.filter(pk=world.event.pk).update(is_published=False)

    with CaptureQueriesContext(connection) as queries:
        response = post(client, world.event.pk, payload(world))

    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
    assert len(queries) == 1


@pytest.mark.django_db
def test_an_archived_event_is_404(client, world):
    Event.objects.filter(pk=world.event.pk).update(active=False)

    response = post(client, world.event.pk, payload(world))

    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


@pytest.mark.django_db
def test_the_read_is_prepared_once_per_connection(client, world):
    """A server-binding cursor: from its third run on a connection PostgreSQL keeps the plan
    (settings: prepare_threshold), so the intake does not plan its read on every request."""
    body = payload(world)
    body["attendees"][0]["answers"] = {}  # question_required: the read, no booking

    for _ in range(3):
        assert post(client, world.event.pk, body).status_code == 400

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ['%json_agg%FROM "events_event" e JOIN "events_stage" s%'],
        )
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db
def test_a_replay_answers_the_stored_body_from_one_more_statement(client, world):
    first = post(client, world.event.pk, payload(world), key="fast-1")
    assert first.status_code == 201

    with CaptureQueriesContext(connection) as queries:
        again = post(client, world.event.pk, payload(world), key="fast-1")

    assert len(queries) == 2
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert Registration.objects.count() == 1
    assert IntakeIdempotency.objects.count() == 1


@pytest.mark.django_db
def test_a_replay_with_another_body_is_refused(client, world):
    assert post(client, world.event.pk, payload(world), key="fast-2").status_code == 201

    response = post(
        client, world.event.pk, payload(world, slot_id=world.afternoon.pk), key="fast-2"
    )

    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_value")
    assert response.json()["error"]["field"] == "Idempotency-Key"
    assert Registration.objects.count() == 1


# --- the rate limiter ------------------------------------------------------------------------


def test_the_limiter_makes_one_redis_client_per_cache_backend(settings, monkeypatch):
    settings.EVENT_RATE_LIMITS = {"intake": (10, 60), "token": (10, 60)}
    now = 1_800_000_000.0
    assert ratelimit.hit(scope="intake", client="one-client", now=now) == 1
    made = []
    real_init = redis.Redis.__init__

    def counting_init(self, *args, **kwargs):
        made.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)

    counts = [ratelimit.hit(scope="intake", client="one-client", now=now) for _ in range(3)]

    assert counts == [2, 3, 4]
    assert made == []


def test_a_new_cache_setting_gets_its_own_client(settings, free_port):
    settings.EVENT_RATE_LIMITS = {"intake": (10, 60), "token": (10, 60)}
    assert ratelimit.hit(scope="token", client="c", now=1_800_000_000.0) == 1
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port}/0",
        }
    }

    with pytest.raises(ratelimit.LimiterUnavailable):
        ratelimit.hit(scope="token", client="c")


# --- links -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_links_reverse_each_route_once_and_match_reverse(monkeypatch):
    regs = [factories.RegistrationFactory() for _ in range(3)]
    links._around.cache_clear()
    calls = []
    real_reverse = links.reverse

    def counting_reverse(*args, **kwargs):
        calls.append(args[0])
        return real_reverse(*args, **kwargs)

    monkeypatch.setattr(links, "reverse", counting_reverse)

    for reg in regs:
        tickets = capability.mint(purpose="tickets", subject=reg)
        ics = capability.mint(purpose="ics", subject=reg)
        assert links.tickets_path(reg) == reverse("my-tickets", kwargs={"token": tickets})
        assert links.ics_path(reg) == reverse("ics", kwargs={"token": ics})

    assert sorted(calls) == ["ics", "my-tickets"]


@pytest.mark.django_db
def test_links_follow_the_script_prefix():
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="ics", subject=reg)
    try:
        set_script_prefix("/events-site/")
        assert links.ics_path(reg) == f"/events-site/ics/{token}.ics"
        assert links.ics_path(reg) == reverse("ics", kwargs={"token": token})
    finally:
        set_script_prefix("/")
    assert links.ics_path(reg) == f"/ics/{token}.ics"


@pytest.mark.parametrize("token", ["a b", "ä", "x%y", "a?b"])
def test_a_token_reverse_would_quote_goes_through_reverse(token):
    assert links._token_path("ics", token) == reverse("ics", kwargs={"token": token})


# --- the request's first statement tests the kept connection -----------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_connection_dropped_since_the_last_request_is_replaced_without_a_select_1(client, world):
    """CONN_HEALTH_CHECKS would send `SELECT 1` before the request's first statement; the
    intake lets its first statement find a dropped connection, replaces it and reads again, and
    no `SELECT 1` follows later in the request."""
    assert post(client, world.event.pk, payload(world)).status_code == 201
    dropped = connection.connection.info.backend_pid
    terminate_backend(dropped)
    connection.health_check_done = False  # a new request, as request_started leaves it
    wrapper = connections["default"]
    with mock.patch.object(wrapper, "is_usable", wraps=wrapper.is_usable) as is_usable:
        body = payload(world)
        body["attendees"][0]["name"] = "Bo"
        response = post(client, world.event.pk, body)
    assert response.status_code == 201, response.content
    assert is_usable.call_count == 0
    assert connection.connection.info.backend_pid != dropped
    assert Registration.objects.filter(name="Bo").count() == 1


@pytest.mark.django_db(transaction=True)
def test_without_health_checks_a_dropped_connection_is_not_retried(client, world, settings):
    """CONN_HEALTH_CHECKS off: the request meets the dropped connection and answers 503 (the
    setting's documented behaviour, kept)."""
    assert post(client, world.event.pk, payload(world)).status_code == 201
    terminate_backend(connection.connection.info.backend_pid)
    connection.settings_dict["CONN_HEALTH_CHECKS"] = False
    try:
        response = post(client, world.event.pk, payload(world))
    finally:
        connection.settings_dict["CONN_HEALTH_CHECKS"] = True
        connection.close()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "service_unavailable"
