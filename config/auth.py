"""Django's model authentication backend, its user read written by the ORM once, checking a
password once per failed login.

- `get_user` runs on every request of a signed-in user (the desk's scans, the admin). Django's
  (`User._default_manager.get(pk=…)`) compiles the same query each time, which costs more CPU
  than PostgreSQL spends running it. Here the ORM writes that statement once per process; each
  read runs it prepared (`statements.rows`: planned once per connection), with Django's
  answer: the user when the row exists and may authenticate (`is_active`), else None.
  Permissions are Django's ModelBackend's, read with the user (`get_user`).
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
from django.contrib.auth.models import Permission
from django.contrib.postgres.expressions import ArraySubquery
from django.core.exceptions import PermissionDenied
from django.db import DEFAULT_DB_ALIAS
from django.db.models import OuterRef

from events.read import statements
from events.read.statements import orm_sql


def _permission_names(query) -> ArraySubquery:
    """ "app_label.codename" of each permission of `query`, as Django's ModelBackend names them
    (the separator in the text, not a parameter: the statement takes only the user id)."""
    return ArraySubquery(
        query.annotate(
            full_name=statements.joined_text("content_type__app_label", "codename", ".")
        ).values("full_name")
    )


@cache
def _read() -> tuple[str, tuple[str, ...]]:
    """Django's read of one user by primary key, as the ORM writes it, and its columns; then
    the names of the permissions granted to the user and to its groups (ModelBackend's
    `_get_user_permissions` / `_get_group_permissions`), as two arrays."""
    user_model = get_user_model()
    names = tuple(f.attname for f in user_model._meta.concrete_fields)
    query = (
        user_model._default_manager.filter(pk=0)
        .order_by()
        .annotate(
            granted_to_user=_permission_names(Permission.objects.filter(user=OuterRef("pk"))),
            granted_to_groups=_permission_names(
                Permission.objects.filter(group__user=OuterRef("pk"))
            ),
        )
        .values_list(*names, "granted_to_user", "granted_to_groups")
    )
    return orm_sql(query, [0]), names


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        """Django's answer, the user's permissions read in the same statement: they are set as
        ModelBackend's own per-user caches (`_user_perm_cache`, `_group_perm_cache`,
        `_perm_cache`), so `has_perm` in this request asks PostgreSQL nothing more (the desk
        checks its grant on every scan; the admin on every page). A user is read anew on each
        request, so a grant revoked holds from the next request, as with Django's backend. A
        superuser's are left to Django (every permission, read when asked)."""
        user_model = get_user_model()
        sql, names = _read()
        found = statements.rows(sql, [user_model._meta.pk.get_prep_value(user_id)])
        if not found:
            return None
        row = found[0]
        user = user_model.from_db(DEFAULT_DB_ALIAS, names, row[: len(names)])
        if not self.user_can_authenticate(user):
            return None
        if not user.is_superuser:
            granted_to_user, granted_to_groups = set(row[-2]), set(row[-1])
            user._user_perm_cache = granted_to_user
            user._group_perm_cache = granted_to_groups
            user._perm_cache = granted_to_user | granted_to_groups
        return user

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and password is not None:
            raise PermissionDenied  # see the module docstring: not checked twice
        return user
