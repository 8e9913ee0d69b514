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
from tests import factories

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
