"""Django's model authentication backend, reading the signed-in user in one prepared statement.

`get_user` runs on every request of a signed-in user (the desk's scans, the admin). Django's
(`User._default_manager.get(pk=…)`) compiles the same ORM query each time, ~180 µs of client
CPU; here it is a fixed statement on a server-binding cursor (events.db.rows.fetch,
prepared on its second use on a connection), with Django's answer: the user when the row
exists and may authenticate (`is_active`), else None. Everything else (the password check,
permissions) is Django's ModelBackend. Register P9.

A session remembers the backend that signed its user in, and Django drops a session whose
backend is not listed. Django's ModelBackend therefore stays listed after this one, so that
sessions it signed in stay valid (a rolling deploy moves staff between hosts of both
releases). It is never asked to check a password: a failed check here ends the chain
(PermissionDenied, which Django's `authenticate` reports as the failed login it is), instead
of running the same check, a full password hash, a second time.
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth import backends, get_user_model
from django.core.exceptions import PermissionDenied

from events.db import rows


@cache
def _read_sql() -> str:
    user_model = get_user_model()
    return (
        f"SELECT {rows.columns(user_model, 'u')} FROM {user_model._meta.db_table} u "  # noqa: S608
        f"WHERE u.{user_model._meta.pk.column} = %s"
    )  # S608: names from model meta; the value is a parameter


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        found = rows.fetch(_read_sql(), [user_id])
        if not found:
            return None
        ((user,),) = rows.load_joined((get_user_model(),), found)
        return user if self.user_can_authenticate(user) else None

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and password is not None:
            raise PermissionDenied  # see the module docstring: not checked twice
        return user
