"""Django's database session store, its read written by the ORM once, refusing a session key
Django could never have made.

- The read runs on every request of a signed-in user (the desk's scans, the admin). Django's
  store (`Session.objects.get(session_key=…, expire_date__gt=now)`) compiles the same query
  each time, which costs more CPU than PostgreSQL spends running it. Here the ORM writes that
  statement once per process; each read runs it prepared (`statements.first_rows`: planned
  once per connection), and as a request's first statement it also tests the kept connection
  in place of Django's health check (its `SELECT 1` was one more round trip). Same answer as
  Django's: the row when its key matches and it has not expired, else no session (the key is
  dropped, a new one is made on save). The writes and expiry are Django's store's.
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

from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.models import Session
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from events.read import statements
from events.read.statements import orm_sql

_KEY_CHARS = frozenset(VALID_KEY_CHARS)
_NAMES = tuple(f.attname for f in Session._meta.concrete_fields)


@cache
def _read_sql() -> str:
    """Django's read of a live session, as the ORM writes it; its parameters: the key, now."""
    probe = ["", datetime(2000, 1, 1, tzinfo=UTC)]
    query = Session.objects.filter(session_key=probe[0]).filter(expire_date__gt=probe[1])
    return orm_sql(query.order_by().values_list(*_NAMES), probe)


class SessionStore(db.SessionStore):
    def _validate_session_key(self, key):
        return bool(super()._validate_session_key(key)) and _KEY_CHARS.issuperset(key)

    def _get_session_from_db(self):
        if self.session_key is None:  # no key, or one Django could not have made: no read
            return None
        found = statements.first_rows(_read_sql(), [self.session_key, timezone.now()])
        if not found:
            self._session_key = None
            return None
        return Session.from_db(DEFAULT_DB_ALIAS, _NAMES, found[0])
