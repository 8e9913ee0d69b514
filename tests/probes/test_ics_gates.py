"""/ics/<token>.ics gates (spec.md §7.2), in their order, each with its answer.

secret missing → 503; malformed, bad signature, wrong purpose, stale version, unknown or
archived registration, draft → 404 with one uniform body; cancelled registration or cancelled
event → 200 STATUS:CANCELLED; otherwise 200 STATUS:CONFIRMED. The token is never logged.
"""

from __future__ import annotations

import logging

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse

from events.models import Registration
from events.services import capability, events, registrations
from tests.events import factories

ATTENDEE_LOGGER = "events.attendee"


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    cache.clear()


def ics_path(token: str) -> str:
    return reverse("ics", kwargs={"token": token})


def flip(char: str) -> str:
    return "A" if char != "A" else "B"


def _malformed(reg, actor):
    return "not-a-token"


def _bad_signature(reg, actor):
    token = capability.mint(purpose="ics", subject=reg)
    return token[:-1] + flip(token[-1])


def _wrong_purpose(reg, actor):
    return capability.mint(purpose="tickets", subject=reg)


def _stale_version(reg, actor):
    token = capability.mint(purpose="ics", subject=reg)
    capability.revoke_links(registration=reg, actor=actor)
    return token


def _unknown_registration(reg, actor):
    return capability._signer("ics").sign_object({"f": 1, "s": reg.pk + 10_000, "v": 1})


def _archived_registration(reg, actor):
    token = capability.mint(purpose="ics", subject=reg)
    registrations.cancel(registration=reg, actor=actor)
    registrations.archive(registration=reg, actor=actor)
    return token


def _draft_registration(reg, actor):
    token = capability.mint(purpose="ics", subject=reg)
    registrations.reset_to_draft(registration=reg, actor=actor)
    return token


REFUSALS = [
    ("malformed", _malformed),
    ("bad_signature", _bad_signature),
    ("wrong_purpose", _wrong_purpose),
    ("stale_version", _stale_version),
    ("unknown_registration", _unknown_registration),
    ("archived_registration", _archived_registration),
    ("draft_registration", _draft_registration),
]


@pytest.mark.django_db
def test_gate_1_secret_missing_answers_503_before_anything_else(client, actor):
    reg = factories.RegistrationFactory()
    good = capability.mint(purpose="ics", subject=reg)
    for secret in ("", "x" * 31):
        with override_settings(EVENT_CAPABILITY_SECRET=secret):
            for token in (good, "not-a-token"):
                response = client.get(ics_path(token))
                assert response.status_code == 503
                assert response["Cache-Control"] == "private, no-store"
                assert response["Referrer-Policy"] == "no-referrer"
                assert b"BEGIN:VCALENDAR" not in response.content


@pytest.mark.django_db
@pytest.mark.parametrize(("reason", "make_token"), REFUSALS, ids=[r for r, _ in REFUSALS])
def test_gate_2_each_refusal_is_a_404_and_logs_its_reason(
    client, actor, caplog, reason, make_token
):
    reg = factories.RegistrationFactory()
    token = make_token(reg, actor)
    with caplog.at_level(logging.INFO, logger=ATTENDEE_LOGGER):
        response = client.get(ics_path(token))
    assert response.status_code == 404
    assert response["Cache-Control"] == "private, no-store"
    assert response["Referrer-Policy"] == "no-referrer"
    logged = [r.getMessage() for r in caplog.records if r.name == ATTENDEE_LOGGER]
    assert logged == [f"ics: link refused ({reason})"]


@pytest.mark.django_db
def test_gate_2_the_404_body_is_byte_identical_across_refusal_kinds(client, actor):
    bodies = {}
    for reason, make_token in REFUSALS:
        reg = factories.RegistrationFactory()
        bodies[reason] = client.get(ics_path(make_token(reg, actor))).content
    assert len(set(bodies.values())) == 1, bodies
    assert bodies["malformed"] == b"Not found.\n"


@pytest.mark.django_db
def test_gate_order_a_stale_draft_is_refused_as_stale(client, actor, caplog):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="ics", subject=reg)
    registrations.reset_to_draft(registration=reg, actor=actor)
    capability.revoke_links(registration=reg, actor=actor)
    with caplog.at_level(logging.INFO, logger=ATTENDEE_LOGGER):
        response = client.get(ics_path(token))
    assert response.status_code == 404
    assert [r.getMessage() for r in caplog.records if r.name == ATTENDEE_LOGGER] == [
        "ics: link refused (stale_version)"
    ]


@pytest.mark.django_db
def test_gate_3_cancelled_registration_answers_200_cancelled(client, actor):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="ics", subject=reg)
    registrations.cancel(registration=reg, actor=actor)
    response = client.get(ics_path(token))
    assert response.status_code == 200
    assert b"STATUS:CANCELLED\r\n" in response.content
    assert b"STATUS:CONFIRMED" not in response.content


@pytest.mark.django_db
def test_gate_3_cancelled_event_answers_200_cancelled(client, actor):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="ics", subject=reg)
    events.cancel_event(event=reg.event, actor=actor)
    response = client.get(ics_path(token))
    assert response.status_code == 200
    assert b"STATUS:CANCELLED\r\n" in response.content
    assert Registration.objects.get(pk=reg.pk).state == "open"


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["open", "done"])
def test_gate_4_a_current_link_answers_200_confirmed(client, state):
    reg = factories.RegistrationFactory(state=state)
    response = client.get(ics_path(capability.mint(purpose="ics", subject=reg)))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    assert response["Cache-Control"] == "private, no-store"
    assert response["Referrer-Policy"] == "no-referrer"
    assert b"STATUS:CONFIRMED\r\n" in response.content


@pytest.fixture
def every_logger_at_debug():
    """Every logger (django.request included) at DEBUG for the test, restored afterwards."""
    manager = logging.root.manager
    loggers = [logging.root] + [
        logger for logger in manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    levels = {logger: logger.level for logger in loggers}
    disabled = {logger: logger.disabled for logger in loggers}
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.disabled = False
    yield
    for logger, level in levels.items():
        logger.setLevel(level)
        logger.disabled = disabled[logger]


@pytest.mark.django_db
def test_the_token_never_appears_in_any_log(client, actor, caplog, every_logger_at_debug):
    caplog.set_level(logging.DEBUG)
    tokens = []
    for _, make_token in REFUSALS:
        tokens.append(make_token(factories.RegistrationFactory(), actor))
    good = capability.mint(purpose="ics", subject=factories.RegistrationFactory())
    tokens.append(good)
    for token in tokens:
        client.get(ics_path(token))
    with override_settings(EVENT_CAPABILITY_SECRET=""):
        client.get(ics_path(good))
    with override_settings(EVENT_RATE_LIMITS={"intake": (30, 60), "token": (0, 60)}):
        assert client.get(ics_path(good)).status_code == 429

    messages = [record.getMessage() for record in caplog.records]
    # The refusals and the 503 were logged (so the log is not simply empty) …
    assert sum("link refused" in m for m in messages) == len(REFUSALS)
    assert any("secret missing" in m for m in messages)
    # … and neither a token nor its signature part appears anywhere.
    for token in tokens:
        secret_part = token.rsplit(":", 1)[-1]
        assert not any(token in m or secret_part in m for m in messages), token
        assert token not in caplog.text


def _token_paths(reg) -> dict[str, str]:
    return {
        "ics": ics_path(capability.mint(purpose="ics", subject=reg)),
        "my-tickets": reverse(
            "my-tickets", kwargs={"token": capability.mint(purpose="tickets", subject=reg)}
        ),
    }


def _assert_no_token(caplog, paths: dict[str, str]) -> None:
    messages = [record.getMessage() for record in caplog.records]
    for path in paths.values():
        token = path.rstrip("/").rsplit("/", 1)[-1].removesuffix(".ics")
        signature = token.rsplit(":", 1)[-1]
        assert not any(token in m or signature in m for m in messages), path
        assert signature not in caplog.text, path


@pytest.mark.django_db
def test_an_unreachable_rate_limiter_answers_503_and_logs_no_token(
    client, caplog, every_logger_at_debug, free_port
):
    """The rate limiter's Redis is down: the token routes fail closed with 503 (like a missing
    secret), logged on events.attendee without the path; Django's request log stays silent."""
    caplog.set_level(logging.DEBUG)
    paths = _token_paths(factories.RegistrationFactory())
    closed = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port}/0",
        }
    }
    with override_settings(CACHES=closed):
        responses = {route: client.get(path) for route, path in paths.items()}

    for response in responses.values():
        assert response.status_code == 503
        assert response.content == b"This page is temporarily unavailable.\n"
        assert response["Cache-Control"] == "private, no-store"
        assert response["Referrer-Policy"] == "no-referrer"
    logged = [r.getMessage() for r in caplog.records if r.name == ATTENDEE_LOGGER]
    assert logged == [
        "ics: rate limiter unavailable (ConnectionError): answering 503",
        "my_tickets: rate limiter unavailable (ConnectionError): answering 503",
    ]
    assert not [r for r in caplog.records if r.name.startswith("django.request")]
    _assert_no_token(caplog, paths)


@pytest.mark.django_db
def test_an_unexpected_500_on_a_token_route_logs_the_path_masked(
    caplog, every_logger_at_debug, monkeypatch
):
    """Any other failure (here: the database) is Django's 500; its "Internal Server Error:
    <path>" line and traceback reach every handler with the token masked."""
    from django.db import OperationalError
    from django.test import Client

    from events.read import selectors

    def database_down(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(selectors, "calendar_registration", database_down)
    monkeypatch.setattr(selectors, "ticket_registration", database_down)
    caplog.set_level(logging.DEBUG)
    paths = _token_paths(factories.RegistrationFactory())
    client = Client(raise_request_exception=False)

    assert [client.get(path).status_code for path in paths.values()] == [500, 500]

    errors = [r for r in caplog.records if r.name == "django.request"]
    assert [r.getMessage() for r in errors] == [
        "Internal Server Error: /ics/***",
        "Internal Server Error: /my-tickets/***/",
    ]
    assert all(r.exc_text and "OperationalError" in r.exc_text for r in errors)
    _assert_no_token(caplog, paths)


@pytest.mark.parametrize("name", ["django.request", "django.server"])
def test_django_request_loggers_mask_tokens_in_message_and_arguments(name):
    logger = logging.getLogger(name)
    record = logger.makeRecord(
        name,
        logging.ERROR,
        __file__,
        1,
        '"%s" %s %s',
        ("GET /my-tickets/eyJzIjo1fQ:s1gnature/?x=1 HTTP/1.1", 500, 12),
        None,
    )
    assert logger.filter(record)
    assert record.getMessage() == '"GET /my-tickets/***/?x=1 HTTP/1.1" 500 12'


def test_the_console_handler_masks_tokens_of_any_logger():
    from events.access_log import TokenMaskingFilter

    masking = [
        handler
        for handler in logging.root.handlers
        if any(isinstance(f, TokenMaskingFilter) for f in handler.filters)
    ]
    assert len(masking) == 1
    record = logging.makeLogRecord({"msg": "fetched /ics/%s", "args": ("eyJ9:s1gnature.ics",)})
    assert masking[0].filter(record)
    assert record.getMessage() == "fetched /ics/***"
