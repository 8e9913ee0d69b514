"""Reading a database refusal: which constraint a write violated.

PostgreSQL names the violated constraint in the error's diagnostics; services decide on that
name (a barcode collision is retried, an idempotency key taken is a replay, a booth already
confirmed is `booth_unavailable`) instead of parsing message text.
"""

from __future__ import annotations

from django.db import DatabaseError


def violated_constraint(exc: DatabaseError) -> str:
    """The name of the constraint or index `exc` violated, or "" when the error names none."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) or ""
