"""The admin login throttle (issue 9, finding 4): django-axes on the Redis cache, per username and
per client address (events.client.client_address: X-Forwarded-For only from EVENT_TRUSTED_PROXY).
"""

from __future__ import annotations

import secrets

import pytest
from django.conf import settings
from django.test import Client

from tests.events import factories

# Counters live in a Redis cache of the test's own (see tests/events/redis_server.py).
pytestmark = pytest.mark.usefixtures("own_redis")

PASSWORD = "pw-for-tests-only"  # noqa: S105 — the factory's
LOCKED = "Account locked: too many login attempts. Please try again later."


def _address() -> str:
    """A fresh address per test: counters live in the shared Redis cache."""
    return f"10.{secrets.randbelow(250)}.{secrets.randbelow(250)}.{secrets.randbelow(250) + 1}"


@pytest.fixture
def staff():
    def make() -> str:
        username = f"staff-{secrets.token_hex(4)}"
        factories.UserFactory(username=username, is_staff=True, is_superuser=True)
        return username

    return make


def login(username: str, password: str, *, remote: str, forwarded: str | None = None):
    headers = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded
    return Client().post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password},
        **headers,
    )


def fail(username: str, times: int, **where) -> list[int]:
    return [login(username, "wrong", **where).status_code for _ in range(times)]


@pytest.mark.django_db
def test_after_the_limit_the_right_password_is_refused_and_others_still_log_in(staff, caplog):
    victim, colleague = staff(), staff()
    attacker = _address()
    # Failures answer the login form again; the limit-th one locks out…
    limit = settings.AXES_FAILURE_LIMIT
    assert fail(victim, limit, remote=attacker) == [200] * (limit - 1) + [429]

    # …then even the right password is refused with the lockout message.
    refused = login(victim, PASSWORD, remote=attacker)
    assert refused.status_code == 429
    assert LOCKED in refused.content.decode()
    assert "_auth_user_id" not in refused.wsgi_request.session
    assert f'AXES: Locking out {{username: "{victim}", ip_address: "{attacker}"' in caplog.text

    # Per username: the victim's name is refused from anywhere…
    assert login(victim, PASSWORD, remote=_address()).status_code == 429
    # …per address: any username from the attacker's address is refused.
    assert login(colleague, PASSWORD, remote=attacker).status_code == 429
    # Another username from another address logs in.
    ok = login(colleague, PASSWORD, remote=_address())
    assert (ok.status_code, ok["Location"]) == (302, "/admin/")


@pytest.mark.django_db
def test_the_address_is_the_trusted_proxys_forwarded_entry(staff, settings):
    proxy = _address()
    settings.EVENT_TRUSTED_PROXY = proxy
    user, other = staff(), staff()
    attacker, visitor = _address(), _address()
    # Behind the trusted proxy each client counts on its own: the attacker's failures
    # (under varying usernames, so only the address counter reaches the limit)…
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(f"nobody-{secrets.token_hex(3)}", "wrong", remote=proxy, forwarded=attacker)
    assert login(user, PASSWORD, remote=proxy, forwarded=attacker).status_code == 429
    # …do not lock out another client of the same proxy.
    assert login(other, PASSWORD, remote=proxy, forwarded=visitor).status_code == 302


@pytest.mark.django_db
def test_a_forged_forwarded_header_does_not_escape_the_address_counter(staff, settings):
    settings.EVENT_TRUSTED_PROXY = ""
    user = staff()
    attacker = _address()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(f"nobody-{secrets.token_hex(3)}", "wrong", remote=attacker, forwarded=_address())
    assert login(user, PASSWORD, remote=attacker, forwarded=_address()).status_code == 429
