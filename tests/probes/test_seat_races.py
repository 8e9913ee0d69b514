"""Seat races (spec.md §3 rules 2–4): N real threads released by one barrier race for K seats.

Each case runs REPEATS rounds with the same 50 worker threads (one database connection each,
closed at the end); every round has its own freshly prepared event, so a round is one race for
the last 10 seats. After each round: exactly the expected holders, every loser `sold_out`, no
other error, and the ledger equal to a full recount (seats.audit). Controls: a count-then-insert
without a lock oversells (deterministically: a barrier sits between the count and the insert);
register() without the Event lock still cannot oversell (the ledger check is on the counters
its own increment produced).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connection, transaction

from events.errors import DomainError
from events.models import Event, Registration, RegistrationState
from events.services import registrations, seats
from tests.events import factories

THREADS = 50
REPEATS = 20
SEATS_LEFT = 10
JOIN_TIMEOUT = 120  # seconds; a deadlock would surface as a PostgreSQL error long before


def race(rounds: int, work: Callable[[int, int], object]) -> list[list[object]]:
    """Run `work(round, thread)` in THREADS threads, all released together for every round.

    Returns, per round, what each thread got: the return value's `len`, or the error code, or
    the repr of an unexpected exception (asserted on by the caller, never swallowed).
    """
    barrier = threading.Barrier(THREADS)
    outcomes: list[list[object]] = [[None] * THREADS for _ in range(rounds)]

    def worker(index: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait(timeout=JOIN_TIMEOUT)
                try:
                    outcomes[r][index] = len(work(r, index))
                except DomainError as exc:
                    outcomes[r][index] = exc.code
                except Exception as exc:  # noqa: BLE001 - recorded and asserted by the test
                    outcomes[r][index] = repr(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a worker is stuck (deadlock?)"
    return outcomes


def attendee(round_: int, index: int, n: int = 0) -> dict:
    return {"name": f"Racer {round_}-{index}-{n}", "email": f"r{round_}.{index}.{n}@example.org"}


def assert_round(event: Event, outcome: list[object], *, winners: int, group: int = 1) -> None:
    got = Counter(outcome)
    assert got == Counter({group: winners, "sold_out": THREADS - winners}), got
    holders = Registration.objects.filter(event=event, name__startswith="Racer")
    assert holders.filter(state=RegistrationState.OPEN).count() == holders.count()
    assert holders.count() == winners * group
    if group > 1:
        # whole groups only: every winning request holds exactly `group` rows
        per_thread = Counter(
            name.rsplit("-", 1)[0] for name in holders.values_list("name", flat=True)
        )
        assert set(per_thread.values()) == {group}
    assert seats.audit(event=event) == []


# --- the cases -----------------------------------------------------------------------------


def event_limit_case(actor):
    """Event limit, single-slot: seats_max 15 with 5 already held → the last 10."""
    event = factories.EventFactory(seats_limited=True, seats_max=SEATS_LEFT + 5)
    factories.RegistrationFactory.create_batch(4, event=event)
    factories.RegistrationFactory(event=event, state=RegistrationState.DONE)
    factories.RegistrationFactory(event=event, state=RegistrationState.DRAFT)  # holds no seat

    def book(r, i):
        return registrations.register(event=event, attendees=[attendee(r, i)], actor=actor)

    return event, book


def ticket_limit_case(actor):
    """Ticket limit: ticket seats_max 12 with 2 held; another ticket's holders do not count."""
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=SEATS_LEFT + 2)
    other = factories.TicketFactory(event=event, seats_max=0)
    factories.RegistrationFactory.create_batch(2, event=event, ticket=ticket)
    factories.RegistrationFactory.create_batch(3, event=event, ticket=other)

    def book(r, i):
        return registrations.register(
            event=event, ticket=ticket, attendees=[attendee(r, i)], actor=actor
        )

    return event, book


def slot_limit_case(actor):
    """Event limit per slot on a multi-slot event: slot A has 10 left; slot B's seats differ."""
    event = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=SEATS_LEFT)
    slot_a = factories.SlotFactory(event=event)
    slot_b = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    factories.RegistrationFactory.create_batch(6, event=event, slot=slot_b)

    def book(r, i):
        return registrations.register(
            event=event, slot=slot_a, attendees=[attendee(r, i)], actor=actor
        )

    return event, book


def slot_ticket_limit_case(actor):
    """Ticket limit per (slot, ticket): (A, T) has 10 left; (B, T) holders do not count."""
    event = factories.EventFactory(is_multi_slots=True)
    slot_a = factories.SlotFactory(event=event)
    slot_b = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    ticket = factories.TicketFactory(event=event, seats_max=SEATS_LEFT + 1)
    factories.RegistrationFactory(event=event, slot=slot_a, ticket=ticket)
    factories.RegistrationFactory.create_batch(7, event=event, slot=slot_b, ticket=ticket)

    def book(r, i):
        return registrations.register(
            event=event, slot=slot_a, ticket=ticket, attendees=[attendee(r, i)], actor=actor
        )

    return event, book


CASES = {
    "event_limit": event_limit_case,
    "ticket_limit": ticket_limit_case,
    "slot_limit": slot_limit_case,
    "slot_ticket_limit": slot_ticket_limit_case,
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", sorted(CASES))
def test_fifty_threads_race_for_the_last_ten_seats(case, actor):
    prepared = [CASES[case](actor) for _ in range(REPEATS)]

    outcomes = race(REPEATS, lambda r, i: prepared[r][1](r, i))

    for (event, _), outcome in zip(prepared, outcomes, strict=True):
        assert_round(event, outcome, winners=SEATS_LEFT)


@pytest.mark.django_db(transaction=True)
def test_groups_of_three_win_whole_or_not_at_all(actor):
    events = [
        factories.EventFactory(seats_limited=True, seats_max=SEATS_LEFT) for _ in range(REPEATS)
    ]

    outcomes = race(
        REPEATS,
        lambda r, i: registrations.register(
            event=events[r], attendees=[attendee(r, i, n) for n in range(3)], actor=actor
        ),
    )

    for event, outcome in zip(events, outcomes, strict=True):
        # 3 groups of 3 = 9 seats; the 10th seat stays free (never a partial group)
        assert_round(event, outcome, winners=3, group=3)
        assert seats.availability(event=event) == 1


# --- controls ---------------------------------------------------------------------------------


def naive_book(event: Event, r: int, i: int, barrier: threading.Barrier) -> list:
    """Count-then-insert without any lock (the banned shape); the barrier between the count
    and the insert makes the race window certain instead of likely."""
    with transaction.atomic():
        taken = Registration.objects.filter(
            event=event, state__in=(RegistrationState.OPEN, RegistrationState.DONE)
        ).count()
        barrier.wait(timeout=JOIN_TIMEOUT)
        if taken >= event.seats_max:
            raise DomainError("sold out", code="sold_out")
        return [
            Registration.objects.create(
                event=event, state=RegistrationState.OPEN, barcode=f"7{r:03d}{i:04d}"
            )
        ]


@pytest.mark.django_db(transaction=True)
def test_control_count_then_insert_without_a_lock_oversells():
    event = factories.EventFactory(seats_limited=True, seats_max=SEATS_LEFT)
    inner = threading.Barrier(THREADS)

    (outcome,) = race(1, lambda r, i: naive_book(event, r, i, inner))

    # every thread saw 0 taken before anyone inserted: 50 holders for 10 seats
    assert Counter(outcome) == Counter({1: THREADS})
    assert Registration.objects.filter(event=event).count() == THREADS


@pytest.mark.django_db(transaction=True)
def test_without_the_event_lock_the_ledger_check_still_holds(actor, monkeypatch):
    """Defence in depth: the seat check reads the counters its own increment produced, under
    the ledger rows' locks, so even register() calling a copy of `events_book` without its
    Event lock cannot oversell (the Event lock remains the rule: it also fences
    cancel_event)."""
    from pathlib import Path

    from django.db import connection

    import events
    from events.db import booking as booking_sql

    event = factories.EventFactory(seats_limited=True, seats_max=SEATS_LEFT)
    source = (Path(events.__file__).parent / "db" / "sql" / "book.sql").read_text()
    book = source[source.index("CREATE OR REPLACE FUNCTION events_book(") :]
    lock = "PERFORM 1 FROM events_event WHERE id = v_event FOR UPDATE;"
    assert lock in book
    unlocked = book.replace("events_book(", "events_book_unlocked(", 1).replace(
        lock, "PERFORM 1 FROM events_event WHERE id = v_event;"
    )
    with connection.cursor() as cursor:
        cursor.execute(unlocked)
    monkeypatch.setattr(
        booking_sql,
        "_BOOK_SQL",
        booking_sql._BOOK_SQL.replace("events_book(", "events_book_unlocked("),
    )

    (outcome,) = race(
        1,
        lambda r, i: registrations.register(event=event, attendees=[attendee(r, i)], actor=actor),
    )

    assert_round(event, outcome, winners=SEATS_LEFT)
