"""config.postgres: timestamptz values through psycopg's C loader, equal to Django's own."""

from __future__ import annotations

import datetime
import zoneinfo

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.db.backends.postgresql.psycopg_any import register_tzloader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.postgres import base as backend

pytestmark = pytest.mark.django_db

UTC = datetime.UTC
SQL = "SELECT x::timestamptz FROM unnest(%s::text[]) AS x"


def _load(texts: list[str], *, django: bool, session_tz: str = "UTC") -> list:
    """The values of `texts` cast to timestamptz, read as text through either loader; an
    exception's type when the read fails."""
    try:
        with transaction.atomic(), connection.cursor() as wrapper:
            if django:
                register_tzloader(connection.timezone, wrapper.cursor)  # what Django registers
            wrapper.execute(f"SET LOCAL TIME ZONE '{session_tz}'")
            wrapper.execute(SQL, [texts])
            values = [row[0] for row in wrapper.fetchall()]
            wrapper.execute("SET LOCAL TIME ZONE 'UTC'")
            return values
    except DatabaseError as error:
        return [type(error), str(error).split(":")[0]]


def test_the_connection_reads_timestamptz_through_the_c_loader():
    connection.ensure_connection()
    assert connection.vendor == "postgresql"
    with connection.cursor() as wrapper:
        # Django's create_cursor kept the connection's loader: no per-cursor copy of Django's.
        loader_class = wrapper.cursor.adapters.get_loader(backend.TIMESTAMPTZ_OID, 0)
        assert loader_class is backend.UtcTimestamptzLoader
        loader = loader_class(backend.TIMESTAMPTZ_OID, wrapper.cursor)
    assert psycopg.pq.__impl__ in ("c", "binary")  # the project installs psycopg[binary]
    assert backend.FAST_LOADER.__module__.startswith("psycopg_binary")
    assert type(loader.load.__self__) is backend.FAST_LOADER
    with connection.cursor() as wrapper:
        wrapper.execute("SELECT now()")
        (now,) = wrapper.fetchone()
    assert now.tzinfo is UTC


aware = st.datetimes(
    min_value=datetime.datetime(1, 1, 2),
    max_value=datetime.datetime(9999, 12, 30),
    timezones=st.sampled_from(
        [UTC, zoneinfo.ZoneInfo("Europe/Paris"), zoneinfo.ZoneInfo("Asia/Kolkata")]
        + [datetime.timezone(datetime.timedelta(minutes=m)) for m in (-570, -60, 45, 345)]
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(aware, min_size=1, max_size=20))
def test_values_equal_djangos_own_loader(values):
    texts = [v.isoformat() for v in values]
    ours = _load(texts, django=False)
    theirs = _load(texts, django=True)
    assert ours == theirs == [v.astimezone(UTC) for v in values]
    assert all(v.tzinfo is UTC for v in ours)


@pytest.mark.parametrize(
    "text",
    ["infinity", "-infinity", "0044-03-15 12:00:00+00 BC", "9999-12-31 23:59:59.999999-14"],
)
def test_values_python_cannot_hold_fail_as_with_djangos_loader(text):
    assert _load([text], django=False) == _load([text], django=True)


def test_a_session_moved_off_utc_reads_as_djangos_loader_does():
    # Django's loader keeps the wall time and sets UTC; the C loader would convert. A session
    # whose TimeZone someone changed must read exactly as it does with Django's loader.
    texts = ["2026-06-01 12:00:00+00", "2026-12-01 23:30:00-05"]
    ours = _load(texts, django=False, session_tz="Europe/Paris")
    theirs = _load(texts, django=True, session_tz="Europe/Paris")
    assert ours == theirs
    assert [v.tzinfo for v in ours] == [UTC, UTC]
