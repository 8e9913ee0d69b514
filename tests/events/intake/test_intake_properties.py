"""Property-based tests of the intake (the public door takes anything): generated bodies and
strings from
the full Unicode range — NUL, lone surrogates, other scripts' digits, very long values — in
every field of the JSON API and of the HTML form. Never a 500; a refusal is a 4xx in the
pinned shape (API) and writes nothing (rows counted before and after the request).

One event per test (a function-scoped fixture, reused by every example: hypothesis runs the
examples inside the test's transaction); a few hundred examples per run in all.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.models import QuestionType
from tests.events import factories
from tests.events.intake.test_intake import written


def run_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


# Any code point, surrogates included (hypothesis leaves Cs out unless told).
ANY_CHAR = st.characters(exclude_categories=())
NASTY = st.sampled_from(
    ["\x00", "\ud800", "\udfff", "²", "①", "١٢", "𝟏", "٣", "\u2028", "\ufeff", " ", "-1", "0"]
)
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=12),
    NASTY,
    # very long values, around and far past every column size (255, 254, 32, 128)
    st.tuples(st.integers(1, 400), ANY_CHAR).map(lambda t: t[1] * t[0]),
    st.tuples(st.sampled_from([31, 32, 33, 127, 128, 129, 253, 254, 255, 256]), st.just("a")).map(
        lambda t: t[1] * t[0]
    ),
)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    TEXT,
)
JUNK = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(ANY_CHAR, max_size=4), inner, max_size=3),
    ),
    max_leaves=6,
)


@pytest.fixture(autouse=True)
def _open_limits(settings):
    settings.EVENT_RATE_LIMITS = {"intake": (10**9, 60), "token": (10**9, 60)}
    cache.clear()


@pytest.fixture
def world(db):
    event = factories.EventFactory(seats_limited=False)
    ticket = factories.TicketFactory(event=event)
    choice_q = factories.QuestionFactory(
        event=event, title="Size", question_type=QuestionType.SIMPLE_CHOICE
    )
    choice = factories.QuestionChoiceFactory(question=choice_q)
    text_q = factories.QuestionFactory(event=event, question_type=QuestionType.TEXT_BOX)
    name_q = factories.QuestionFactory(event=event, question_type=QuestionType.NAME)
    email_q = factories.QuestionFactory(event=event, question_type=QuestionType.EMAIL)
    phone_q = factories.QuestionFactory(event=event, question_type=QuestionType.PHONE)
    return {
        "event": event,
        "ticket": ticket,
        "choice": choice,
        "questions": [choice_q, text_q, name_q, email_q, phone_q],
    }


def ids(world) -> st.SearchStrategy:
    real = [world["ticket"].pk, world["choice"].pk, *(q.pk for q in world["questions"])]
    return st.one_of(st.sampled_from(real), st.sampled_from(real).map(str), SCALAR)


def attendee(world) -> st.SearchStrategy:
    keys = st.one_of(st.sampled_from([str(q.pk) for q in world["questions"]]), TEXT)
    fields = st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(TEXT, st.just("Ada"), JUNK),
            "email": st.one_of(TEXT, st.just("ada@example.org"), JUNK),
            "phone": st.one_of(TEXT, st.just("+32 470 12 34 56")),
            "company_name": TEXT,
            "answers": st.one_of(
                st.dictionaries(keys, st.one_of(ids(world), JUNK), max_size=4), JUNK
            ),
        },
    )
    return st.one_of(fields, JUNK)


def body(world) -> st.SearchStrategy:
    return st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "ticket_id": ids(world),
                "slot_id": ids(world),
                "attendees": st.one_of(st.lists(attendee(world), max_size=4), JUNK),
                "utm": st.one_of(
                    st.dictionaries(st.sampled_from(["source", "medium", "campaign"]), TEXT), JUNK
                ),
            },
        ),
        JUNK,
    )


def _check(response, before) -> None:
    assert response.status_code < 500, response.content[:500]
    if response.status_code >= 400:
        assert written() == before


def api_post(event_id, *, data: bytes, **extra):
    return Client().post(
        reverse("api-intake", kwargs={"event_id": event_id}),
        data=data,
        content_type="application/json",
        REMOTE_ADDR="10.7.0.1",
        **extra,
    )


def test_the_api_never_answers_500_and_refusals_write_nothing(world):
    @run_settings(150)
    @given(payload=body(world), key=st.one_of(st.none(), TEXT))
    def run(payload, key):
        extra = {}
        if key is not None and all(ord(c) < 256 and c not in "\r\n" for c in key):
            extra["HTTP_IDEMPOTENCY_KEY"] = key  # a header holds latin-1 only
        before = written()
        response = api_post(world["event"].pk, data=json.dumps(payload).encode(), **extra)
        _check(response, before)
        assert response["Content-Type"].startswith("application/json")
        if response.status_code >= 400:
            error = response.json()["error"]
            assert isinstance(error["code"], str) and isinstance(error["message"], str)

    run()


def test_the_api_never_answers_500_on_raw_bytes_and_deep_nesting(world):
    nested = st.tuples(st.integers(1, 50_000), st.sampled_from(["[", '{"a":'])).map(
        lambda t: (t[1] * t[0]).encode()
    )

    @run_settings(60)
    @given(raw=st.one_of(st.binary(max_size=200), nested))
    def run(raw):
        before = written()
        response = api_post(world["event"].pk, data=raw)
        _check(response, before)
        # An empty body carries no Content-Type at all (415); anything else is not JSON.
        expected = "unsupported_media_type" if not raw else "invalid_value"
        assert response.json()["error"]["code"] == expected

    run()


def test_the_form_never_answers_500_and_refusals_write_nothing(world):
    event = world["event"]
    names = [
        "ticket",
        "slot",
        "quantity",
        "idempotency_key",
        "utm_source",
        *(f"a0-{f}" for f in ("name", "email", "phone", "company_name")),
        *(f"a{i}-q{q.pk}" for i in (0, 1) for q in world["questions"]),
        *(f"order-q{q.pk}" for q in world["questions"]),
    ]
    form_value = st.one_of(TEXT, st.just(str(world["ticket"].pk)), st.just("Ada"))

    @run_settings(100)
    @given(fields=st.dictionaries(st.sampled_from(names), form_value, max_size=len(names)))
    def run(fields):
        # Bytes as a browser (or a hostile client) may send them: lone surrogates go out as
        # their (invalid) UTF-8 bytes, which the server must take without a 500.
        data = urlencode(fields, encoding="utf-8", errors="surrogatepass")
        before = written()
        response = Client().post(
            reverse("event-detail", kwargs={"event_id": event.pk}),
            data=data,
            content_type="application/x-www-form-urlencoded",
            REMOTE_ADDR="10.7.0.2",
        )
        _check(response, before)

    run()
