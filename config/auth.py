"""Django's model authentication backend, its user read written by the ORM once and taken from
the session's read when it came with it, checking a password once per failed login.

- `get_user` runs on every request of a signed-in user (the desk's scans, the admin). Django's
  (`User._default_manager.get(pk=…)`) compiles the same query each time, which costs more CPU
  than PostgreSQL spends running it, and is a round trip of its own after the session's. Here
  the session's read (config.sessions) reads the user its row names, with the user's grants,
  in the same statement; AuthenticationMiddleware hands that row to `get_user` while Django's
  `get_user` runs for the request, and `get_user` takes it when the session's data names the
  same user. Otherwise (a session Django's backend signed in, a call outside a request) it
  reads the user itself with a statement the ORM wrote once per process, run prepared
  (`statements.rows`: planned once per connection). Django's answer either way: the user when
  the row exists and may authenticate (`is_active`), else None. Permissions are Django's
  ModelBackend's, read with the user.
- Django's `authenticate` asks every listed backend in turn; a backend that answers None lets
  the next one try. Django's ModelBackend stays listed after this one (config/settings.py)
  because a session remembers the backend that signed its user in and Django drops a session
  whose backend is not listed: sessions Django's backend signed in stay valid (a rolling deploy
  moves staff between hosts of both releases). It is never asked to check a password: a failed
  check here ends the chain (PermissionDenied, which Django's `authenticate` reports as the
  failed login it is) instead of running the same check, a full password hash, a second time.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.contrib import auth as django_auth
from django.contrib.auth import SESSION_KEY, backends, get_user_model, middleware
from django.contrib.auth.models import Permission
from django.contrib.postgres.expressions import ArraySubquery
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DEFAULT_DB_ALIAS
from django.db.models import OuterRef
from django.utils.functional import SimpleLazyObject

from events.read import statements
from events.read.statements import orm_sql

GRANTS = ("granted_to_user", "granted_to_groups")


def _permission_names(query) -> ArraySubquery:
    """ "app_label.codename" of each permission of `query`, as Django's ModelBackend names them
    (the separator in the text, not a parameter: the statement takes only its own values)."""
    return ArraySubquery(
        query.annotate(
            full_name=statements.joined_text("content_type__app_label", "codename", ".")
        ).values("full_name")
    )


def grants(user_id: str) -> dict[str, ArraySubquery]:
    """The names of the permissions granted to the user whose id is the outer query's
    `user_id` column, and to its groups (ModelBackend's `_get_user_permissions` /
    `_get_group_permissions`), as the two annotations GRANTS."""
    return {
        "granted_to_user": _permission_names(Permission.objects.filter(user=OuterRef(user_id))),
        "granted_to_groups": _permission_names(
            Permission.objects.filter(group__user=OuterRef(user_id))
        ),
    }


@cache
def user_names() -> tuple[str, ...]:
    """The user model's columns, in its field order."""
    return tuple(f.attname for f in get_user_model()._meta.concrete_fields)


@cache
def _read() -> str:
    """Django's read of one user by primary key, as the ORM writes it, with its grants."""
    query = (
        get_user_model()
        ._default_manager.filter(pk=0)
        .order_by()
        .annotate(**grants("pk"))
        .values_list(*user_names(), *GRANTS)
    )
    return orm_sql(query, [0])


@dataclass(frozen=True)
class SignedIn:
    """The user a session's row names (`user_id`) and the values `_read` answers for it (the
    user's columns, then GRANTS), read with the session (config.sessions)."""

    user_id: Any
    row: tuple


# The user read with this request's session, while Django's `get_user` runs for it (set by
# AuthenticationMiddleware only): a thread never keeps it past that call.
_signed_in: ContextVar[SignedIn | None] = ContextVar("signed_in", default=None)


class AuthenticationMiddleware(middleware.AuthenticationMiddleware):
    """Django's, its `request.user` taking the user read with the session when the session's
    data names that same user (config.sessions): no second read. Otherwise, and for a user
    Django's backend signed in, Django's answer as it reads it."""

    def process_request(self, request):
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _request_user(request))


def _request_user(request):
    if not hasattr(request, "_cached_user"):
        session = request.session
        session.get(SESSION_KEY)  # loads the session: its read reads the user with it
        token = _signed_in.set(getattr(session, "signed_in", None))
        try:
            request._cached_user = django_auth.get_user(request)
        finally:
            _signed_in.reset(token)
    return request._cached_user


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        """Django's answer, the user's permissions read in the same statement: they are set as
        ModelBackend's own per-user caches (`_user_perm_cache`, `_group_perm_cache`,
        `_perm_cache`), so `has_perm` in this request asks PostgreSQL nothing more (the desk
        checks its grant on every scan; the admin on every page). Within a request, the user
        read with its session (`_signed_in`) when that is the user asked for; else one read.
        A user is read anew on each request, so a grant revoked holds from the next request,
        as with Django's backend. A superuser's are left to Django (every permission, read
        when asked)."""
        user_model = get_user_model()
        try:
            pk = user_model._meta.pk.to_python(user_id)
        except ValidationError:
            return None
        signed_in = _signed_in.get()
        if signed_in is not None and signed_in.user_id == pk:
            row = signed_in.row
        else:
            found = statements.rows(_read(), [user_model._meta.pk.get_prep_value(pk)])
            if not found:
                return None
            row = found[0]
        names = user_names()
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
