"""Django's model authentication backend, checking a password once per failed login.

Django's `authenticate` asks every listed backend in turn; a backend that answers None lets the
next one try. Django's ModelBackend stays listed after this one (config/settings.py) because a
session remembers the backend that signed its user in and Django drops a session whose backend
is not listed: sessions Django's backend signed in stay valid (a rolling deploy moves staff
between hosts of both releases). It is never asked to check a password: a failed check here
ends the chain (PermissionDenied, which Django's `authenticate` reports as the failed login it
is) instead of running the same check, a full password hash, a second time.

Everything else (reading the signed-in user, `is_active`, permissions) is Django's ModelBackend.
"""

from __future__ import annotations

from django.contrib.auth import backends
from django.core.exceptions import PermissionDenied


class ModelBackend(backends.ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and password is not None:
            raise PermissionDenied  # see the module docstring: not checked twice
        return user
