"""Django's database session store, refusing a session key Django could never have made.

A cookie may carry an escaped NUL (`sessionid="abcdefgh\\000x"` is printable ASCII on the wire
and a NUL once Django's cookie parser unquotes it). PostgreSQL refuses such text: the session
read raised a DataError, a 500 on every page that reads the user (the desk, the admin). Django
makes its keys from [a-z0-9] only (SessionBase._get_new_session_key), so a key holding any other
character is treated as no key at all: a new, empty session, as for an unknown key (and
without a read: Django would look a missing key up).

Everything else is Django's store: the read (the row when its key matches and it has not
expired, else no session: the key is dropped, a new one is made on save), the writes, expiry.
"""

from __future__ import annotations

from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS

_KEY_CHARS = frozenset(VALID_KEY_CHARS)


class SessionStore(db.SessionStore):
    def _validate_session_key(self, key):
        return bool(super()._validate_session_key(key)) and _KEY_CHARS.issuperset(key)

    def _get_session_from_db(self):
        if self.session_key is None:  # no key, or one Django could not have made: no read
            return None
        return super()._get_session_from_db()
