"""The end of a transactional test: every table emptied by DELETEs in one transaction instead
of Django's `flush` (test infrastructure).

Django's `TransactionTestCase` (pytest-django's `transactional_db`, `live_server` and
`django_db(transaction=True)`) ends each test with `manage.py flush`: one TRUNCATE of every
table, then the `post_migrate` signal re-creating the content types and permissions it has just
removed. On this project's 53 tables that took 0.3–0.5 s per test, about a tenth of the whole
suite. The DELETEs below take about 10 ms and leave the tables as the migrations left them:

- every table of the installed models is emptied, as by `flush`, except the three whose rows
  come from the code and never from a test (`KEPT`): the migrations' record, the content types
  and the permissions (`flush` removes and re-creates those two, the same rows under new ids);
- the DELETEs run with `session_replication_role = replica` for their transaction only, so no
  trigger fires: neither the foreign keys' checks (the order of the tables does not matter)
  nor the project's own guards (the append-only audit trail refuses a DELETE, as it should
  everywhere else). That setting takes a superuser (`make test` connects as `postgres`);
  without one the test ends with Django's `flush` as before;
- the reference data (the stages, the groups and their permissions: `events.reference_data`)
  is put back in the same transaction, from a copy taken once per run of what
  `reference_data.ensure()` creates on emptied tables: `ensure()` rebuilt it at the start of
  every test after a transactional one, about 80 ms each time, and now finds it there;
- sequences go on counting, as after `flush` without `reset_sequences`.

Tests that ask for more than this (`available_apps`, `serialized_rollback`) keep Django's own
teardown. After a `flush` the stages and groups come back at the next test's start
(tests/conftest.py `_reference_data`).
"""

from __future__ import annotations

import psycopg
from django.core.management import call_command
from django.db import DatabaseError, connections, transaction
from django.test import TransactionTestCase

KEPT = frozenset({"django_migrations", "django_content_type", "auth_permission"})

# alias -> [(table, columns, rows)] of the reference data, as `ensure()` made it (`_reference`)
_REFERENCE: dict[str, list[tuple[str, list[str], list[tuple]]]] = {}

_django_teardown = TransactionTestCase._fixture_teardown


class _NotAllowed(Exception):
    """The connection may not turn triggers off."""


def empty_tables(alias: str) -> bool:
    """Empty every table of the installed models on `alias` but `KEPT` and put the reference
    data back, in one transaction with triggers off (the first call of a run makes the
    reference data and copies it, `_reference`); False (nothing changed) when the connection
    may not turn triggers off."""
    connection = connections[alias]
    tables = sorted(
        set(connection.introspection.django_table_names(only_existing=True, include_views=False))
        - KEPT
    )
    quote = connection.ops.quote_name
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            try:
                cursor.execute("SET LOCAL session_replication_role = replica")
            except DatabaseError as exc:
                if isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
                    raise _NotAllowed from exc  # not a superuser: nothing deleted
                raise
            # table names from the models' meta, quoted; no value is spliced in
            cursor.execute("; ".join(f"DELETE FROM {quote(table)}" for table in tables))  # noqa: S608
            for table, columns, rows in _REFERENCE.get(alias, ()):
                names = ", ".join(quote(column) for column in columns)
                values = ", ".join([f"({', '.join(['%s'] * len(columns))})"] * len(rows))
                cursor.execute(
                    f"INSERT INTO {quote(table)} ({names}) VALUES {values}",  # noqa: S608
                    [value for row in rows for value in row],
                )
    except _NotAllowed:
        return False
    if alias not in _REFERENCE:
        _REFERENCE[alias] = _reference(alias)
    return True


def _reference(alias: str) -> list[tuple[str, list[str], list[tuple]]]:
    """Create the reference data on the emptied tables (`ensure()`) and copy its rows."""
    from django.contrib.auth.models import Group

    from events import reference_data
    from events.models import Stage

    reference_data.ensure()
    connection = connections[alias]
    quote = connection.ops.quote_name
    copied = []
    for model in (Stage, Group, Group.permissions.through):
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT * FROM {quote(table)} ORDER BY 1")  # noqa: S608
            columns = [column.name for column in cursor.description]
            rows = cursor.fetchall()
        if rows:
            copied.append((table, columns, rows))
    return copied


def _fixture_teardown(self: TransactionTestCase) -> None:
    if self.available_apps is not None or self.serialized_rollback:
        _django_teardown(self)
        return
    for alias in self._databases_names(include_mirrors=False):
        if not empty_tables(alias):
            call_command(
                "flush", verbosity=0, interactive=False, database=alias, reset_sequences=False
            )


def install() -> None:
    """Replace TransactionTestCase's teardown for the run (tests/conftest.py)."""
    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]
