"""The admin login throttle: django-axes on the Redis cache, per (username, client address) pair
and, with a higher limit, per client address (events.client.client_address: X-Forwarded-For only
from EVENT_TRUSTED_PROXY). Nobody can lock a staff member out from another address.
"""

from __future__ import annotations

import secrets
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
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


def others(times: int, **where) -> list[int]:
    """Failures under as many usernames (only the address counter grows)."""
    return [
        login(f"nobody-{secrets.token_hex(3)}", "wrong", **where).status_code for _ in range(times)
    ]


@pytest.mark.django_db
def test_after_the_limit_the_pair_is_locked_and_the_real_user_logs_in_elsewhere(staff, caplog):
    victim, colleague = staff(), staff()
    attacker, office = _address(), _address()
    # Failures answer the login form again; the limit-th one locks out the pair…
    limit = settings.AXES_FAILURE_LIMIT
    assert fail(victim, limit, remote=attacker) == [200] * (limit - 1) + [429]

    # …then even the right password is refused from the attacker's address.
    refused = login(victim, PASSWORD, remote=attacker)
    assert refused.status_code == 429
    assert LOCKED in refused.content.decode()
    assert "_auth_user_id" not in refused.wsgi_request.session
    assert f'AXES: Locking out {{username: "{victim}", ip_address: "{attacker}"' in caplog.text

    # The real user, from their own address, logs in with the right password.
    ok = login(victim, PASSWORD, remote=office)
    assert (ok.status_code, ok["Location"]) == (302, "/admin/")
    assert ok.wsgi_request.session["_auth_user_id"]
    # Below its own limit the attacker's address is not locked for another username either.
    assert login(colleague, PASSWORD, remote=attacker).status_code == 302


@pytest.mark.django_db
def test_one_address_trying_many_usernames_is_locked_at_the_address_limit(staff):
    user = staff()
    attacker = _address()
    limit = settings.LOGIN_THROTTLE_ADDRESS_LIMIT
    assert limit > settings.AXES_FAILURE_LIMIT

    assert others(limit, remote=attacker) == [200] * (limit - 1) + [429]

    # The same address is still throttled, whatever the username and password…
    assert login(user, PASSWORD, remote=attacker).status_code == 429
    # …and that user logs in from anywhere else.
    assert login(user, PASSWORD, remote=_address()).status_code == 302


@pytest.mark.django_db
def test_a_login_from_the_address_does_not_clear_its_address_count(staff):
    """An attacker's own account cannot wipe the address's count between guesses."""
    own, target = staff(), staff()
    attacker = _address()
    limit = settings.LOGIN_THROTTLE_ADDRESS_LIMIT

    others(limit - 1, remote=attacker)
    assert login(own, PASSWORD, remote=attacker).status_code == 302  # a success in between
    assert fail(target, 1, remote=attacker) == [429]  # the address's limit-th failure


@pytest.mark.django_db
def test_a_login_clears_its_own_pair_count(staff):
    user = staff()
    address = _address()
    limit = settings.AXES_FAILURE_LIMIT

    fail(user, limit - 1, remote=address)
    assert login(user, PASSWORD, remote=address).status_code == 302
    # A typo after a success starts from one again.
    assert fail(user, limit - 1, remote=address) == [200] * (limit - 1)


@pytest.mark.django_db
def test_the_address_is_the_trusted_proxys_forwarded_entry(staff, settings):
    proxy = _address()
    settings.EVENT_TRUSTED_PROXY = proxy
    user, other = staff(), staff()
    attacker, visitor = _address(), _address()
    # Behind the trusted proxy each client counts on its own: the attacker's failures
    # (under varying usernames, so only the address counter reaches its limit)…
    others(settings.LOGIN_THROTTLE_ADDRESS_LIMIT, remote=proxy, forwarded=attacker)
    assert login(user, PASSWORD, remote=proxy, forwarded=attacker).status_code == 429
    # …do not lock out another client of the same proxy.
    assert login(other, PASSWORD, remote=proxy, forwarded=visitor).status_code == 302


@pytest.mark.django_db
def test_a_forged_forwarded_header_does_not_escape_the_address_counter(staff, settings):
    settings.EVENT_TRUSTED_PROXY = ""
    user = staff()
    attacker = _address()
    for _ in range(settings.LOGIN_THROTTLE_ADDRESS_LIMIT):
        login(f"nobody-{secrets.token_hex(3)}", "wrong", remote=attacker, forwarded=_address())
    assert login(user, PASSWORD, remote=attacker, forwarded=_address()).status_code == 429


@pytest.mark.django_db
def test_with_redis_down_staff_still_log_in_and_failures_answer_the_form(staff, settings, caplog):
    user = staff()
    dead = _address()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # the discard port: nobody answers Redis there
        }
    }

    assert fail(user, settings.AXES_FAILURE_LIMIT + 1, remote=dead) == [200] * (
        settings.AXES_FAILURE_LIMIT + 1
    )
    assert login(user, PASSWORD, remote=dead).status_code == 302
    assert "login failure not counted (cache)" in caplog.text
    assert "login throttle unavailable (cache)" in caplog.text


@pytest.mark.django_db
def test_the_runbooks_commands_unlock_a_pair_and_an_address(staff):
    victim = staff()
    pair, crowd = _address(), _address()
    fail(victim, settings.AXES_FAILURE_LIMIT, remote=pair)
    others(settings.LOGIN_THROTTLE_ADDRESS_LIMIT, remote=crowd)

    call_command("axes_reset_ip_username", pair, victim, stdout=StringIO())
    call_command("axes_reset_ip", crowd, stdout=StringIO())

    assert login(victim, PASSWORD, remote=pair).status_code == 302
    assert login(victim, PASSWORD, remote=crowd).status_code == 302
