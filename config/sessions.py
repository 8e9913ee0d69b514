"""Django's database session store, reading a session in one prepared statement and refusing a
session key Django could never have made.

- The read. Django reads the session through the ORM (`Session.objects.get(session_key=…,
  expire_date__gt=now)`): ~230 µs of query compilation on every request of a signed-in user
  (the desk's scans, the admin), for a statement whose text never changes. It runs here as a
  fixed statement on a server-binding cursor (events.db.rows.fetch: prepared on its
  second use on a connection), through `pipeline.first_read`: a request's first statement also
  stands in for Django's per-request connection health check (`SELECT 1`), as on /ics and the
  intake (register P3, P9). Same answer as Django's: the row when its key matches and it has
  not expired, else no session (the key is dropped, a new one is made on save).
- Keys. A cookie may carry an escaped NUL (`sessionid="abcdefgh\\000x"` is printable ASCII on
  the wire and a NUL once Django's cookie parser unquotes it). PostgreSQL refuses such text: the
  session read raised a DataError, a 500 on every page that reads the user (the desk, the
  admin). Django makes its keys from [a-z0-9] only (SessionBase._get_new_session_key), so a key
  holding any other character is treated as no key at all: a new, empty session, as for an
  unknown key.
"""

from __future__ import annotations

from functools import cache

from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.models import Session
from django.utils import timezone

from events.db import pipeline, rows

_KEY_CHARS = frozenset(VALID_KEY_CHARS)


@cache
def _read_sql() -> str:
    return (
        f"SELECT {rows.columns(Session, 's')} FROM {Session._meta.db_table} s "  # noqa: S608
        "WHERE s.session_key = %s AND s.expire_date > %s"
    )  # S608: names from model meta; the values are parameters


class SessionStore(db.SessionStore):
    def _validate_session_key(self, key):
        return bool(super()._validate_session_key(key)) and _KEY_CHARS.issuperset(key)

    def _get_session_from_db(self):
        key = self.session_key
        found = []
        if key is not None:
            sql, now = _read_sql(), timezone.now()
            found = pipeline.first_read(lambda: rows.fetch(sql, [key, now]))
        if not found:
            self._session_key = None
            return None
        ((session,),) = rows.load_joined((Session,), found)
        return session
