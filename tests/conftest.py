"""Shared fixtures: the real PostgreSQL (pytest-django's test_… database) and Redis."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests import parallel

# Written by tests/events/api_description/test_schemathesis.py.
CASES_FILE = Path(__file__).resolve().parents[1] / "test-output" / "schemathesis-cases.txt"


def pytest_configure(config):
    """Fast password hashing for the whole run (tests/hashers.py); the faster end of a
    transactional test."""
    config._started_at = time.time()
    from django.conf import settings

    from tests import emptying

    settings.PASSWORD_HASHERS = ["tests.hashers.OneIterationPBKDF2PasswordHasher"]
    emptying.install()  # a transactional test ends with DELETEs, not `flush` (tests/emptying.py)


@pytest.fixture(autouse=True)
def _reference_data(request):
    """Stages and groups come from a migration; a `flush` removes them (tests/emptying.py puts
    them back itself).
    Every test that reaches the database gets them back, whether it asks through the marker or
    through a fixture (`db`, `transactional_db`, `live_server`), whatever ran before it."""
    marker = request.node.get_closest_marker("django_db")
    if marker is not None:
        name = "transactional_db" if marker.kwargs.get("transaction", False) else "db"
    elif "transactional_db" in request.fixturenames or "live_server" in request.fixturenames:
        name = "transactional_db"
    elif "db" in request.fixturenames:
        name = "db"
    else:
        return
    request.getfixturevalue(name)
    from events import reference_data

    reference_data.ensure()


@pytest.fixture(scope="module")
def demo_data(request, django_db_setup, django_db_blocker):
    """`manage.py seed_demo`, once per test module, inside a transaction rolled back when the
    module ends. Each test's own transaction (pytest-django's `db`) nests in it as a savepoint,
    so a test still sees only the demo plus its own rows. Seeding per test cost ~1 s each.
    Once it is open, every later test of the module runs inside it: `_demo_data_guard` fails a
    test that did not ask for it (it would see rows it does not expect), and a transactional
    test (its flush) cannot run there at all."""
    from io import StringIO

    from django.core.management import call_command
    from django.db import transaction

    from events import reference_data

    with django_db_blocker.unblock(), transaction.atomic():
        reference_data.ensure()
        call_command("seed_demo", stdout=StringIO())
        request.module._demo_data_open = True
        try:
            yield
        finally:
            request.module._demo_data_open = False
            transaction.set_rollback(True)


@pytest.fixture(autouse=True)
def _demo_data_guard(request):
    if getattr(request.module, "_demo_data_open", False) and (
        "demo_data" not in request.fixturenames
    ):
        pytest.fail(
            "the module's demo transaction (tests/conftest.py demo_data) is open: ask for "
            "demo_data, or move this test before the first test that does"
        )


@pytest.fixture
def now() -> datetime:
    return datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def actor():
    from events.services.audit import Actor

    return Actor("system", label="tests")


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on, of this xdist worker's own band (tests/parallel.py)."""
    return parallel.free_port()


def days(n: float) -> timedelta:
    return timedelta(days=n)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The Schemathesis run's cases per operation, when this session ran it (the file its test
    writes: tests/events/api_description/test_schemathesis.py), also under -q and xdist."""
    started = getattr(config, "_started_at", None)
    if CASES_FILE.is_file() and started is not None and CASES_FILE.stat().st_mtime >= started:
        terminalreporter.write_sep("-", "Schemathesis")
        terminalreporter.write(CASES_FILE.read_text())
