"""Client address and rate limits (spec.md §7.5): 429 + Retry-After after the limit, per client,
X-Forwarded-For only from the trusted proxy (its rightmost entry)."""

from __future__ import annotations

import ipaddress
import json

import pytest
import redis
from django.core.cache import cache
from django.test import Client, RequestFactory
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.commands.core import Script

from events import ratelimit
from events.client import client_address
from events.errors import RateLimited
from events.models import Registration
from events.services import capability
from tests.events import factories
from tests.helpers import run_concurrently

WINDOW_START = 1_900_000_020.0  # a multiple of 60: the window starts here


@pytest.fixture(autouse=True)
def _fresh_rate_limits(monkeypatch):
    cache.clear()
    # Pin the clock 15.25 s into a window so a test never straddles two windows.
    monkeypatch.setattr(ratelimit, "clock", lambda: WINDOW_START + 15.25)


@pytest.fixture
def limits(settings):
    settings.EVENT_RATE_LIMITS = {"intake": (3, 60), "token": (2, 60)}
    settings.EVENT_TRUSTED_PROXY = ""
    return settings


def intake(client, event, *, remote, forwarded=None):
    headers = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return client.post(
        reverse("api-intake", kwargs={"event_id": event.pk}),
        data=json.dumps({"attendees": [{"name": "Ann"}]}),
        content_type="application/json",
        **headers,
    )


@pytest.mark.django_db
def test_intake_answers_429_with_retry_after_after_the_limit(client, limits):
    event = factories.EventFactory()
    assert [intake(client, event, remote="10.0.0.1").status_code for _ in range(3)] == [201] * 3
    response = intake(client, event, remote="10.0.0.1")
    assert response.status_code == 429
    assert response["Retry-After"] == "45"  # the window ends 44.75 s later
    assert response.json()["error"]["code"] == "rate_limited"
    assert response.json()["error"]["retry_after"] == 45
    assert Registration.objects.filter(event=event).count() == 3
    # Another client is not affected; the next window starts afresh.
    assert intake(client, event, remote="10.0.0.2").status_code == 201


@pytest.mark.django_db
def test_the_counter_resets_with_the_next_window(client, limits, monkeypatch):
    event = factories.EventFactory()
    for _ in range(3):
        intake(client, event, remote="10.0.0.1")
    assert intake(client, event, remote="10.0.0.1").status_code == 429
    monkeypatch.setattr(ratelimit, "clock", lambda: WINDOW_START + 60.0)
    assert intake(client, event, remote="10.0.0.1").status_code == 201


@pytest.mark.django_db
def test_x_forwarded_for_is_ignored_unless_remote_addr_is_the_trusted_proxy(client, limits):
    limits.EVENT_TRUSTED_PROXY = "10.0.0.254"
    event = factories.EventFactory()
    statuses = [
        intake(client, event, remote="10.0.0.1", forwarded=f"203.0.113.{i}").status_code
        for i in range(4)
    ]
    # Four different X-Forwarded-For values from one untrusted address: one client.
    assert statuses == [201, 201, 201, 429]


@pytest.mark.django_db
def test_behind_the_trusted_proxy_the_rightmost_entry_is_the_client(client, limits):
    limits.EVENT_TRUSTED_PROXY = "10.0.0.254"
    event = factories.EventFactory()
    proxy = "10.0.0.254"
    # The leftmost entries are written by the client: changing them does not change the client.
    for spoof in ("1.1.1.1", "2.2.2.2", "3.3.3.3"):
        response = intake(client, event, remote=proxy, forwarded=f"{spoof}, 198.51.100.7")
        assert response.status_code == 201
    assert intake(client, event, remote=proxy, forwarded="4.4.4.4, 198.51.100.7").status_code == 429
    # A different rightmost entry is a different client; the proxy itself was never counted.
    assert intake(client, event, remote=proxy, forwarded="198.51.100.8").status_code == 201
    assert intake(client, event, remote="10.0.0.1").status_code == 201


@pytest.mark.parametrize(
    ("trusted", "remote", "forwarded", "client"),
    [
        ("", "10.0.0.1", "1.2.3.4", "10.0.0.1"),
        ("", "10.0.0.254", "1.2.3.4", "10.0.0.254"),
        ("10.0.0.254", "10.0.0.1", "1.2.3.4", "10.0.0.1"),
        ("10.0.0.254", "10.0.0.254", "1.2.3.4", "1.2.3.4"),
        ("10.0.0.254", "10.0.0.254", "1.2.3.4, 5.6.7.8 ", "5.6.7.8"),
        ("10.0.0.254", "10.0.0.254", None, "10.0.0.254"),
        ("10.0.0.254", "10.0.0.254", " , ", "10.0.0.254"),
        ("2001:db8::1", "2001:db8::1", "2001:db8::2, 2001:db8::3", "2001:db8::3"),
    ],
)
def test_client_address(settings, trusted, remote, forwarded, client):
    settings.EVENT_TRUSTED_PROXY = trusted
    headers = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    assert client_address(RequestFactory().get("/", **headers)) == client


PROXY = "10.0.0.254"


@pytest.mark.parametrize(
    ("forwarded", "client"),
    [
        # the canonical text, a proxy's numeric port dropped, a mapped IPv4 as IPv4
        ("2001:DB8:0::3", "2001:db8::3"),
        ("1.2.3.4:5678", "1.2.3.4"),
        ("[2001:db8::3]:5678", "2001:db8::3"),
        ("::ffff:1.2.3.4", "1.2.3.4"),
        # not an address: the proxy itself, as with no entry
        ("1.2.3.4, unknown", PROXY),
        ("1.2.3.4\x00", PROXY),
        ("\u0661.\u0662.\u0663.\u0664", PROXY),
        ("õ®\xa0÷B{\x06Ý", PROXY),
        ("1" * 5000, PROXY),
        ("fe80::1%eth0", PROXY),
        ("fe80::1%\x00x", PROXY),
        ("::1%" + "A" * 300, PROXY),
        ("[::1]junk", PROXY),
        ("[::1", PROXY),
        ("1.2.3.4:x", PROXY),
        ("1.2.3.4:\u0661", PROXY),
        ("01.2.3.4", PROXY),
    ],
)
def test_the_forwarded_entry_counts_only_as_an_address(settings, forwarded, client):
    settings.EVENT_TRUSTED_PROXY = PROXY
    request = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == client


@settings(max_examples=300, deadline=None)
@given(
    forwarded=st.text(max_size=80)
    | st.ip_addresses().map(str)
    | st.builds(lambda a, z: f"{a}%{z}", st.ip_addresses(v=6), st.text(max_size=20))
)
def test_the_client_key_is_the_proxy_or_a_canonical_address(forwarded):
    from django.test import override_settings

    with override_settings(EVENT_TRUSTED_PROXY=PROXY):
        request = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
        key = client_address(request)
    assert key == PROXY or str(ipaddress.ip_address(key)) == key
    assert len(key) <= 39 and key.isascii() and key.isprintable() and "%" not in key


@pytest.mark.django_db
@pytest.mark.parametrize("route", ["my-tickets", "ics"])
def test_token_routes_answer_429_with_retry_after(client, limits, route):
    reg = factories.RegistrationFactory()
    token = capability.mint(purpose="tickets" if route == "my-tickets" else "ics", subject=reg)
    path = reverse(route, kwargs={"token": token})
    assert [client.get(path, REMOTE_ADDR="10.0.0.9").status_code for _ in range(2)] == [200, 200]
    response = client.get(path, REMOTE_ADDR="10.0.0.9")
    assert response.status_code == 429
    assert response["Retry-After"] == "45"
    assert response["Cache-Control"] == "private, no-store"
    assert client.get(path, REMOTE_ADDR="10.0.0.10").status_code == 200


@pytest.mark.django_db
def test_the_event_page_form_answers_429_too(client, limits):
    event = factories.EventFactory()
    path = reverse("event-detail", kwargs={"event_id": event.pk})
    data = {"quantity": "1", "a0-name": "Ann"}
    for index in range(3):
        response = client.post(
            path, {**data, "idempotency_key": f"k{index}"}, REMOTE_ADDR="10.0.0.3"
        )
        assert response.status_code == 303
    response = client.post(path, {**data, "idempotency_key": "k9"}, REMOTE_ADDR="10.0.0.3")
    assert response.status_code == 429
    assert response["Retry-After"] == "45"
    assert b"Too many requests" in response.content


def test_hit_expires_with_its_window_and_scopes_are_separate(settings):
    settings.EVENT_RATE_LIMITS = {"intake": (2, 60), "token": (2, 60)}
    now = WINDOW_START + 59.5
    assert ratelimit.hit(scope="intake", client="c", now=now) == 1
    assert ratelimit.hit(scope="intake", client="c", now=now) == 2
    with pytest.raises(RateLimited) as refused:
        ratelimit.hit(scope="intake", client="c", now=now)
    assert refused.value.code == "rate_limited"
    assert refused.value.details == {"retry_after": 1}
    # Scopes are separate counters.
    assert ratelimit.hit(scope="token", client="c", now=now) == 1
    key = cache.make_and_validate_key(f"rl:intake:{int(WINDOW_START)}:c")
    ttl = cache._cache.get_client(key).ttl(key)
    assert 0 < ttl <= 61


CONCURRENT_HITS = 24
LIMIT = 5


def test_concurrent_hits_count_atomically_exactly_the_limit_passes(settings):
    """24 threads released by one barrier hit one counter with a limit of 5: exactly 5 pass,
    each with its own count 1..5, and the counter holds all 24 (none lost to a read-then-write
    race, which would let more than 5 pass or leave the counter short)."""
    settings.EVENT_RATE_LIMITS = {"intake": (LIMIT, 60), "token": (LIMIT, 60)}
    now = WINDOW_START + 1

    def one_hit():
        try:
            return ratelimit.hit(scope="intake", client="crowd", now=now)
        except RateLimited as refused:
            return refused.code

    outcomes = run_concurrently([one_hit] * CONCURRENT_HITS)

    passed = sorted(o for o in outcomes if isinstance(o, int))
    assert passed == list(range(1, LIMIT + 1))
    assert outcomes.count("rate_limited") == CONCURRENT_HITS - LIMIT
    key = cache.make_and_validate_key(f"rl:intake:{int(WINDOW_START)}:crowd")
    assert int(cache._cache.get_client(key).get(key)) == CONCURRENT_HITS


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_to_a_token_route_let_exactly_the_limit_through(limits):
    """The same through HTTP: 12 clients from one address fetch a tickets page at once with a
    limit of 2 → exactly two 200s, ten 429s."""
    reg = factories.RegistrationFactory()
    path = reverse("my-tickets", kwargs={"token": capability.mint(purpose="tickets", subject=reg)})

    def one_request():
        return Client().get(path, REMOTE_ADDR="10.0.0.42").status_code

    statuses = run_concurrently([one_request] * 12)

    assert sorted(statuses) == [200] * 2 + [429] * 10


def test_every_hit_reuses_one_script_in_one_round_trip(settings, monkeypatch):
    """Django's cache hands out a new Redis client per call: the script object is made once
    for the process (not per client), and each hit is one EVALSHA."""
    settings.EVENT_RATE_LIMITS = {"intake": (10, 60), "token": (10, 60)}
    now = WINDOW_START + 1
    assert ratelimit.hit(scope="intake", client="s", now=now) == 1  # loads it if Redis had not
    made, commands = [], []
    real_init, real_execute = Script.__init__, redis.Redis.execute_command

    def counting_init(self, *args, **kwargs):
        made.append(self)
        real_init(self, *args, **kwargs)

    def recording_execute(self, *args, **kwargs):
        commands.append(args[0])
        return real_execute(self, *args, **kwargs)

    monkeypatch.setattr(Script, "__init__", counting_init)
    monkeypatch.setattr(redis.Redis, "execute_command", recording_execute)

    counts = [ratelimit.hit(scope="intake", client="s", now=now) for _ in range(3)]

    assert counts == [2, 3, 4]
    assert made == []
    assert commands == ["EVALSHA"] * 3


def test_an_unreachable_cache_raises_limiter_unavailable(settings, free_port):
    settings.EVENT_RATE_LIMITS = {"intake": (10, 60), "token": (10, 60)}
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port}/0",
        }
    }
    with pytest.raises(ratelimit.LimiterUnavailable) as failed:
        ratelimit.hit(scope="token", client="c")
    assert str(failed.value) == "ConnectionError"
