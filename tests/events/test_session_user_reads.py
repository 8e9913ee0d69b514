"""config.sessions and config.auth: the session and the signed-in user read by one prepared
statement each, with Django's answers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth import backends as django_backends
from django.contrib.sessions.backends import db as django_db_store
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from config import auth
from config.sessions import SessionStore

pytestmark = pytest.mark.django_db

User = get_user_model()


def staff(**fields):
    fields.setdefault("username", "staffer")
    return User.objects.create_user(password="pw-for-tests", is_staff=True, **fields)


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _statements(client: Client, path: str) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        status = client.get(path).status_code
    return status, [q["sql"] for q in captured.captured_queries]


def test_a_signed_in_request_reads_session_and_user_by_fixed_statements():
    client = _signed_in(staff(is_superuser=True))
    client.get("/admin/")  # the connection prepares the statements from their second use
    status, sql = _statements(client, "/admin/")
    assert status == 200
    session_reads = [s for s in sql if "django_session" in s]
    user_reads = [s for s in sql if "FROM auth_user u WHERE u.id = " in s]
    assert len(session_reads) == 1 and "s.session_key = " in session_reads[0]
    assert len(user_reads) == 1
    # Django's ORM forms of both reads are gone, and so is the per-request health check.
    assert not any('"django_session"."session_key" = ' in s for s in sql)
    assert not any('"auth_user"."id" = ' in s and "WHERE" in s for s in sql)
    assert "SELECT 1" not in sql
    assert sql[0] == session_reads[0]


def _session(*, expires_in: timedelta, data: dict) -> str:
    store = SessionStore()
    store.update(data)
    store.create()
    Session.objects.filter(session_key=store.session_key).update(
        expire_date=timezone.now() + expires_in
    )
    return store.session_key


@pytest.mark.parametrize("expires_in", [timedelta(hours=1), timedelta(seconds=-1)])
def test_session_reads_answer_as_djangos_store(expires_in):
    key = _session(expires_in=expires_in, data={"k": "v", SESSION_KEY: "7"})
    ours, theirs = SessionStore(key), django_db_store.SessionStore(key)
    assert ours.load() == theirs.load()
    assert ours.session_key == theirs.session_key  # an expired key is dropped by both
    expected = {"k": "v", SESSION_KEY: "7"} if expires_in > timedelta(0) else {}
    assert ours.load() == expected


@pytest.mark.parametrize("key", [None, "", "a" * 40, "nosuchkey" * 4, "abcdefgh\x00x"])
def test_missing_or_malformed_keys_give_an_empty_session_and_write_nothing(key):
    before = Session.objects.count()
    store = SessionStore(key)
    assert store.load() == {}
    assert store.session_key is None
    assert Session.objects.count() == before


def test_user_reads_answer_as_djangos_backend():
    active = staff(username="active")
    inactive = staff(username="inactive", is_active=False)
    ours, theirs = auth.ModelBackend(), django_backends.ModelBackend()
    for user_id in (active.pk, inactive.pk, active.pk + inactive.pk + 1000):
        mine, django_s = ours.get_user(user_id), theirs.get_user(user_id)
        assert mine == django_s
        if mine is not None:
            assert mine.__dict__.keys() >= {"username", "password", "last_login"}
            assert [getattr(mine, f.attname) for f in User._meta.concrete_fields] == [
                getattr(django_s, f.attname) for f in User._meta.concrete_fields
            ]
    assert ours.get_user(active.pk).username == "active"
    assert ours.get_user(inactive.pk) is None


@pytest.mark.parametrize("change", ["deactivated", "deleted", "expired"])
def test_a_request_after_the_user_or_session_went_is_anonymous(change):
    user = staff(is_superuser=True)
    client = _signed_in(user)
    assert client.get("/admin/").status_code == 200
    if change == "deactivated":
        User.objects.filter(pk=user.pk).update(is_active=False)
    elif change == "deleted":
        user.delete()
    else:
        Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get("/admin/")
    assert response.status_code == 302 and "/login/" in response["Location"]
