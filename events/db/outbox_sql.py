"""One set-based INSERT for a batch of outbox rows (the mail and SMS queue adapters).

`insert_batch` writes a whole batch with one `INSERT … SELECT … FROM unnest(<one array per
column>) ON CONFLICT DO NOTHING`: one statement and a handful of parameters whatever the batch
size, instead of `bulk_create`'s model instances and per-value preparation (the pass's profile,
docs/benchmarks.md "B3 profile"). Every other column of the model gets its field's default
(`auto_now` / `auto_now_add`: the given `now`), so a field added to the model later is written
here too. The conflict clause keeps the unique idempotency keys the only guard against a
message queued twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, models

SQL_TYPES = {"text": "text[]", "bigint": "bigint[]", "timestamptz": "timestamptz[]"}


@cache
def _statement(
    model: type[models.Model], columns: tuple[tuple[str, str], ...], constants: tuple[str, ...]
) -> tuple[str, tuple[models.Field, ...]]:
    """The SQL text and the fields whose value is one parameter for the whole batch, in the
    order of their placeholders."""
    fields = {f.column: f for f in model._meta.concrete_fields}
    for column, kind in columns:
        if column not in fields or kind not in SQL_TYPES:
            raise ValueError(f"{model.__name__}: no column {column!r} of type {kind!r}")
    given = {column for column, _ in columns}
    once = tuple(
        f for f in model._meta.concrete_fields if not f.primary_key and f.column not in given
    )
    unknown = set(constants) - {f.column for f in once}
    if unknown:
        raise ValueError(f"{model.__name__}: no column {sorted(unknown)} to set once")
    quote = connection.ops.quote_name
    names = [quote(c) for c, _ in columns] + [quote(f.column) for f in once]
    select = [f"u.c{i}" for i in range(len(columns))] + ["%s"] * len(once)
    arrays = ", ".join(f"%s::{SQL_TYPES[kind]}" for _, kind in columns)
    aliases = ", ".join(f"c{i}" for i in range(len(columns)))
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(names)}) "  # noqa: S608 — names from model meta
        f"SELECT {', '.join(select)} FROM unnest({arrays}) AS u({aliases}) "
        "ON CONFLICT DO NOTHING"
    )
    return sql, once


def _once(field: models.Field, constants: dict[str, Any], now: datetime) -> Any:
    if field.column in constants:
        return field.get_db_prep_save(constants[field.column], connection)
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return now
    return field.get_db_prep_save(field.get_default(), connection)


def insert_batch(
    *,
    model: type[models.Model],
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    constants: dict[str, Any],
    now: datetime,
) -> int:
    """Insert `rows` in one statement: each row one value per column of `columns` (given as
    (column, "text" | "bigint" | "timestamptz")); `constants` sets other columns to one value
    for every row; the remaining columns get their field's default (`auto_now(_add)`: `now`).
    Rows whose unique key exists are skipped. Returns the number of rows inserted."""
    if not rows:
        return 0
    sql, once = _statement(model, tuple(columns), tuple(sorted(constants)))
    arrays = [list(values) for values in zip(*rows, strict=True)]
    params = [*(_once(f, constants, now) for f in once), *arrays]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
