"""The one seat aggregation (spec.md §3).

Invariants:
- only active registrations in `open` (reserved) or `done` (used) hold a seat, and waiting-list
  entries in `offered` (held): a held seat is taken for everyone else until the offer is
  accepted (held → reserved, one statement) or expires (released);
- the counters live in `SeatLedger` rows keyed (event, slot, ticket), NULL meaning "all", and
  change only as this module computes them, inside the caller's transaction, after the caller
  locked the Event row: here, or in the booking's `events_book` (events/db/sql/book.sql),
  which applies the changes and checks the limits `booking_seats` hands it;
- a request for n seats succeeds or fails whole (`SeatsUnavailable`, code `sold_out`), decided
  by the statement that takes them, on the counters it produced (`events_seats_guard`,
  migration 0010: `send_reserve`, `events_book`), so no commit can follow a refused
  increment.

Nothing else in the project counts registrations for seats; `seats_audit` recounts here too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError
from django.db.models import Count, Q
from django.utils.translation import ngettext

from events.db import rows
from events.db.dberrors import guard_refusal
from events.errors import SeatsUnavailable
from events.models import (
    Event,
    Registration,
    RegistrationState,
    SeatLedger,
    Slot,
    Ticket,
    WaitlistEntry,
    WaitlistState,
)

HOLDING = (RegistrationState.OPEN, RegistrationState.DONE)

Key = tuple[int | None, int | None]  # (slot_id, ticket_id); None = all


@dataclass(frozen=True)
class SeatSummary:
    """Event-wide numbers (the event limit only; `max` is per slot × slots on multi-slot)."""

    reserved: int
    used: int
    taken: int  # reserved + used + held
    max: int | None
    available: int | None
    held: int = 0

    @property
    def sold_out(self) -> bool:
        """No seat left under the event limit; a negative availability is sold out too."""
        return self.available is not None and self.available <= 0


@dataclass(frozen=True)
class Hold:
    """A change of held seats for one (slot, ticket) pair."""

    slot_id: int | None
    ticket_id: int | None
    reserved: int = 0
    used: int = 0
    held: int = 0


# --- reading ------------------------------------------------------------------------------


def _ledger(event_id: int, slot_ids: Iterable[int | None] = (), ticket_ids=()) -> dict[Key, tuple]:
    """The ledger rows of an event (restricted to the given slots / tickets plus "all" rows)."""
    qs = SeatLedger.objects.filter(event_id=event_id)
    slot_ids = {s for s in slot_ids if s is not None}
    ticket_ids = {t for t in ticket_ids if t is not None}
    if slot_ids:
        qs = qs.filter(Q(slot__isnull=True) | Q(slot_id__in=slot_ids))
    if ticket_ids:
        qs = qs.filter(Q(ticket__isnull=True) | Q(ticket_id__in=ticket_ids))
    return {
        (row["slot_id"], row["ticket_id"]): (row["reserved"], row["used"], row["held"])
        for row in qs.values("slot_id", "ticket_id", "reserved", "used", "held")
    }


def _taken(ledger: dict[Key, tuple], key: Key) -> int:
    return sum(ledger.get(key, (0, 0, 0)))


def event_limit(event: Event) -> int | None:
    """The event limit (per slot on a multi-slot event), or None when none applies."""
    return event.seats_max if event.seats_limited and event.seats_max > 0 else None


def _limits(event: Event, slot_id: int | None, ticket: Ticket | None) -> list[tuple[Key, int]]:
    """The limits that apply to a (slot, ticket) pair, as (ledger key, max)."""
    limits: list[tuple[Key, int]] = []
    if event_limit(event) is not None:
        limits.append(((slot_id if event.is_multi_slots else None, None), event.seats_max))
    if ticket is not None and ticket.seats_max > 0:
        limits.append(((slot_id if event.is_multi_slots else None, ticket.pk), ticket.seats_max))
    return limits


def _pair_availability(event, ledger, slot_id, ticket) -> int | None:
    limits = _limits(event, slot_id, ticket)
    if not limits:
        return None
    return min(maximum - _taken(ledger, key) for key, maximum in limits)


def availability(
    *, event: Event, ticket: Ticket | None = None, slot: Slot | None = None
) -> int | None:
    """Seats still to be had for the pair, or None (unlimited).

    Without a slot on a multi-slot event: the best availability over its slots (so "can a seat
    be had at all"); without a ticket on an event with tickets: the best over its tickets.
    A negative number (data forced in by hand) means sold out.
    """
    slots: list[int | None]
    tickets: list[Ticket | None]
    if event.is_multi_slots and slot is None:
        slots = list(event.slots.values_list("pk", flat=True))
        if not slots:
            return 0
    else:
        slots = [slot.pk if slot is not None else None]
    if ticket is None:
        tickets = [*event.tickets.all()] or [None]
    else:
        tickets = [ticket]
    ledger = _ledger(event.pk)
    best: int | None = None
    for slot_id in slots:
        for t in tickets:
            value = _pair_availability(event, ledger, slot_id, t)
            if value is None:
                return None
            best = value if best is None else max(best, value)
    return best


def event_summary(*, event: Event) -> SeatSummary:
    ledger = _ledger(event.pk, ticket_ids=(), slot_ids=())
    reserved, used, held = ledger.get((None, None), (0, 0, 0))
    maximum = event_limit(event)
    if maximum is not None and event.is_multi_slots:
        maximum *= event.slots.count()
    taken = reserved + used + held
    available = None if maximum is None else maximum - taken
    return SeatSummary(reserved, used, taken, maximum, available, held)


def slot_summary(*, event: Event, slot_id: int) -> SeatSummary:
    """event_summary for one slot of a multi-slot event: its (slot, all tickets) ledger row,
    under the event limit, which applies per slot. One query."""
    row = (
        SeatLedger.objects.filter(event_id=event.pk, slot_id=slot_id, ticket__isnull=True)
        .values_list("reserved", "used", "held")
        .first()
    )
    reserved, used, held = row or (0, 0, 0)
    maximum = event_limit(event)
    taken = reserved + used + held
    available = None if maximum is None else maximum - taken
    return SeatSummary(reserved, used, taken, maximum, available, held)


def summaries(events: Iterable[Event]) -> dict[int, SeatSummary]:
    """event_summary for many events in two queries (admin changelists, lists)."""
    events = list(events)
    ids = [e.pk for e in events]
    totals = {
        row["event_id"]: (row["reserved"], row["used"], row["held"])
        for row in SeatLedger.objects.filter(
            event_id__in=ids, slot__isnull=True, ticket__isnull=True
        ).values("event_id", "reserved", "used", "held")
    }
    slot_counts = dict(
        Slot.objects.filter(event_id__in=ids)
        .values("event_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "n")
    )
    result = {}
    for event in events:
        reserved, used, held = totals.get(event.pk, (0, 0, 0))
        maximum = event_limit(event)
        if maximum is not None and event.is_multi_slots:
            maximum *= slot_counts.get(event.pk, 0)
        taken = reserved + used + held
        available = None if maximum is None else maximum - taken
        result[event.pk] = SeatSummary(reserved, used, taken, maximum, available, held)
    return result


@dataclass(frozen=True)
class Capacity:
    """Event-wide seats counting every limit: the event's (per slot on multi-slot) and its
    tickets' (per (slot, ticket)). `max` / `available` are None when some bookable pair has no
    limit at all; a negative `available` (data forced in by hand) is sold out too."""

    max: int | None
    available: int | None

    @property
    def sold_out(self) -> bool:
        return self.available is not None and self.available <= 0


def _capacity(
    event: Event, ledger: dict[Key, tuple], slot_ids: list[int], tickets: list[tuple[int, int]]
) -> Capacity:
    if event.is_multi_slots and not slot_ids:
        return Capacity(0, 0)  # nothing can be booked before a slot exists
    limit = event_limit(event)
    total_max, total_available = 0, 0
    for slot_id in slot_ids if event.is_multi_slots else [None]:
        parts: list[tuple[int, int]] = []  # (max, available) of each limit on this slot
        if limit is not None:
            parts.append((limit, limit - _taken(ledger, (slot_id, None))))
        if tickets and all(maximum > 0 for _, maximum in tickets):
            parts.append(
                (
                    sum(maximum for _, maximum in tickets),
                    sum(max(0, m - _taken(ledger, (slot_id, t))) for t, m in tickets),
                )
            )
        if not parts:
            return Capacity(None, None)
        total_max += min(m for m, _ in parts)
        total_available += min(a for _, a in parts)
    return Capacity(total_max, total_available)


def capacities(events: Iterable[Event]) -> dict[int, Capacity]:
    """`Capacity` of many events in three queries whatever their number (admin changelist)."""
    events = list(events)
    ids = [e.pk for e in events]
    ledgers: dict[int, dict[Key, tuple]] = {pk: {} for pk in ids}
    for row in SeatLedger.objects.filter(event_id__in=ids).values(
        "event_id", "slot_id", "ticket_id", "reserved", "used", "held"
    ):
        ledgers[row["event_id"]][(row["slot_id"], row["ticket_id"])] = (
            row["reserved"],
            row["used"],
            row["held"],
        )
    tickets: dict[int, list[tuple[int, int]]] = {pk: [] for pk in ids}
    for event_id, ticket_id, maximum in Ticket.objects.filter(event_id__in=ids).values_list(
        "event_id", "pk", "seats_max"
    ):
        tickets[event_id].append((ticket_id, maximum))
    slots: dict[int, list[int]] = {pk: [] for pk in ids}
    for event_id, slot_id in Slot.objects.filter(event_id__in=ids).values_list("event_id", "pk"):
        slots[event_id].append(slot_id)
    return {e.pk: _capacity(e, ledgers[e.pk], slots[e.pk], tickets[e.pk]) for e in events}


def event_capacity(*, event: Event) -> Capacity:
    return capacities([event])[event.pk]


def ticket_summaries(*, event: Event) -> dict[tuple[int | None, int | None], dict]:
    """Per (slot, ticket) pair: taken and availability, for pages and the admin."""
    ledger = _ledger(event.pk)
    slots: list[Slot | None] = [*event.slots.all()] if event.is_multi_slots else [None]
    tickets: list[Ticket | None] = [*event.tickets.all()] or [None]
    result = {}
    for slot in slots:
        slot_id = slot.pk if slot else None
        for ticket in tickets:
            key = (slot_id, ticket.pk if ticket else None)
            result[key] = {
                "taken": _taken(ledger, key),
                "available": _pair_availability(event, ledger, slot_id, ticket),
            }
    return result


def ticket_taken(*, event: Event, ticket: Ticket) -> int:
    """The most seats the ticket's own limit has to cover: its held seats per slot on a
    multi-slot event (the limit applies per (slot, ticket)), else for the whole event.

    Read after the caller locked the Event row, so no booking moves it meanwhile.
    """
    rows = SeatLedger.objects.filter(
        event_id=event.pk, ticket_id=ticket.pk, slot__isnull=not event.is_multi_slots
    ).values_list("reserved", "used", "held")
    return max((sum(row) for row in rows), default=0)


def event_taken(*, event: Event) -> int:
    """The most seats the event's own limit has to cover: its held seats per slot on a
    multi-slot event (the limit applies per slot), else for the whole event.

    Read after the caller locked the Event row, so no booking moves it meanwhile.
    """
    rows = SeatLedger.objects.filter(
        event_id=event.pk, ticket__isnull=True, slot__isnull=not event.is_multi_slots
    ).values_list("reserved", "used", "held")
    return max((sum(row) for row in rows), default=0)


# --- writing (the caller holds the Event row lock) -----------------------------------------


def _keys(event: Event, slot_id: int | None, ticket_id: int | None) -> list[Key]:
    keys: list[Key] = [(None, None)]
    if ticket_id is not None:
        keys.append((None, ticket_id))
    if event.is_multi_slots and slot_id is not None:
        keys.append((slot_id, None))
        if ticket_id is not None:
            keys.append((slot_id, ticket_id))
    return keys


def reserve(
    *,
    event: Event,
    slot_id: int | None,
    ticket: Ticket | None,
    count: int,
    hold: bool = False,
    from_held: int = 0,
) -> None:
    """Take `count` reserved seats for one (slot, ticket) pair, whole or not at all.

    `hold=True` takes them as held instead (a waiting-list offer); `from_held` of the `count`
    seats were held for this very booking (an accepted offer) and move from held to reserved,
    so they are not taken twice — the check still refuses when a limit lowered meanwhile is now
    below what is taken.

    The caller holds the Event row lock. One statement increments the counters (an upsert that
    returns the new values under the ledger rows' own row locks) and checks every applicable
    limit against those values (`events_seats_guard`, migration 0010); when one is exceeded the
    statement fails and `SeatsUnavailable` is raised: the caller's atomic block rolls back with
    everything else — so the caller must let the error leave its `transaction.atomic()` block
    (every verb here does). Checking the values the increment produced, under their row locks,
    keeps the decision right even for a path that forgot the Event lock.
    """
    send_reserve(
        event=event, slot_id=slot_id, ticket=ticket, count=count, hold=hold, from_held=from_held
    ).check()


@dataclass
class Reservation:
    """A reserve statement that was sent and whose counters are read later (`check`).

    The limits are checked by the statement itself: in pipeline mode (a transition,
    registrations.transitions) its refusal is raised at the pipeline's sync, inside
    `refusals()`, which turns it into `SeatsUnavailable`; so a transition can queue its COMMIT
    right behind the statement, and a refusal aborts the transaction before the COMMIT runs.
    `check()` reads the counters the statement produced (after the sync) and returns them."""

    event: Event
    slot_id: int | None
    ticket: Ticket | None
    count: int
    _pending: _Applied

    def check(self) -> dict[Key, tuple[int, int, int]]:
        return self._pending.result()

    @property
    def cursor(self) -> Any:
        """The statement's cursor (None: nothing was sent), which `check()` reads and closes."""
        return self._pending.cursor

    def refusal(self, exc: DatabaseError) -> Exception | None:
        """The error to raise for `exc` when it is the guard's refusal of this reservation
        (`SeatsUnavailable`), else None."""
        return _refusal(exc, self.slot_id, self.ticket)


def send_reserve(
    *,
    event: Event,
    slot_id: int | None,
    ticket: Ticket | None,
    count: int,
    hold: bool = False,
    from_held: int = 0,
) -> Reservation:
    """Send `reserve`'s statement, its limit check included. Outside pipeline mode it runs
    here and a refusal raises `SeatsUnavailable` here; in pipeline mode the refusal surfaces at
    the caller's sync, which turns it into `SeatsUnavailable` with `Reservation.refusal`. The
    caller reads the counters with `check()` afterwards."""
    if not 0 <= from_held <= count or (hold and from_held):
        raise ValueError(f"from_held={from_held} of count={count} (hold={hold})")
    ticket_id = ticket.pk if ticket is not None else None
    if hold:
        change = Hold(slot_id, ticket_id, held=count)
    else:
        change = Hold(slot_id, ticket_id, reserved=count, held=-from_held)
    guard = (count, _limits(event, slot_id, ticket))
    with refusals(slot_id, ticket):  # outside pipeline mode the statement runs (and refuses) here
        pending = _send_apply(event, [change], guard=guard)
    return Reservation(event, slot_id, ticket, count, pending)


def booking_seats(
    *, event: Event, slot_id: int | None, ticket: Ticket | None, count: int, from_held: int = 0
) -> dict[str, Any]:
    """`reserve`'s change as the booking document's `seats` (events.db.booking.document):
    the ledger rows to change, [slot, ticket, reserved, used, held] each, whether missing rows
    may be created, and the limits that apply, [slot, ticket, max] each; `events_book`
    changes the rows and checks the limits against the counters that produced, under the
    Event lock it took."""
    if not 0 <= from_held <= count:
        raise ValueError(f"from_held={from_held} of count={count}")
    ticket_id = ticket.pk if ticket is not None else None
    changes = _changes(event, [Hold(slot_id, ticket_id, reserved=count, held=-from_held)])
    return {
        "requested": count,
        # Taking new seats may meet a ledger row not there yet; moving held seats never does
        # (they are held in it): a missing row is then a defect, refused.
        "create": not from_held,
        "changes": [[s, t, r, u, h] for (s, t), r, u, h in changes],
        "limits": [[s, t, maximum] for (s, t), maximum in _limits(event, slot_id, ticket)],
    }


def _refusal(exc: DatabaseError, slot_id: int | None, ticket: Ticket | None) -> Exception | None:
    """The guard's refusal carried by a database error, as the error to raise; None when the
    error is not the guard's."""
    message, detail = guard_refusal(exc)
    if message not in _GUARD_MESSAGES:
        return None
    if message == "events_seat_ledger_rows_missing":
        return RuntimeError(f"seat ledger is missing rows ({detail}); run seats_audit")
    missing = int(detail)
    ticket_id = ticket.pk if ticket is not None else None
    return SeatsUnavailable(
        ngettext(
            "Not enough seats: %(missing)s missing.",
            "Not enough seats: %(missing)s missing.",
            missing,
        )
        % {"missing": missing},
        missing=[{"slot_id": slot_id, "ticket_id": ticket_id, "missing": missing}],
    )


_GUARD_MESSAGES = ("events_seats_unavailable", "events_seat_ledger_rows_missing")


@contextmanager
def refusals(slot_id: int | None, ticket: Ticket | None) -> Iterator[None]:
    """Inside: the guard's refusal of a reserve statement (raised where it ran, or at the
    pipeline sync that ran it) comes out as `SeatsUnavailable` for this pair (a ledger missing
    rows as RuntimeError); any other database error unchanged."""
    try:
        yield
    except DatabaseError as exc:
        refusal = _refusal(exc, slot_id, ticket)
        if refusal is None:
            raise
        raise refusal from exc


def apply(*, event: Event, holds: Iterable[Hold]) -> dict[Key, tuple[int, int, int]]:
    """Add the holds' deltas to every ledger row they concern, in one statement.

    Returns the new (reserved, used, held) of every row it changed. Rows are written in
    ascending key order, so two transactions never wait on each other's ledger rows in opposite
    orders.
    """
    return send_apply(event=event, holds=holds).result()


def send_apply(*, event: Event, holds: Iterable[Hold], guarded: bool = False) -> _Applied:
    """Send `apply`'s statement; `result()` reads what it returned (in pipeline mode, after the
    pipeline's sync). `guarded`: the statement checks itself that it changed every ledger row
    it should (the guard of `send_reserve`, with no limit): a missing row then fails the
    statement, which `refusals()` turns into RuntimeError, so a COMMIT may be queued right
    behind it (registrations.transitions._transition); unguarded, `result()` finds it after the
    answer."""
    return _send_apply(event, holds, guard=(0, []) if guarded else None)


@dataclass
class _Applied:
    """An apply statement sent on `cursor`; `result()` reads the rows it returned (one per
    ledger row; a guarded statement: one row of arrays, after the guard's result)."""

    event_id: int
    rows: list
    cursor: Any
    returns_rows: bool = True
    guarded: bool = False

    def result(self) -> dict[Key, tuple[int, int, int]]:
        if self.cursor is None:
            return {}
        if not self.returns_rows:
            self.cursor.close()
            return {}
        try:
            if self.guarded:
                _guard, *columns = self.cursor.fetchone()
                returned = zip(*(column or () for column in columns), strict=True)
            else:
                returned = self.cursor.fetchall()
            after = {(s, t): (r, u, h) for s, t, r, u, h in returned}
        finally:
            self.cursor.close()
        if len(after) != len(self.rows):
            raise RuntimeError(
                f"seat ledger of event {self.event_id} is missing rows for {self.rows}; "
                "run seats_audit"
            )
        return after


def _changes(event: Event, holds: Iterable[Hold]) -> list[tuple[Key, int, int, int]]:
    """The holds' deltas per ledger row they concern, in ascending key order (so two
    transactions never wait on each other's ledger rows in opposite orders); rows left
    unchanged dropped."""
    deltas: Counter = Counter()
    for hold in holds:
        for key in _keys(event, hold.slot_id, hold.ticket_id):
            deltas[(key, "r")] += hold.reserved
            deltas[(key, "u")] += hold.used
            deltas[(key, "h")] += hold.held
    keys = sorted({k for k, _ in deltas}, key=lambda k: (k[0] or 0, k[1] or 0))
    changes = [(k, deltas[(k, "r")], deltas[(k, "u")], deltas[(k, "h")]) for k in keys]
    return [change for change in changes if any(change[1:])]


def _send_apply(
    event: Event,
    holds: Iterable[Hold],
    *,
    guard: tuple[int, list[tuple[Key, int]]] | None = None,
) -> _Applied:
    changes = _changes(event, holds)
    if not changes:
        return _Applied(event.pk, changes, None, returns_rows=False)
    params: list = []
    if all(min(change[1:]) >= 0 for change in changes):
        # Taking seats: one upsert behind the (event, slot, ticket) NULLS NOT DISTINCT key.
        for (slot_id, ticket_id), reserved, used, held in changes:
            params += [event.pk, slot_id, ticket_id, reserved, used, held]
        values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(changes))
        sql = _UPSERT_SQL.format(values=f"VALUES {values}")
    else:
        # Moving or freeing held seats: the rows exist (they hold them). PostgreSQL checks an
        # INSERT's CHECK constraints before ON CONFLICT, so negative deltas take an UPDATE.
        for (slot_id, ticket_id), reserved, used, held in changes:
            params += [slot_id, ticket_id, reserved, used, held]
        values = ", ".join(["(%s::bigint, %s::bigint, %s::int, %s::int, %s::int)"] * len(changes))
        sql = _UPDATE_SQL.format(values=values)
        params.append(event.pk)
    if guard is not None:
        sql, params = _guarded(sql, params, len(changes), *guard)
    # A server-binding cursor (prepared): transitions send this on every call.
    cursor = rows.send([(sql, params)])
    return _Applied(event.pk, changes, cursor, guarded=guard is not None)


def _guarded(
    sql: str, params: list, expected: int, requested: int, limits: list[tuple[Key, int]]
) -> rows.Statement:
    """The ledger statement with the limit check of `reserve` after it, as one statement: the
    statement becomes the CTE `ledger`, and one aggregate row over it calls the guard and
    returns the counters it produced (as arrays). An aggregate without GROUP BY always yields
    exactly one row, so the guard runs even when the ledger statement changed no row; it raises
    when the tightest limit is exceeded (`over` > 0: min(requested, over) seats missing) or
    when fewer rows than `expected` changed. No limit: one row of NULLs, which exceeds
    nothing."""
    limit_rows: list[tuple[int | None, int | None, int | None]] = [
        (slot_id, ticket_id, maximum) for (slot_id, ticket_id), maximum in limits
    ] or [(None, None, None)]
    values = ", ".join(["(%s::bigint, %s::bigint, %s::int)"] * len(limit_rows))
    return (
        _GUARD_SQL.format(ledger=sql, values=values),
        [*params, requested, expected, *(value for row in limit_rows for value in row)],
    )


# Built from constants: `values` repeats a fixed placeholder tuple; the values are parameters.
_UPSERT_SQL = """
    INSERT INTO events_seatledger AS l (event_id, slot_id, ticket_id, reserved, used, held)
    {values}
    ON CONFLICT ON CONSTRAINT seat_ledger_key DO UPDATE
       SET reserved = l.reserved + EXCLUDED.reserved, used = l.used + EXCLUDED.used,
           held = l.held + EXCLUDED.held
    RETURNING l.slot_id, l.ticket_id, l.reserved, l.used, l.held
"""
_UPDATE_SQL = """
    UPDATE events_seatledger AS l
       SET reserved = l.reserved + v.r, used = l.used + v.u, held = l.held + v.h
      FROM (VALUES {values}) AS v (slot_id, ticket_id, r, u, h)
     WHERE l.event_id = %s
       AND l.slot_id IS NOT DISTINCT FROM v.slot_id
       AND l.ticket_id IS NOT DISTINCT FROM v.ticket_id
    RETURNING l.slot_id, l.ticket_id, l.reserved, l.used, l.held
"""
_GUARD_SQL = """
    WITH ledger AS ({ledger})
    SELECT events_seats_guard(
               %s::int,
               max(ledger.reserved + ledger.used + ledger.held - m.maximum),
               count(*),
               %s::int),
           array_agg(ledger.slot_id), array_agg(ledger.ticket_id),
           array_agg(ledger.reserved), array_agg(ledger.used), array_agg(ledger.held)
      FROM ledger LEFT JOIN (VALUES {values}) AS m (slot_id, ticket_id, maximum)
        ON ledger.slot_id IS NOT DISTINCT FROM m.slot_id
       AND ledger.ticket_id IS NOT DISTINCT FROM m.ticket_id
"""


def hold_for(registration: Registration, *, reserved: int = 0, used: int = 0) -> Hold:
    return Hold(registration.slot_id, registration.ticket_id, reserved=reserved, used=used)


# --- audit ----------------------------------------------------------------------------------


def recount(*, event: Event) -> dict[Key, tuple[int, int, int]]:
    """The ledger as it should be, from the registrations and the waiting list's open offers
    (two grouped queries)."""
    expected: dict[Key, list[int]] = {}
    rows = (
        Registration.objects.filter(event=event, active=True, state__in=HOLDING)
        .values("slot_id", "ticket_id", "state")
        .annotate(n=Count("id"))
    )
    for row in rows:
        for key in _keys(event, row["slot_id"], row["ticket_id"]):
            counters = expected.setdefault(key, [0, 0, 0])
            counters[0 if row["state"] == RegistrationState.OPEN else 1] += row["n"]
    offers = (
        WaitlistEntry.objects.filter(event=event, state=WaitlistState.OFFERED)
        .values("slot_id", "ticket_id")
        .annotate(n=Count("id"))
    )
    for row in offers:
        for key in _keys(event, row["slot_id"], row["ticket_id"]):
            expected.setdefault(key, [0, 0, 0])[2] += row["n"]
    return {key: (r, u, h) for key, (r, u, h) in expected.items()}


def audit(*, event: Event) -> list[str]:
    """Differences between the ledger and a full recount; empty when consistent."""
    expected = recount(event=event)
    actual = {k: v for k, v in _ledger(event.pk).items() if any(v)}
    problems = []
    for key in sorted(set(expected) | set(actual), key=lambda k: (k[0] or 0, k[1] or 0)):
        want, have = expected.get(key, (0, 0, 0)), actual.get(key, (0, 0, 0))
        if want != have:
            problems.append(
                f"slot={key[0]} ticket={key[1]}: ledger reserved/used/held="
                f"{have[0]}/{have[1]}/{have[2]}, registrations and offers "
                f"{want[0]}/{want[1]}/{want[2]}"
            )
    return problems
