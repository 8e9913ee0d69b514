"""Database refusals as typed errors, for the services of the overlays (which never read the
database machinery, events.db, themselves).

PostgreSQL names the constraint or index a write violated in the error's diagnostics; a service
decides on that name, never on the message text. `constraint_refusal(name, error)` wraps a
block (a whole transaction, so that the error is raised once it rolled back) and turns a
violation of constraint `name` into the typed error `error()` makes; any other database error
goes on as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DatabaseError, IntegrityError

from events.db import dberrors
from events.errors import DomainError


def violated_constraint(exc: DatabaseError) -> str:
    """The name of the constraint or index `exc` violated, or "" when the error names none."""
    return dberrors.violated_constraint(exc)


@contextmanager
def constraint_refusal(name: str, error: Callable[[], DomainError]) -> Iterator[None]:
    """Raise `error()` (chained to the IntegrityError) when the block violates constraint or
    unique index `name`; any other error is raised unchanged."""
    try:
        yield
    except IntegrityError as exc:
        if dberrors.violated_constraint(exc) == name:
            raise error() from exc
        raise
