"""Django's database session store on `events.StaffSession`, its read written by the ORM once
and reading the signed-in user with the session, refusing a session key Django could never
have made.

- The read runs on every request of a signed-in user (the desk's scans, the admin). Django's
  store (`Session.objects.get(session_key=…, expire_date__gt=now)`) compiles the same query
  each time, which costs more CPU than PostgreSQL spends running it, and its backend then
  reads the user in a second round trip. Here the ORM writes one statement once per process:
  the live session by its key, joined to the user its `user` column names, with that user's
  grants (config.auth: the columns and the two arrays of permission names its backend reads).
  Each read runs it prepared (`statements.first_rows`: planned once per connection), and as
  a request's first statement it also tests the kept connection in place of Django's health
  check (its `SELECT 1` was one more round trip). Same answer as Django's: the row when its
  key matches and it has not expired, else no session (the key is dropped, a new one is made
  on save). The user read with it is handed to the backend for this request only
  (config.auth.AuthenticationMiddleware), which still checks that the session's data names
  that user. The writes and expiry are Django's store's; each save also sets the `user`
  column from the data.
- Keys. A cookie may carry an escaped NUL (`sessionid="abcdefgh\\000x"` is printable ASCII on
  the wire and a NUL once Django's cookie parser unquotes it). PostgreSQL refuses such text: the
  session read raised a DataError, a 500 on every page that reads the user (the desk, the
  admin). Django makes its keys from [a-z0-9] only (SessionBase._get_new_session_key), so a key
  holding any other character is treated as no key at all: a new, empty session, as for an
  unknown key, and nothing is read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache

from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from config import auth
from events.models import StaffSession
from events.read import statements
from events.read.statements import orm_sql

_KEY_CHARS = frozenset(VALID_KEY_CHARS)
_NAMES = tuple(f.attname for f in StaffSession._meta.concrete_fields)


@cache
def _read() -> tuple[str, tuple[str, ...]]:
    """The read of a live session (its parameters: the key, now) with its user's columns and
    grants (NULLs when the session names no user), and the user's column names."""
    probe = ["", datetime(2000, 1, 1, tzinfo=UTC)]
    user_names = auth.user_names()
    query = (
        StaffSession.objects.filter(session_key=probe[0])
        .filter(expire_date__gt=probe[1])
        .order_by()
        .annotate(**auth.grants("user_id"))
        .values_list(
            *_NAMES,
            *(f"user__{name}" for name in user_names),
            *auth.GRANTS,
        )
    )
    return orm_sql(query, probe), user_names


@cache
def _username_at() -> int:
    """Where the read's row holds the user's USERNAME_FIELD (never NULL for a user row)."""
    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    return len(_NAMES) + auth.user_names().index(field.attname)


class SessionStore(db.SessionStore):
    # The user read with the session (config.auth.SignedIn), once the session is loaded.
    signed_in: auth.SignedIn | None = None

    @classmethod
    def get_model_class(cls):
        return StaffSession

    def _validate_session_key(self, key):
        return bool(super()._validate_session_key(key)) and _KEY_CHARS.issuperset(key)

    def _get_session_from_db(self):
        self.signed_in = None
        if self.session_key is None:  # no key, or one Django could not have made: no read
            return None
        sql, user_names = _read()
        found = statements.first_rows(sql, [self.session_key, timezone.now()])
        if not found:
            self._session_key = None
            return None
        row = found[0]
        session = StaffSession.from_db(DEFAULT_DB_ALIAS, _NAMES, row[: len(_NAMES)])
        if session.user_id is not None and row[_username_at()] is not None:
            # (No username: the user is gone, the join found nothing; the backend's own read
            # then answers, as for a session read without its user.)
            self.signed_in = auth.SignedIn(session.user_id, row[len(_NAMES) :])
        return session

    def create_model_instance(self, data):
        session = super().create_model_instance(data)
        session.user_id = _user_id(data.get(SESSION_KEY))
        return session


def _user_id(value):
    """The user primary key a session's data names, or None (none, or not a key)."""
    if value is None:
        return None
    try:
        return get_user_model()._meta.pk.to_python(value)
    except ValidationError:
        return None
