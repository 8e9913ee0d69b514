"""config.sessions and config.auth: Django's session store and model backend, the session and
its signed-in user read in one statement written by the ORM once (Django's answers), a session
key Django could not have made treated as no key, a failed login checking the password once."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth import backends as django_backends
from django.contrib.auth.models import Permission
from django.contrib.sessions.backends import db as django_db_store
from django.contrib.sessions.models import Session
from django.db import OperationalError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from config import auth
from config.sessions import SessionStore
from events.db import pipeline
from events.models import StaffSession

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


def test_a_signed_in_request_reads_session_and_user_in_one_statement_first_as_health_check():
    client = _signed_in(staff(is_superuser=True))
    client.get("/admin/")
    # A request after the first on a kept connection: Django's health check is due again (the
    # WSGI handler resets it at each request's start; the test client does not).
    connection.health_check_done = False
    checked = []
    usable = connection.is_usable
    with mock.patch.object(connection, "is_usable", lambda: checked.append(1) or usable()):
        status, sql = _statements(client, "/admin/")
    assert status == 200
    session_reads = [s for s in sql if 'FROM "events_staff_session"' in s]
    assert len(session_reads) == 1
    assert '"events_staff_session"."expire_date" > ' in session_reads[0]
    assert 'LEFT OUTER JOIN "auth_user"' in session_reads[0]
    # The user came with the session: no statement of its own.
    assert not [s for s in sql if 'FROM "auth_user"' in s and '"auth_user"."id" = ' in s]
    assert sql[0] == session_reads[0]
    # CONN_HEALTH_CHECKS: the session read, first, tested the kept connection; Django's own
    # check (its SELECT 1, one more round trip) was not sent.
    assert checked == []
    assert connection.health_check_done


def test_the_session_row_names_its_user_from_sign_in_to_sign_out(client):
    user = staff()
    assert (
        client.post(
            "/admin/login/", {"username": "staffer", "password": "pw-for-tests", "next": "/admin/"}
        ).status_code
        == 302
    )
    key = client.cookies["sessionid"].value
    assert StaffSession.objects.get(session_key=key).user_id == user.pk
    client.post("/admin/logout/")
    assert not StaffSession.objects.filter(session_key=key).exists()
    assert StaffSession.objects.filter(user=user).count() == 0


def test_deleting_a_user_deletes_its_sessions():
    user = staff()
    _signed_in(user)
    assert StaffSession.objects.filter(user=user).count() == 1
    user.delete()
    assert StaffSession.objects.count() == 0


def test_a_session_naming_a_user_gone_outside_django_is_signed_out():
    user = staff(is_superuser=True)
    client = _signed_in(user)
    with connection.cursor() as cursor:  # not Django's delete: the session row stays
        cursor.execute("DELETE FROM auth_user WHERE id = %s", [user.pk])
    assert StaffSession.objects.filter(user_id=user.pk).exists()
    response = client.get("/admin/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_session_row_naming_another_user_than_its_data_reads_the_datas_user():
    """The session's data stays the truth: the user read with the row is taken only when both
    name the same user."""
    granted = staff(username="granted")
    granted.user_permissions.add(Permission.objects.get(codename="checkin_registration"))
    other = staff(username="other")
    client = _signed_in(other)
    key = client.cookies["sessionid"].value
    StaffSession.objects.filter(session_key=key).update(user=granted)
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/desk/")
    assert response.status_code == 403  # `other`, who has no desk grant
    assert any('FROM "auth_user"' in q["sql"] for q in captured.captured_queries[1:])


def test_a_grant_revoked_after_a_request_holds_for_a_read_outside_a_request():
    """The user read with a session serves that request's `get_user` only: a later call in the
    same thread reads the row anew."""
    user = staff(username="desk")
    permission = Permission.objects.get(codename="checkin_registration")
    user.user_permissions.add(permission)
    client = _signed_in(user)
    assert client.get("/desk/").status_code == 200
    user.user_permissions.remove(permission)
    assert not auth.ModelBackend().get_user(user.pk).has_perm("events.checkin_registration")
    assert client.get("/desk/").status_code == 403


def test_the_migration_copies_live_sessions_with_their_users():
    from importlib import import_module

    from django.apps import apps

    copy = import_module("events.migrations.0019_staff_sessions").copy_live_sessions
    user = staff()
    store = django_db_store.SessionStore()
    store.update({SESSION_KEY: str(user.pk), "k": "v"})
    store.create()
    gone = django_db_store.SessionStore()
    gone.update({SESSION_KEY: str(user.pk + 1000)})
    gone.create()
    expired = django_db_store.SessionStore()
    expired.update({SESSION_KEY: str(user.pk)})
    expired.create()
    Session.objects.filter(session_key=expired.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    copy(apps, mock.Mock(connection=connection))
    copied = {s.session_key: s for s in StaffSession.objects.all()}
    assert set(copied) == {store.session_key, gone.session_key}
    assert copied[store.session_key].user_id == user.pk
    assert copied[gone.session_key].user_id is None  # no such user: signed in to nobody
    assert SessionStore(store.session_key).load() == {SESSION_KEY: str(user.pk), "k": "v"}


# Django's database store reading the same table (named SessionStore: the name is in the
# signing salt of the session data).
_DjangosStore = type(
    "SessionStore",
    (django_db_store.SessionStore,),
    {"get_model_class": classmethod(lambda cls: StaffSession)},
)


def _session(*, expires_in: timedelta, data: dict) -> str:
    store = SessionStore()
    store.update(data)
    store.create()
    StaffSession.objects.filter(session_key=store.session_key).update(
        expire_date=timezone.now() + expires_in
    )
    return store.session_key


@pytest.mark.parametrize("expires_in", [timedelta(hours=1), timedelta(seconds=-1)])
def test_session_reads_answer_as_djangos_store(expires_in):
    key = _session(expires_in=expires_in, data={"k": "v", SESSION_KEY: "7"})
    ours, theirs = SessionStore(key), _DjangosStore(key)
    assert ours.load() == theirs.load()
    assert ours.session_key == theirs.session_key  # an expired key is dropped by both
    expected = {"k": "v", SESSION_KEY: "7"} if expires_in > timedelta(0) else {}
    assert ours.load() == expected


@pytest.mark.parametrize("key", [None, "", "a" * 40, "nosuchkey" * 4, "abcdefgh\x00x"])
def test_missing_or_malformed_keys_give_an_empty_session_and_write_nothing(key):
    before = StaffSession.objects.count()
    store = SessionStore(key)
    with CaptureQueriesContext(connection) as read:
        assert store.load() == {}
    # Only a well-formed key is looked up: a NUL would make PostgreSQL refuse the read.
    assert len(read) == (1 if key in ("a" * 40, "nosuchkey" * 4) else 0)
    assert store.session_key is None
    assert StaffSession.objects.count() == before


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
        StaffSession.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get("/admin/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_reads_answer_inside_a_booking_pipeline():
    """request.session and request.user load lazily: a first access may come inside a
    booking's pipeline (an unevaluated request.user passed as the actor)."""
    user = staff(username="lazy")
    key = _session(expires_in=timedelta(hours=1), data={"k": "v", SESSION_KEY: str(user.pk)})
    with transaction.atomic(), pipeline.pipelined():
        assert SessionStore(key).load() == {"k": "v", SESSION_KEY: str(user.pk)}
        assert auth.ModelBackend().get_user(user.pk) == user


@pytest.mark.django_db(transaction=True)
def test_the_first_read_never_reconnects_with_autocommit_off(monkeypatch):
    """Outside an atomic block but with autocommit off, a replaced connection would drop the
    uncommitted work silently: the read's error is raised instead."""
    connection.ensure_connection()
    reads = []

    def read():
        reads.append(1)
        raise OperationalError("server closed the connection unexpectedly")

    connection.connection.close()  # the kept connection, dropped
    monkeypatch.setattr(connection, "autocommit", False)
    try:
        with pytest.raises(OperationalError):
            pipeline.first_read(read)
        assert reads == [1]
    finally:
        monkeypatch.undo()
        connection.close()


def test_a_session_signed_in_by_djangos_backend_stays_signed_in():
    """Sessions made before config.auth.ModelBackend name Django's backend (a rolling deploy
    serves them from hosts of both releases)."""
    client = _signed_in(staff(is_superuser=True))
    session = client.session
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session.save()
    assert client.get("/admin/").status_code == 200


@pytest.mark.parametrize("username", ["staffer", "nobody"])
def test_a_failed_login_checks_the_password_once(client, username):
    staff()
    checks = []
    check = django_backends.ModelBackend.authenticate

    def counted(self, *args, **kwargs):
        checks.append(type(self).__module__)
        return check(self, *args, **kwargs)

    with mock.patch.object(django_backends.ModelBackend, "authenticate", counted):
        response = client.post(
            "/admin/login/", {"username": username, "password": "wrong", "next": "/admin/"}
        )
        assert response.status_code == 200  # the form again, with its error
        assert checks == ["config.auth"]
        checks.clear()
        signed_in = client.post(
            "/admin/login/", {"username": "staffer", "password": "pw-for-tests", "next": "/admin/"}
        )
    assert signed_in.status_code == 302 and checks == ["config.auth"]
    assert client.session[BACKEND_SESSION_KEY] == "config.auth.ModelBackend"
