"""A hot read's SQL, as the ORM writes it, kept once per process, and run prepared.

Compiling a query costs more CPU than PostgreSQL spends running a small one (a scan's lookup,
a session or user read): the caller builds its query once with placeholder values and keeps the
SQL `orm_sql` returns (`functools.cache`). Planning it costs PostgreSQL more than running it
too (measured on the desk's scan: the permission read 1.2 ms to plan, 0.17 ms to run; the
lookup's five-table join 0.4 ms and 0.08 ms): `rows` runs such a fixed text as a prepared
statement (events.db.rows.fetch), which PostgreSQL plans once per connection. `first_rows`
does the same for a request's first statement, which then also stands in for Django's
per-request health check (events.db.pipeline.first_read): one round trip, not two.

This is the face of the database machinery for the overlays and config, which never import
`events/db` themselves (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, models
from django.db.models import F, Func, TextField

from events.db import pipeline
from events.db import rows as sql_rows


def orm_sql(queryset: Any, probe: Sequence[Any]) -> str:
    """The SQL the ORM writes for `queryset`, which was built with the parameter values `probe`.

    Raises AssertionError when the ORM's parameters are not exactly `probe`, in order: the
    statement would then not take the caller's values where it expects them."""
    sql, params = queryset.query.sql_with_params()
    if list(params) != list(probe):
        raise AssertionError(f"the statement takes {list(probe)!r}, not {list(params)!r}")
    return sql


def joined_text(first: str, second: str, separator: str) -> Func:
    """The text `first || separator || second` of two text columns (field paths), the
    separator written in the statement's text, not as a parameter: a statement kept by
    `orm_sql` then takes only its own values."""
    if "'" in separator or "\\" in separator:
        raise ValueError(f"not a plain separator: {separator!r}")
    return Func(
        F(first),
        F(second),
        template="(%(expressions)s)",
        arg_joiner=f" || '{separator}' || ",
        output_field=TextField(),
    )


@cache
def _json_at(model: type[models.Model], names: tuple[str, ...]) -> tuple[int, ...]:
    fields = {f.attname: f for f in model._meta.concrete_fields}
    return tuple(i for i, name in enumerate(names) if isinstance(fields[name], models.JSONField))


def instance(model: type[models.Model], names: tuple[str, ...], values: Sequence[Any]) -> Any:
    """`model.from_db` of a row such a statement read (the values of `names`, in the model's
    field order), its JSON columns parsed as the ORM would (Django's connection hands json
    and jsonb over as text)."""
    json_at = _json_at(model, names)
    if json_at:
        values = list(values)
        for index in json_at:
            field = model._meta.get_field(names[index])
            values[index] = field.from_db_value(values[index], None, None)  # type: ignore[union-attr]
    return model.from_db(DEFAULT_DB_ALIAS, list(names), values)


def rows(sql: str, params: Sequence[Any]) -> list[tuple]:
    """Every row of the fixed statement `sql` (its text never depends on the values), run
    prepared: PostgreSQL parses and plans it once per connection."""
    return sql_rows.fetch(sql, params)


def first_rows(sql: str, params: Sequence[Any]) -> list[tuple]:
    """`rows`, for the first statement of a request (a read, harmless to repeat): it tests the
    kept connection in place of Django's health check, replacing a connection dropped since
    the last request (`pipeline.first_read`)."""
    return pipeline.first_read(lambda: sql_rows.fetch(sql, params))
