"""Shared fixtures: the real PostgreSQL (pytest-django's test_… database) and Redis."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest


def pytest_configure(config):
    """Fast password hashing for the whole run (tests/hashers.py)."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["tests.hashers.OneIterationPBKDF2PasswordHasher"]


@pytest.fixture(autouse=True)
def _reference_data(request):
    """Stages and groups come from a migration; a transactional test's flush removes them."""
    marker = request.node.get_closest_marker("django_db")
    if marker is None:
        return
    transactional = marker.kwargs.get("transaction", False)
    request.getfixturevalue("transactional_db" if transactional else "db")
    from events import reference_data

    reference_data.ensure()


@pytest.fixture
def now() -> datetime:
    return datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def actor():
    from events.services.audit import Actor

    return Actor("system", label="tests")


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def days(n: float) -> timedelta:
    return timedelta(days=n)
