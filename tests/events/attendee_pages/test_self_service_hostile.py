"""Hostile input on the self-service doors (hypothesis): the waiting list's JSON API and form,
the self-cancel step's `registration` parameter and the offer link's token. Whatever arrives
— too long, NUL bytes, lone surrogates, other scripts' digits, deep nesting, wrong types —
the answer is a 4xx (JSON on the API), never a 500, and nothing is written."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.core.cache import cache
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.models import EventAuditLog, MailOutbox, WaitlistEntry
from events.services import capability, registrations
from tests.events import factories
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db

HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "\x00",
            "Ada\x00Lovelace",
            "\ud800",
            "a" * 5_000,
            "٣",  # Arabic-Indic three
            "１２",  # fullwidth digits
            "ada@exam\x00ple.org",
            "x" * 250 + "@example.org",
        ]
    ),
)
HOSTILE_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), HOSTILE_TEXT),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
EXAMPLES = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(autouse=True)
def _limits_lifted(settings):
    cache.clear()
    settings.EVENT_RATE_LIMITS = {"intake": (1_000_000, 60), "token": (1_000_000, 60)}


@pytest.fixture
def full_event(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    (holder,) = registrations.register(
        event=event, attendees=[{"name": "Holder", "email": "h@example.org"}], actor=actor
    )
    return event, holder


def written(event) -> tuple:
    return (
        snapshot(event),
        WaitlistEntry.objects.count(),
        EventAuditLog.objects.count(),
        MailOutbox.objects.count(),
    )


def wire(text: str) -> str:
    """Text percent-encoded as UTF-8 (lone surrogates as their raw bytes), as it arrives."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def as_json(value) -> str:
    # Lone surrogates cannot be encoded as UTF-8: send them escaped, as a client would.
    return json.dumps(value, ensure_ascii=True)


@EXAMPLES
@given(name=HOSTILE_VALUE, email=HOSTILE_VALUE, ticket=HOSTILE_VALUE, slot=HOSTILE_VALUE)
def test_the_waitlist_api_answers_4xx_json_and_writes_nothing(
    client, full_event, name, email, ticket, slot
):
    event, _ = full_event
    before = written(event)
    payload = {"name": name, "email": email, "ticket_id": ticket, "slot_id": slot}
    response = client.post(
        reverse("api-waitlist", args=[event.pk]),
        data=as_json(payload),
        content_type="application/json",
    )
    if response.status_code in (200, 201):  # a well-formed join: only then is a row written
        entry = WaitlistEntry.objects.get()
        assert "\x00" not in entry.name + entry.email
        WaitlistEntry.objects.all().delete()
        return
    assert 400 <= response.status_code < 500, response.content[:300]
    assert "code" in response.json()["error"]
    assert written(event) == before


def test_deeply_nested_json_is_refused_not_a_500(client, full_event):
    event, _ = full_event
    before = written(event)
    response = client.post(
        reverse("api-waitlist", args=[event.pk]),
        data="[" * 100_000 + "]" * 100_000,
        content_type="application/json",
    )
    assert response.status_code in (400, 413)
    assert response.json()["error"]["code"] in ("invalid_value", "payload_too_large")
    assert written(event) == before


@EXAMPLES
@given(name=HOSTILE_TEXT, email=HOSTILE_TEXT)
def test_the_waitlist_form_answers_4xx_or_its_page_and_writes_nothing_bad(
    client, full_event, name, email
):
    event, _ = full_event
    before = written(event)
    response = client.post(
        reverse("waitlist-join", args=[event.pk]),
        data=f"name={wire(name)}&email={wire(email)}",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code < 500
    if WaitlistEntry.objects.exists():  # only a clean name and address get in
        entry = WaitlistEntry.objects.get()
        assert "\x00" not in entry.name + entry.email
        WaitlistEntry.objects.all().delete()
        return
    assert written(event) == before


@EXAMPLES
@given(registration=HOSTILE_TEXT)
def test_the_cancel_step_refuses_any_registration_parameter_it_did_not_issue(
    client, full_event, registration
):
    event, holder = full_event
    token = capability.mint(purpose="tickets", subject=holder)
    before = written(event)
    url = reverse("my-tickets-cancel", kwargs={"token": token})
    query = "registration=" + wire(registration)  # percent-encoded as a browser sends it
    page = client.get(f"{url}?{query}")
    sent = client.post(url, data=query, content_type="application/x-www-form-urlencoded")
    if registration.strip() == str(holder.pk):  # the one id the link shows
        return
    assert page.status_code in (400, 404)
    assert sent.status_code in (400, 403, 404)
    assert written(event) == before


@EXAMPLES
@given(token=HOSTILE_TEXT.filter(bool))
def test_a_hostile_offer_token_is_the_uniform_404(client, full_event, token):
    event, _ = full_event
    before = written(event)
    path = "/waitlist/offer/" + wire(token) + "/"
    assert client.get(path).status_code == 404
    assert client.post(path).status_code in (403, 404)
    assert written(event) == before
