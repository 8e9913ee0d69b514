"""The state machine of spec.md §4 after creation: confirm, mark attended, undo attendance,
cancel, reset to draft, archive and unarchive. Each locks the Event row and the registration,
decides on the locked row, moves the seat ledger, writes the row with its audit, and runs the
overlays' hooks once it committed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache, partial
from typing import Any, NamedTuple

from django.db import DatabaseError, connection, models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from events import hooks
from events.db import booking as booking_sql
from events.db import locks, pipeline
from events.db import rows as sql_rows
from events.db.dberrors import guard_refusal
from events.errors import (
    ArchiveRefused,
    InvalidTransition,
    RegistrationsClosed,
    ValidationFailed,
)
from events.models import (
    Event,
    EventAuditLog,
    KanbanState,
    Registration,
)
from events.services import audit, scheduler, seats, waitlist_nudge
from events.services.registrations.rules import AUDIT_VERBS, CANCEL_SOURCES, TRANSITIONS, S

logger = logging.getLogger("events.transitions")

# --- transitions ---------------------------------------------------------------------------


class Seen(NamedTuple):
    """The row versions (`row_version`) of the Event and the registration a caller decided on,
    read without a lock (the desk's lookup)."""

    event: str
    registration: str


def row_version(table: str) -> str:
    """The SQL of a row's version, as text: the transaction that wrote it (`xmin`) and where
    (`ctid`). Any UPDATE writes a new version: another transaction's has another xmin, and one
    of the same transaction (a caller's block) another ctid (the version it replaces is not
    dead before that transaction ends, so its place cannot be reused). `events_lock_as_seen`
    (migration events/0020_lock_as_seen) compares the same text."""
    return f'("{table}".xmin::text || \' \' || "{table}".ctid::text)'


class _RowsChanged(Exception):
    """The rows are no longer the versions the caller saw: nothing was written."""


def _transition(
    registration: Registration,
    to: str,
    verb: str,
    actor: Any,
    *,
    now=None,
    cancel_source="",
    recheck: Callable[[Event, Registration], None] | None = None,
    audit_also: Sequence[EventAuditLog] = (),
    rows_also: Callable[[Event, Registration], Sequence[models.Model]] | None = None,
    seen: Seen | None = None,
) -> Registration:
    """`recheck(event, registration)` runs first on the locked rows: the caller's own gates on
    what may have changed since it decided to call (the desk's scan answer); it refuses by
    raising, and nothing is written. `audit_also`: the caller's own audit rows, written with
    the transition's in the same statement and transaction. `rows_also(event, registration)`
    runs on the changed rows and answers the caller's own rows (of one model: the desk's first
    answer to a nonce), inserted in that statement too: a violation of their constraints
    fails the whole transition.

    `seen`: the caller decided on `registration` and its `event` as read without a lock, at
    these row versions. The transition is then decided on those rows and sent in one round
    trip with its locks, behind a check, made once the locks are granted, that both rows are
    still those versions; when either changed, nothing is written and the transition runs as
    without `seen` (locks, `recheck`, then the writes). Unchanged rows decide as the locked
    ones would: the same values."""
    write = partial(
        _write,
        to=to,
        verb=verb,
        actor=actor,
        now=now or timezone.now(),
        cancel_source=cancel_source,
        audit_also=audit_also,
        rows_also=rows_also,
    )
    if seen is not None:
        # A copy is written on: when the rows changed, the caller's instance is as it read it.
        seen_reg = copy.copy(registration)
        seen_reg._state = copy.copy(registration._state)
        try:
            with transaction.atomic():
                return write(registration.event, seen_reg, seen=seen)
        except _RowsChanged as changed:
            # Decided again below, on the locked rows (a second desk admitted the ticket, staff
            # edited the event): logged, so how often a scan pays the second way can be seen.
            logger.debug(
                "registration %s: %s; deciding on the locked rows", registration.pk, changed
            )
    with transaction.atomic():
        # With the locks, what the transition's followers need: the after_sub schedulers of a
        # draft being confirmed (the one way from draft into `open`), whether someone waits for
        # a seat it may free.
        reads = locks.lock_for_transition(
            registration.event_id,
            registration.pk,
            after_sub=verb == "confirm",
            waiting=to in (S.CANCEL, S.DRAFT),
        )
        event, reg = reads.event, reads.registration
        if recheck is not None:
            recheck(event, reg)
        return write(event, reg, after_sub=reads.after_sub, someone_waits=reads.someone_waits)


def _write(
    event: Event,
    reg: Registration,
    *,
    to: str,
    verb: str,
    actor: Any,
    now,
    cancel_source: str,
    audit_also: Sequence[EventAuditLog],
    rows_also: Callable[[Event, Registration], Sequence[models.Model]] | None,
    after_sub: list | None = None,
    someone_waits: bool | None = None,
    seen: Seen | None = None,
) -> Registration:
    """Decide the transition on `event` and `reg` (locked, or as `seen`), then write it: the
    seats, the row with the audit rows, the after_sub rows, the overlays' signals and COMMIT,
    in one round trip (with `seen`, behind the locks and the check that the rows are as seen:
    a changed row raises _RowsChanged, nothing written)."""
    source = reg.state
    if TRANSITIONS.get((source, to)) != verb:
        raise InvalidTransition(
            _("A registration cannot go from %(source)s to %(to)s by %(verb)s.")
            % {"source": source, "to": to, "verb": verb},
            state=source,
            to=to,
        )
    if to in (S.OPEN, S.DONE) and event.kanban_state == KanbanState.CANCEL:
        # spec.md §4: nothing enters open/done on a cancelled event (attendance included).
        raise RegistrationsClosed(_("The event is cancelled."))
    if not reg.active and (source, to) in ((S.DRAFT, S.OPEN),):
        raise InvalidTransition(_("An archived registration cannot be confirmed."), state=source)

    hold = _ledger_delta(source, to, reg) if reg.active else None
    reg.state = to
    # Who cancelled (staff / order) decides the seam's mint count; leaving `cancel` clears it.
    reg.cancel_source = cancel_source if to == S.CANCEL else ""
    if to == S.OPEN and reg.confirmed_at is None:
        reg.confirmed_at = now
    if to == S.DONE and reg.date_closed is None:
        reg.date_closed = now
    audit_rows = [
        audit.entry(
            actor=actor, verb=AUDIT_VERBS[verb], registration=reg, data={"state": [source, to]}
        ),
        *audit_also,
    ]
    also = rows_also(event, reg) if rows_also is not None else ()
    if reg.active and source in (S.OPEN, S.DONE) and to in (S.CANCEL, S.DRAFT):
        # A seat is free: nudge the waiting list after commit.
        waitlist_nudge.seats_freed(event, someone_waits=someone_waits)
    opening = to == S.OPEN and source == S.DRAFT
    # The overlays' hooks run once this commits, told what their triggers asked for
    # (events.hooks), which the last statement before the COMMIT reads.
    signals: list[frozenset[str]] = [frozenset()]
    transaction.on_commit(
        lambda: hooks.run(hooks.registrations_changed, [reg], actor, signals[0]),
        robust=True,
    )
    # The seats, the row with the audit rows, the after_sub rows, the overlays' signals,
    # then COMMIT: one round trip. Each statement checks itself (a reserve's limits, a
    # ledger or registration row not there), so a failure skips what is queued behind it;
    # a refusal surfaces at the block's end (seats.refusals). The COMMIT is only queued
    # when the transaction is the transition's own (`Pipeline.commit`).
    ledger: Any = None
    cursors: list[Any] = []
    try:
        with (
            seats.refusals(reg.slot_id, reg.ticket),
            _row_guard(reg),
            _as_seen(seen),
            pipeline.pipelined(own_transaction=True) as pipe,
        ):
            if seen is not None:
                cursors.append(pipeline.cursor())
                cursors[-1].execute(
                    *_seen_statement(event.pk, reg.pk, seen, share_event=not opening)
                )
            cursors.append(_send_transition(reg, audit_rows, also))
            # The seats after the row: the ledger row's lock, which every transition of the
            # event's seats waits for, is then held only from here to the COMMIT.
            if reg.active and opening:
                ledger = seats.send_reserve(
                    event=event, slot_id=reg.slot_id, ticket=reg.ticket, count=1
                )
            elif hold is not None:
                ledger = seats.send_apply(event=event, holds=[hold], guarded=True)
            if ledger is not None and ledger.cursor is not None:
                cursors.append(ledger.cursor)  # closed by check() / result(), or below
            if opening:
                scheduler.registrations_opened(
                    event=event, registrations=[reg], now=now, schedulers=after_sub
                )
            asked = pipeline.cursor()
            cursors.append(asked)
            asked.execute(booking_sql.AFTER_COMMIT_SQL, [])
            pipe.commit()
        signals[0] = booking_sql.after_commit_names(asked.fetchone()[0])
        if isinstance(ledger, seats.Reservation):
            ledger.check()  # the counters it produced (the check itself ran in the statement)
        elif ledger is not None:
            # The rows it changed. Its own statement refused a missing row before the
            # COMMIT queued behind it; result()'s count check cannot fail after that.
            ledger.result()
    finally:
        for cursor in cursors:
            cursor.close()
    return reg


SEEN_CHECK = "rows_as_seen"


def _seen_statement(
    event_id: int, registration_id: int, seen: Seen, *, share_event: bool
) -> tuple[str, list]:
    """The two locks of a transition (Event, then the registration: every core verb's order)
    and the check that both rows are still the versions the caller saw, failing the
    transaction (`events_rows_guard`, detail SEEN_CHECK) when either changed: one statement,
    `events_lock_as_seen` (migration events/0020_lock_as_seen). `share_event`: the Event row
    FOR SHARE, for a transition that takes no new seat (the desk's admission): it still waits
    for, and holds off, any change to the event (a cancellation, its seats), but not the other
    desks' admissions, which then wait only for the seat ledger's row."""
    return (
        "SELECT events_lock_as_seen(%s, %s, %s, %s, %s)",
        [event_id, seen.event, registration_id, seen.registration, share_event],
    )


@contextmanager
def _as_seen(seen: Seen | None) -> Iterator[None]:
    """Inside: the check of `_seen_sql` failing comes out as _RowsChanged (before `_row_guard`
    reads it as a defect). It runs before the seats' statement, so a changed row is never
    reported as a seat refusal."""
    try:
        yield
    except DatabaseError as exc:
        message, detail = guard_refusal(exc)
        if seen is None or message != "events_rows_missing" or not detail.startswith(SEEN_CHECK):
            raise
        raise _RowsChanged(detail) from exc


@cache
def _transition_sql() -> str:
    """The transition's UPDATE as the CTE `updated`, and the statement's answer: the check that
    it changed the row (`events_rows_guard`, migration events/0012_rows_guard: the row is
    locked, so anything else is a defect, refused before the COMMIT queued behind it)."""
    table = connection.ops.quote_name(Registration._meta.db_table)
    # S608: built from constants (the table name from model meta); values are params.
    return f"""WITH updated AS (
        UPDATE {table}
           SET state = %s, cancel_source = %s, confirmed_at = %s, date_closed = %s,
               updated_at = %s
         WHERE id = %s
     RETURNING id
    )
    SELECT events_rows_guard((SELECT count(*) FROM updated), 1, 'registration')"""  # noqa: S608


def _send_transition(
    reg: Registration, audit_rows: Sequence[EventAuditLog], also: Sequence[models.Model] = ()
):
    """Send what a transition may change (state, cancel_source, confirmed_at, date_closed and
    updated_at), all five whatever changed, with its audit rows, as one statement: fixed,
    prepared by psycopg, where `save(update_fields=…)` compiled an UPDATE per combination on
    every call. The row is locked, so writing back an unchanged column's value loses nothing.
    The statement checks itself that it updated the row (`_transition_sql`). `also`: the
    caller's rows (`rows_also`), one more INSERT in it. Returns its cursor, open: it answers
    one row, the check's 0."""
    reg.updated_at = timezone.now()
    values = [reg.state, reg.cancel_source, reg.confirmed_at, reg.date_closed, reg.updated_at]
    return sql_rows.send(
        [
            sql_rows.insert_statement(list(audit_rows)),
            *([sql_rows.insert_statement(list(also))] if also else []),
            (_transition_sql(), [*values, reg.pk]),
        ]
    )


@contextmanager
def _row_guard(reg: Registration) -> Iterator[None]:
    """Inside: the row check of `_send_transition` failing comes out as RuntimeError."""
    try:
        yield
    except DatabaseError as exc:
        message, detail = guard_refusal(exc)
        if message != "events_rows_missing":
            raise
        raise RuntimeError(f"registration {reg.pk} was not updated ({detail})") from exc


def _ledger_delta(source: str, to: str, reg: Registration) -> seats.Hold | None:
    held: dict[str, str] = {S.OPEN: "reserved", S.DONE: "used"}
    delta = {"reserved": 0, "used": 0}
    if source in held:
        delta[held[source]] -= 1
    if to in held:
        delta[held[to]] += 1
    if not any(delta.values()):
        return None
    return seats.hold_for(reg, **delta)


def confirm(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.OPEN, "confirm", actor)


def mark_attended(
    *,
    registration: Registration,
    actor: Any,
    now=None,
    recheck: Callable[[Event, Registration], None] | None = None,
    audit_also: Sequence[EventAuditLog] = (),
    rows_also: Callable[[Event, Registration], Sequence[models.Model]] | None = None,
    seen: Seen | None = None,
) -> Registration:
    """`recheck`, `audit_also`, `rows_also` and `seen`: see `_transition` (the desk admits
    through them)."""
    return _transition(
        registration,
        S.DONE,
        "mark_attended",
        actor,
        now=now,
        recheck=recheck,
        audit_also=audit_also,
        rows_also=rows_also,
        seen=seen,
    )


def undo_attendance(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.OPEN, "undo_attendance", actor)


def cancel(*, registration: Registration, actor: Any, source: str = "staff") -> Registration:
    """`source` is who cancelled: "staff" (the default) or "order" (a host order cancellation)."""
    if source not in CANCEL_SOURCES:
        raise ValidationFailed(
            _("Unknown cancel source “%(source)s”.") % {"source": source}, code="invalid_value"
        )
    return _transition(registration, S.CANCEL, "cancel", actor, cancel_source=source)


def reset_to_draft(*, registration: Registration, actor: Any) -> Registration:
    return _transition(registration, S.DRAFT, "reset_to_draft", actor)


def _set_active(registration: Registration, active: bool, actor: Any) -> Registration:
    with transaction.atomic():
        _event, reg = locks.lock_event_and_registration(registration.event_id, registration.pk)
        if active and reg.active or not active and not reg.active:
            return reg
        if reg.state not in (S.DRAFT, S.CANCEL):
            raise ArchiveRefused(
                _("Only unconfirmed or cancelled registrations can be archived."), state=reg.state
            )
        reg.active = active
        reg.save(update_fields=["active", "updated_at"])
        audit.record(
            actor=actor,
            verb="registration.unarchived" if active else "registration.archived",
            registration=reg,
            data={"active": [not active, active]},
        )
    return reg


def archive(*, registration: Registration, actor: Any) -> Registration:
    return _set_active(registration, False, actor)


def unarchive(*, registration: Registration, actor: Any) -> Registration:
    return _set_active(registration, True, actor)
