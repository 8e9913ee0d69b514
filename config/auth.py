"""Django's model authentication backend, its user read written by the ORM once, checking a
password once per failed login.

- `get_user` runs on every request of a signed-in user (the desk's scans, the admin). Django's
  (`User._default_manager.get(pk=…)`) compiles the same query each time, which costs more CPU
  than PostgreSQL spends running it. Here the ORM writes that statement once per process; each
  read runs it on Django's cursor, with Django's answer: the user when the row exists and may
  authenticate (`is_active`), else None. Permissions are Django's ModelBackend's.
- Django's `authenticate` asks every listed backend in turn; a backend that answers None lets
  the next one try. Django's ModelBackend stays listed after this one (config/settings.py)
  because a session remembers the backend that signed its user in and Django drops a session
  whose backend is not listed: sessions Django's backend signed in stay valid (a rolling deploy
  moves staff between hosts of both releases). It is never asked to check a password: a failed
  check here ends the chain (PermissionDenied, which Django's `authenticate` reports as the
  failed login it is) instead of running the same check, a full password hash, a second time.
"""

from __future__ import annotations

from functools import cache

from django.contrib.auth import backends, get_user_model
from django.core.exceptions import PermissionDenied
from django.db import DEFAULT_DB_ALIAS, connection

from events.read.statements import orm_sql


@cache
def _read() -> tuple[str, tuple[str, ...]]:
    """Django's read of one user by primary key, as the ORM writes it, and its columns."""
    user_model = get_user_model()
    names = tuple(f.attname for f in user_model._meta.concrete_fields)
    query = user_model._default_manager.filter(pk=0).order_by().values_list(*names)
    return orm_sql(query, [0]), names


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        user_model = get_user_model()
        sql, names = _read()
        with connection.cursor() as cursor:
            cursor.execute(sql, [user_model._meta.pk.get_prep_value(user_id)])
            row = cursor.fetchone()
        if row is None:
            return None
        user = user_model.from_db(DEFAULT_DB_ALIAS, names, row)
        return user if self.user_can_authenticate(user) else None

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and password is not None:
            raise PermissionDenied  # see the module docstring: not checked twice
        return user
