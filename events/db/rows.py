"""Plain statements for the hot paths (transitions, the desk, the seam), beside the ORM.

- `insert_statement(instances)` is one multi-row INSERT (sql, params) with no RETURNING: the
  caller knows every primary key it needs. Each value goes through the field's `pre_save`
  (auto_now, auto_now_add) and `get_db_prep_save`, as the ORM's own INSERT does, so a field
  added to a model is written here too; the SQL text is cached per (model, with pk, row
  count), the per-field plan per (model, with pk: `insert_plan`). Two shortcuts: a value
  psycopg writes as it is (`_PLAIN`) skips the conversion (same result), and a DateTimeField's
  auto_now / auto_now_add takes one instant per statement, set on the instances as `pre_save`
  does (where the ORM takes one per field and row, microseconds apart).
- `combined(statements)` is one statement running several: every statement but the last
  becomes a data-modifying CTE (`WITH w0 AS (INSERT …), w1 AS (INSERT …) <last>`). PostgreSQL
  runs every part, in one snapshot, and an error in any part (a unique or foreign-key
  violation) fails the whole statement. Every statement but the last must not start with
  WITH; the last may (its CTEs follow the others: the seat guard, seats._guarded).
- `attach(instance, name, related)` caches a joined row as a foreign key's value.
- `fetch(sql, params)` runs one fixed statement prepared (the transitions' locks, the desk's
  and the seam's reads) and returns its rows; `fetch_many(statements)` several, answered in
  one round trip.
- `columns(model, alias)` is the select list of a model's columns, in field order;
  `load(model, cursor)` turns the rows of such a select into instances (`Model.from_db`) and
  `load_joined(models, rows)` the rows of a select joining several models' columns, and
  `from_json(model, objects)` the `to_jsonb(row)` objects of its table (each value through the
  field's `to_python`). Never `SELECT *`: a column added by a later migration sits at the
  table's end, not at its field's place in the model.

Why not `bulk_create` / `raw()`: they compile the same statement anew on every call, which
costs more CPU than PostgreSQL spends running it. In psycopg's pipeline mode a sent statement
is only queued; its error (an IntegrityError) is raised at the pipeline's next sync.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.utils import timezone
from psycopg import pq

from events.db import pipeline

M = TypeVar("M", bound=models.Model)
Statement = tuple[str, list[Any]]


@cache
def _fields(model: type[models.Model], with_pk: bool) -> tuple[models.Field, ...]:
    return tuple(f for f in model._meta.concrete_fields if with_pk or not f.primary_key)


@cache
def _insert_sql(model: type[models.Model], with_pk: bool, count: int) -> str:
    quote = connection.ops.quote_name
    fields = _fields(model, with_pk)
    columns = ", ".join(quote(f.column) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    values = ", ".join([row] * count)
    # Built from constants: names from model meta, a fixed placeholder tuple; values are params.
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {values}"  # noqa: S608


# Field classes (exactly these, no subclass) whose value psycopg writes as it is when it already
# has the field's Python type — what `get_db_prep_save` would return unchanged. A transition
# writes ~20 values; the field's own conversion runs for any other class or value.
_PLAIN: dict[type[models.Field], type] = {
    models.ForeignKey: int,
    models.AutoField: int,
    models.BigAutoField: int,
    models.BooleanField: bool,
    models.IntegerField: int,
    models.BigIntegerField: int,
    models.SmallIntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveSmallIntegerField: int,
    models.PositiveBigIntegerField: int,
    models.CharField: str,
    models.TextField: str,
    models.DateTimeField: datetime,  # aware values only (checked per value)
}


# The plan's mark for a DateTimeField (exactly) with auto_now or auto_now_add: on an INSERT its
# `pre_save` sets the instance's value to `timezone.now()`; one such value serves every field
# and row of a statement.
NOW = object()


def _plain_type(field: models.Field) -> type | object | None:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return NOW if type(field) is models.DateTimeField else None  # else pre_save sets it
    if isinstance(field, models.ForeignKey) and type(field.target_field) not in _PLAIN:
        return None
    return _PLAIN.get(type(field))


@cache
def _plan(model: type[models.Model], with_pk: bool) -> tuple[tuple[Any, str, Any], ...]:
    return tuple((f, f.attname, _plain_type(f)) for f in _fields(model, with_pk))


def insert_plan(model: type[models.Model]) -> tuple[tuple[Any, str, Any], ...]:
    """Per concrete field of the model, primary key included: (field, attname, the Python type
    psycopg writes as it is, `NOW` for an auto_now(_add) DateTimeField, or None: convert)."""
    return _plan(model, True)


def insert_statement(instances: Sequence[models.Model]) -> Statement:
    """The INSERT of the instances (all of one model). Primary keys: all given (they are
    written) or all None (the database draws them; the instances keep pk None). The instances
    count as saved from here on (`_state.adding` False)."""
    if not instances:
        raise ValueError("insert_statement() needs at least one instance")
    model = type(instances[0])
    with_pk = instances[0].pk is not None
    wrapper = None  # looked up when a value needs its field's conversion (a proxy's lookup)
    plain = _plan(model, with_pk)
    now: datetime | None = None
    params: list[Any] = []
    for obj in instances:
        if type(obj) is not model or (obj.pk is not None) != with_pk:
            raise TypeError("insert takes instances of one model, all with or all without pk")
        values = obj.__dict__
        for field, attname, python_type in plain:
            value: Any = values.get(attname)
            if python_type is NOW:
                now = now or timezone.now()
                values[attname] = value = now
            elif python_type is None or (
                value is not None
                and (
                    type(value) is not python_type
                    or (isinstance(value, datetime) and value.tzinfo is None)
                )
            ):
                wrapper = wrapper or connections[DEFAULT_DB_ALIAS]
                value = field.get_db_prep_save(field.pre_save(obj, True), wrapper)
            params.append(value)
        obj._state.adding = False
        obj._state.db = DEFAULT_DB_ALIAS
    return _insert_sql(model, with_pk, len(instances)), params


def combined(statements: Sequence[Statement]) -> Statement:
    """One statement running all of them; every one but the last as a data-modifying CTE (a
    last statement with CTEs of its own keeps them, after these)."""
    if not statements:
        raise ValueError("combined() needs a statement")
    before = list(statements)
    sql, params = before.pop()
    words = sql.split(None, 2)
    first = words[0].upper() if words else ""
    if first == "WITH" and len(words) > 1 and words[1].upper() == "RECURSIVE":
        raise ValueError("combined() cannot splice a WITH RECURSIVE statement")
    if not before:
        return sql, params
    ctes = [f"w{index} AS ({part})" for index, (part, _) in enumerate(before)]
    params = [p for _, part_params in before for p in part_params] + params
    if first == "WITH":
        # the statement's own CTEs follow these: "WITH" and its whitespace give way to ", "
        return f"WITH {', '.join(ctes)}, {sql.split(None, 1)[1]}", params
    return f"WITH {', '.join(ctes)} {sql}", params


def send(statements: Sequence[Statement]):
    """Send the statements as one (`combined`) on a new cursor, returned open: in pipeline
    mode the caller keeps it until the pipeline's sync, then reads (or just closes) it."""
    cursor = pipeline.cursor()
    try:
        cursor.execute(*combined(statements))
    except BaseException:
        cursor.close()  # an earlier statement's error can reach the client at this execute
        raise
    return cursor


def fetch(sql: str, params: Sequence[Any]) -> list[tuple]:
    """Every row of one fixed statement, run on a server-binding cursor (pipeline.cursor):
    psycopg prepares it on its second use on a connection, so the server plans it once. For
    statements whose text does not depend on the values (a list travels as one array
    parameter: `= ANY(%s)`). Inside a pipeline (a lazy read, the session or the signed-in user,
    met during a booking) the statement must return rows: its answer is waited for there and
    then, as psycopg's fetch does in pipeline mode (the description is unknown before)."""
    cursor = pipeline.cursor()
    try:
        cursor.execute(sql, params)
        if _answered_rows(cursor) or pipeline.in_pipeline():  # the cheap test first
            return cursor.fetchall()
        return []
    finally:
        cursor.close()


_ROWS = frozenset({pq.ExecStatus.TUPLES_OK, pq.ExecStatus.SINGLE_TUPLE})


def _answered_rows(cursor) -> bool:
    """Whether the cursor's statement answered rows (a SELECT, a RETURNING): psycopg's
    `description` tells the same, but builds a Column object per column to say it (eighty for
    the desk's lookup, on every scan)."""
    result = cursor.pgresult
    return result is not None and result.status in _ROWS


def fetch_many(
    statements: Sequence[Statement], *, own_transaction: bool = False
) -> list[list[tuple]]:
    """Every row of each fixed statement (as `fetch`), the statements sent together and
    answered in one round trip (pipeline.pipelined; `own_transaction`: BEGIN travels with them
    when they are the first thing of an outermost atomic block). They run in order: one after
    a row lock starts once the lock is granted and sees what was committed until then (READ
    COMMITTED takes a snapshot per statement). A failing statement fails the call (those after
    it are skipped); its error is raised, as `fetch` would."""
    cursors = []
    try:
        with pipeline.pipelined(own_transaction=own_transaction):
            for sql, params in statements:
                cursor = pipeline.cursor()
                cursors.append(cursor)
                cursor.execute(sql, params)
        return [cursor.fetchall() if _answered_rows(cursor) else [] for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()


@cache
def columns(model: type[models.Model], alias: str) -> str:
    """`alias.col, …` of every concrete field of the model, in field order (`load`'s order)."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def load(model: type[M], cursor) -> list[M]:
    """Instances from the rows a select of `columns(model, …)` left in `cursor`; extra
    trailing columns are ignored."""
    return [instance for (instance,) in load_joined((model,), cursor.fetchall())]


def load_joined(models_: Sequence[type[models.Model]], found: Iterable[Sequence[Any]]) -> list:
    """Per row of a select of `columns(m1, …), columns(m2, …), …` (one block per model, in
    that order; extra trailing columns ignored), one tuple of instances; an outer-joined block
    whose primary key is NULL gives None."""
    plan = _load_plan(tuple(models_))
    return [
        tuple(
            None
            if row[pk_at] is None
            else model.from_db(DEFAULT_DB_ALIAS, names, _values(row[begin:end], json_at))
            for model, names, begin, end, pk_at, json_at in plan
        )
        for row in found
    ]


def _values(values: Sequence[Any], json_at: tuple[int, ...]) -> Sequence[Any]:
    """The row's values of one model, its json/jsonb columns parsed (handed over as text)."""
    if not json_at:
        return values
    converted = list(values)
    for index in json_at:
        converted[index] = json_value(converted[index])
    return converted


@cache
def _load_plan(models_: tuple[type[models.Model], ...]) -> tuple[tuple[Any, ...], ...]:
    """Per model of a joined select: (model, attnames, first column, end column, pk column,
    the places of its JSON fields)."""
    plan = []
    start = 0
    for model in models_:
        fields = model._meta.concrete_fields
        names = [f.attname for f in fields]
        pk_at = start + next(i for i, f in enumerate(fields) if f.primary_key)
        json_at = tuple(i for i, f in enumerate(fields) if isinstance(f, models.JSONField))
        plan.append((model, names, start, start + len(names), pk_at, json_at))
        start += len(names)
    return tuple(plan)


def attach(instance: models.Model, name: str, related: models.Model | None) -> None:
    """Cache `related` (read by the same statement) as `instance`'s foreign key `name`, so
    reading `instance.<name>` costs no query; the key's id column is left as it was read."""
    instance._meta.get_field(name).set_cached_value(instance, related)  # type: ignore[union-attr]


def json_value(value: str | Any) -> Any:
    """A json/jsonb column's value: Django's connection hands them over as text."""
    return json.loads(value) if isinstance(value, str) else value


def from_json(model: type[M], objects: Iterable[dict[str, Any]] | None) -> list[M]:
    """Instances from `to_jsonb(row)` objects of the model's table (None: no rows)."""
    fields = model._meta.concrete_fields
    names = [f.attname for f in fields]
    return [
        model.from_db(connection.alias, names, [f.to_python(obj[f.column]) for f in fields])
        for obj in objects or ()
    ]
