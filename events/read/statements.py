"""A hot read's SQL, as the ORM writes it, kept once per process.

Compiling a query costs more CPU than PostgreSQL spends running a small one (a scan's lookup,
a session or user read): the caller builds its query once with placeholder values, keeps the
SQL this returns (`functools.cache`), and runs it on Django's cursor with its own values.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, models


def orm_sql(queryset: Any, probe: Sequence[Any]) -> str:
    """The SQL the ORM writes for `queryset`, which was built with the parameter values `probe`.

    Raises AssertionError when the ORM's parameters are not exactly `probe`, in order: the
    statement would then not take the caller's values where it expects them."""
    sql, params = queryset.query.sql_with_params()
    if list(params) != list(probe):
        raise AssertionError(f"the statement takes {list(probe)!r}, not {list(params)!r}")
    return sql


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
            values[index] = field.from_db_value(values[index], None, None)  # type: ignore[attr-defined]
    return model.from_db(DEFAULT_DB_ALIAS, list(names), values)
