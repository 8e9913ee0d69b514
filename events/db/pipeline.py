"""psycopg's pipeline mode on Django's connection, for the transitions and the hot reads.

In pipeline mode a statement is sent without waiting for its answer; the answers of everything
sent come back together at the next sync (or when the block ends). Transitions use it to send
BEGIN with their locks as one round trip and their writes with COMMIT as another
(registrations.transitions._transition); a booking in a caller's transaction reads its inputs
under the Event lock that way (events.db.booking.read_inputs). Every statement still runs in
order, in the caller's transaction: pipelining changes when the client waits, not what the
server does.

- `pipelined()` wraps psycopg's `Connection.pipeline()`; errors raised at a sync or at the
  block's end (a unique or foreign-key violation of a queued INSERT) come out as Django's
  database errors (IntegrityError …), like those of an ordinary `cursor.execute`;
- a result is read from its cursor after a `sync()` (or after the block), never before;
- psycopg starts a transaction (BEGIN) with a sync of its own, so the first statement of a
  transaction costs its own round trip — unless the block opens the transaction itself
  (`own_transaction`): then BEGIN travels with the first statements, and the COMMIT may travel
  with the last (`Pipeline.commit`); BEGIN and COMMIT are not logged as statements, as when
  psycopg sends them;
- `cursor()` binds parameters on the server, so psycopg prepares a statement it has seen
  before on this connection (DATABASES OPTIONS `prepare_threshold`): PostgreSQL then parses
  and plans it once per connection instead of on every booking. Django's own cursors bind on
  the client and never prepare. Only statements with a fixed text use it (names from model
  meta, a placeholder count set by the number of rows).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    InterfaceError,
    OperationalError,
    connection,
    connections,
)
from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]  # psycopg 3 only
    CursorDebugWrapper,
    ServerBindingCursor,
)
from psycopg import pq

logger = logging.getLogger("events.pipeline")

T = TypeVar("T")


class Pipeline:
    def __init__(self, pipeline, owns_transaction: bool, wrapper) -> None:
        self._pipeline = pipeline
        self._wrapper = wrapper
        self.owns_transaction = owns_transaction
        self.commit_at_end = False

    def sync(self) -> None:
        """Send what is queued and wait for every answer (one round trip)."""
        with self._wrapper.wrap_database_errors:
            self._pipeline.sync()

    def commit(self) -> None:
        """Ask for the COMMIT of the transaction this pipeline belongs to (`own_transaction`:
        opened by it, or by its outermost atomic block) to be queued when the block ends
        without an exception and Django has not marked the transaction for rollback
        (`transaction.set_rollback`, an error caught after an inner atomic block): it then
        runs after everything queued before it, and the server skips it when any of those
        failed. Otherwise nothing: the atomic block commits as usual."""
        self.commit_at_end = self.owns_transaction


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


def in_pipeline() -> bool:
    """Whether Django's connection is in psycopg's pipeline mode (inside `pipelined()`)."""
    raw = connection.connection
    return raw is not None and raw.pgconn.pipeline_status != pq.PipelineStatus.OFF


def first_read(read: Callable[[], T]) -> T:
    """Run a request's first statement, `read` (a read, harmless to repeat), in place of
    Django's per-request health check: the `SELECT 1` CONN_HEALTH_CHECKS sends before a
    request's first Django cursor costs a round trip on every request (bench B2, B5). When
    `read` finds the kept connection dropped since the last request (a failover, a restart) and
    health checks are on, the connection is replaced and `read` runs once more — the answer the
    health check would have given. Any other error is raised, and nothing is retried inside a
    transaction (an atomic block, or autocommit turned off). The connection then counts as
    checked for the rest of the request."""
    try:
        result = read()
    except (OperationalError, InterfaceError):
        kept = connection.connection
        if (
            not connection.settings_dict["CONN_HEALTH_CHECKS"]
            or connection.in_atomic_block
            or not connection.autocommit  # the flag: get_autocommit() would reconnect
            or kept is None
            or not kept.closed
        ):
            raise
        connection.close()
        result = read()
    # Proven usable: Django's own check (BaseDatabaseWrapper.close_if_health_check_failed) need
    # not send its SELECT 1 later in this request.
    connection.health_check_done = True  # type: ignore[attr-defined]
    return result


def first_transaction(work: Callable[[Callable[[], None]], T]) -> T:
    """Run a request's first transaction, `work`, in place of Django's per-request health
    check (the `SELECT 1` CONN_HEALTH_CHECKS sends when the request's first atomic block opens
    on a kept connection). `work` opens the outermost atomic block, sends BEGIN with its first
    statement (`pipelined(own_transaction=True)`) and calls the function it is given once that
    first round trip came back. When that round trip finds the kept connection dropped since the
    last request (a failover, a restart) and health checks are on, the connection is replaced
    and `work` runs once more: nothing of the first attempt outlived the dead connection. Any
    other error, and any error after the first round trip, is raised. Inside a transaction (or
    with autocommit off) `work` just runs."""
    if connection.in_atomic_block or not connection.autocommit:
        return work(lambda: None)
    kept = connection.connection
    answered = False

    def first_round_answered() -> None:
        nonlocal answered
        answered = True

    # Proven usable by the first round trip itself (or replaced below): Django's own check need
    # not send its SELECT 1 when `work` opens its atomic block.
    connection.health_check_done = True  # type: ignore[attr-defined]
    try:
        return work(first_round_answered)
    except (OperationalError, InterfaceError):
        if (
            answered
            or kept is None  # a new connection: there was nothing kept to check
            or not connection.settings_dict["CONN_HEALTH_CHECKS"]
            or not kept.closed  # the kept connection lives: a real error
        ):
            raise
        logger.warning("the kept database connection was dropped; a new one takes the request")
        if connection.connection is kept:  # not yet replaced by the atomic block's end
            connection.close()
        return work(lambda: None)


@contextmanager
def pipelined(*, own_transaction: bool = False) -> Iterator[Pipeline]:
    """Statements executed inside the block are queued; the block's end sends and waits for
    whatever is still queued (one round trip).

    `own_transaction`: the block belongs to the transaction of an outermost
    `transaction.atomic()` (not a savepoint, not a transaction managed by hand). Run first
    thing in that block (nothing sent in it yet), it opens the transaction itself — BEGIN is
    queued with the block's first statements instead of costing a round trip of its own; run
    later in it (the transaction under way, begun by an earlier block or statement of that
    atomic block), it opens nothing. Either way it may queue the COMMIT (`Pipeline.commit`).
    Anywhere else (a savepoint) it changes nothing and the atomic block commits as usual."""
    wrapper = connections[DEFAULT_DB_ALIAS]  # the proxy `connection` resolves on every access
    wrapper.ensure_connection()
    raw = wrapper.connection
    owned = own_transaction and _may_own_transaction(wrapper, raw)
    begin = owned and raw.info.transaction_status == pq.TransactionStatus.IDLE
    if begin:
        # psycopg would send BEGIN with a sync of its own; in autocommit it sends none, and the
        # BEGIN queued below opens the transaction. Django's atomic block still ends it: its
        # commit (or rollback) is a no-op once the queued COMMIT ran, and it restores
        # autocommit as always.
        raw.autocommit = True
    failure: Exception | None = None
    try:
        try:
            with wrapper.wrap_database_errors, raw.pipeline() as pipeline:
                if begin:
                    raw.execute(b"BEGIN", prepare=False)
                pipe = Pipeline(pipeline, owned, wrapper)
                try:
                    with wrapper.wrap_database_errors:
                        yield pipe
                        if pipe.commit_at_end and not wrapper.needs_rollback:
                            raw.execute(b"COMMIT", prepare=False)
                except Exception as exc:
                    # Leave psycopg's pipeline block normally (its end sends what is queued, as
                    # always) and raise the block's error after it: see _ended_after.
                    failure = exc
        except DatabaseError as end_error:
            if failure is None:
                raise
            _ended_after(failure, end_error)
    finally:
        if owned and raw.info.transaction_status == pq.TransactionStatus.IDLE:
            # Committed (or never begun): a statement after the block starts a transaction
            # of its own again, which the atomic block commits.
            raw.autocommit = False
        elif begin and not raw.closed:
            # The transaction goes on after the block (its COMMIT was not queued: statements
            # follow, or a failure is on its way out to the atomic block's rollback).
            _autocommit_off_in_transaction(raw)
    if failure is not None:
        raise failure


def _autocommit_off_in_transaction(raw) -> bool:
    """psycopg's autocommit flag back to False inside the transaction the block opened, where
    its setter refuses any change. Left True, Django would open server-side cursors
    (`.iterator()`) WITH HOLD there (`DatabaseWrapper.create_cursor` reads the flag), which
    PostgreSQL refuses for `FOR UPDATE` and keeps open past COMMIT otherwise. psycopg keeps the
    flag in `_autocommit` and reads it to decide whether a statement must send BEGIN first —
    never with a transaction open — and not at COMMIT or ROLLBACK; the atomic block's end sets
    it again through the setter, the transaction then over. False, and nothing changed, when
    that attribute is not there (another psycopg version):
    tests/events/database/test_pipeline.py says so."""
    if not isinstance(getattr(raw, "_autocommit", None), bool):
        return False
    raw._autocommit = False
    return True


def _ended_after(failure: Exception, end_error: DatabaseError) -> None:
    """The block failed (`failure`, raised once the pipeline ended) and the pipeline's end
    raised `end_error`. When a statement failed, the server skipped what was queued behind it
    (the hooks' statements, COMMIT) and their answer at the end is "pipeline aborted": expected,
    and the statement's own error is the one raised. The error can reach the client while the
    block still queues (psycopg raises it at a later `execute`, the queued COMMIT included). Had
    the block left psycopg's pipeline with the error in flight, psycopg would log a WARNING
    about the skipped statements on every such refusal (a sold-out booking in a rush). Any
    other error at the end (the connection lost meanwhile) must not replace the block's own on
    its way out either; it is logged, and the connection is dealt with as the block's error
    is."""
    if isinstance(end_error.__cause__, psycopg.errors.PipelineAborted):
        return
    logger.warning(
        "pipeline ended with an error after the block failed (%r): %s", failure, end_error
    )


def _may_own_transaction(wrapper, raw) -> bool:
    """Whether the transaction is, or is to be, the outermost atomic block's own: not begun
    yet (IDLE), or under way since that block began (INTRANS; an aborted one is not), and
    not marked to be rolled back (`transaction.set_rollback(True)`: nothing may commit)."""
    return (
        wrapper.in_atomic_block
        and len(wrapper.atomic_blocks) == 1
        and wrapper.commit_on_exit  # not a transaction the caller manages by hand
        and not wrapper.needs_rollback
        and not wrapper.savepoint_ids
        and not raw.autocommit
        and raw.info.transaction_status in _OWNABLE
    )


_OWNABLE = (pq.TransactionStatus.IDLE, pq.TransactionStatus.INTRANS)
