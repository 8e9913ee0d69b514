"""Reading a database refusal: which constraint a write violated, which guard refused.

PostgreSQL names the violated constraint in the error's diagnostics; services decide on that
name (a barcode collision is retried, an idempotency key taken is a replay, a booth already
confirmed is `booth_unavailable`) instead of parsing message text. The project's PL/pgSQL
guards (`events_seats_guard`, `events_rows_guard`) raise with a fixed message naming the
refusal and a detail: `guard_refusal` reads both.
"""

from __future__ import annotations

from django.db import DatabaseError


def violated_constraint(exc: DatabaseError) -> str:
    """The name of the constraint or index `exc` violated, or "" when the error names none."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) or ""


def guard_refusal(exc: DatabaseError) -> tuple[str, str]:
    """(message, detail) of the error a guard raised (its RAISE … MESSAGE, DETAIL), or ("", "")
    when `exc` carries no diagnostics."""
    diag = getattr(exc.__cause__, "diag", None)
    if diag is None:
        return "", ""
    return diag.message_primary or "", diag.message_detail or ""
