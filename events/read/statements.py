"""A hot read's SQL, as the ORM writes it, kept once per process.

Compiling a query costs more CPU than PostgreSQL spends running a small one (a scan's lookup,
a session or user read): the caller builds its query once with placeholder values, keeps the
SQL this returns (`functools.cache`), and runs it on Django's cursor with its own values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def orm_sql(queryset: Any, probe: Sequence[Any]) -> str:
    """The SQL the ORM writes for `queryset`, which was built with the parameter values `probe`.

    Raises AssertionError when the ORM's parameters are not exactly `probe`, in order: the
    statement would then not take the caller's values where it expects them."""
    sql, params = queryset.query.sql_with_params()
    if list(params) != list(probe):
        raise AssertionError(f"the statement takes {list(probe)!r}, not {list(params)!r}")
    return sql
