"""Django's PostgreSQL backend, with timestamptz values parsed by psycopg's C loader.

Django's psycopg 3 support registers its own timestamptz loader on every connection
(django.db.backends.postgresql.psycopg_any.BaseTzLoader): a Python subclass of psycopg's
pure-Python loader, which parses the text and then sets the value's tzinfo to the connection's
timezone. Being a Python subclass, it never reaches the C parser that psycopg's binary package
ships: 2.7 µs per value against 0.4 µs on this project's machines (docs/benchmarks.md). Every
datetime read through the ORM pays it: a list page of 100 registrations reads 400 of them.

With USE_TZ the connection's timezone is UTC and Django sets the session's TimeZone to it when
it connects (`ensure_timezone`). psycopg's C loader converts a value to the session's timezone,
so while the session's TimeZone is UTC its values are Django's: the same instants with the same
tzinfo object (`datetime.timezone.utc`). `UtcTimestamptzLoader` hands each value to the C loader
when its connection's session is in UTC, and parses as Django does otherwise (a session whose
TimeZone someone changed, psycopg's pure-Python build). The backend registers it only where
Django's own choice would be UTC (USE_TZ, connection timezone UTC); anything else keeps Django's
loader. tests/events/database/test_postgres_backend.py compares both loaders' values.

Django checks, for every cursor, that the connection's loader carries the connection's timezone
(`timezone`); this loader does, so no cursor copies the adapters map to register Django's.
"""

from __future__ import annotations

import datetime
from functools import cache

from django.conf import settings
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper
from psycopg import adapt, adapters
from psycopg.pq import Format
from psycopg.types.datetime import TimestamptzLoader as PythonTimestamptzLoader

UTC = datetime.UTC
TIMESTAMPTZ_OID = adapters.types["timestamptz"].oid
# psycopg's own text loader: the C one from psycopg's binary package when it is installed
# (psycopg registers its optimised classes in place of the Python ones), else the Python one.
FAST_LOADER = adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)


class UtcTimestamptzLoader(adapt.Loader):
    """timestamptz text to an aware datetime in UTC (see the module docstring)."""

    timezone = UTC  # read by Django's create_cursor

    def __init__(self, oid: int, context: adapt.AdaptContext | None = None):
        super().__init__(oid, context)
        connection = self.connection
        if connection is not None and connection.info.timezone is UTC:
            # The C loader's bound method, called directly for every value of the column.
            self.load = FAST_LOADER(oid, context).load  # type: ignore[method-assign]
        else:
            self._python = PythonTimestamptzLoader(oid, context)

    def load(self, data):
        # Django's own behaviour, for a session not in UTC: parse, then force the tzinfo.
        return self._python.load(data).replace(tzinfo=UTC)


@cache
def _with_utc_loader(template: adapt.AdaptersMap) -> adapt.AdaptersMap:
    context = adapt.AdaptersMap(template)
    context.register_loader("timestamptz", UtcTimestamptzLoader)
    return context


class DatabaseWrapper(PostgresWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        if settings.USE_TZ and self.timezone is UTC and "context" in params:
            params["context"] = _with_utc_loader(params["context"])
        return params
