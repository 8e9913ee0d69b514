"""A password hasher for the test run: Django's PBKDF2 with one iteration.

Django 5.2's default PBKDF2 runs 1,000,000 iterations: about 0.45 s of CPU per hash on a slow
2-core host, paid by every user a test creates (the factories, pytest-django's `admin_user`)
and every login. The hashes it writes are ordinary `pbkdf2_sha256$1$…` strings, which the
production hasher verifies too (the iteration count travels in the hash), so a process started
by a test with the real settings (`make run`, gunicorn) still logs these users in.
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneIterationPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
