"""psycopg's pipeline mode on Django's connection, for the booking (bench B1).

In pipeline mode a statement is sent without waiting for its answer; the answers of everything
sent come back together at the next sync (or when the block ends). The booking uses it to send
its reads under the Event lock as one round trip and its writes as another
(registrations.register). Every statement still runs in order, in the caller's transaction:
pipelining changes when the client waits, not what the server does.

- `pipelined()` wraps psycopg's `Connection.pipeline()`; errors raised at a sync or at the
  block's end (a unique or foreign-key violation of a queued INSERT) come out as Django's
  database errors (IntegrityError …), like those of an ordinary `cursor.execute`;
- a result is read from its cursor after a `sync()` (or after the block), never before;
- psycopg starts a transaction (BEGIN) with a sync of its own, so the first statement of a
  transaction costs its own round trip whatever the mode;
- `cursor()` binds parameters on the server, so psycopg prepares a statement it has seen
  before on this connection (DATABASES OPTIONS `prepare_threshold`): PostgreSQL then parses
  and plans it once per connection instead of on every booking. Django's own cursors bind on
  the client and never prepare. Only statements with a fixed text use it (names from model
  meta, a placeholder count set by the number of rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]  # psycopg 3 only
    CursorDebugWrapper,
    ServerBindingCursor,
)


class Pipeline:
    def __init__(self, pipeline) -> None:
        self._pipeline = pipeline

    def sync(self) -> None:
        """Send what is queued and wait for every answer (one round trip)."""
        with connection.wrap_database_errors:
            self._pipeline.sync()


class _Logged(CursorDebugWrapper):
    """Django's debug wrapper, logging the statement's text: the executed query it would read
    back from psycopg is empty for a prepared statement."""

    def debug_sql(self, sql=None, params=None, use_last_executed_query=False, many=False):
        return super().debug_sql(sql, params, use_last_executed_query=False, many=many)


def cursor():
    """A Django cursor (logged like any other) whose parameters are bound on the server."""
    wrapper = connections[DEFAULT_DB_ALIAS]  # the proxy `connection` resolves on every access
    wrapper.ensure_connection()
    raw = ServerBindingCursor(wrapper.connection)
    if wrapper.queries_logged:
        return _Logged(raw, wrapper)
    return wrapper.make_cursor(raw)


@contextmanager
def pipelined() -> Iterator[Pipeline]:
    """Statements executed inside the block are queued; the block's end sends and waits for
    whatever is still queued (one round trip)."""
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline() as pipeline:
        yield Pipeline(pipeline)
