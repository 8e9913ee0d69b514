"""Booth exclusivity (spec-overlay.md §2.1, §2.3): a booth is never booked twice.

Two orders confirm the same booth at the same instant (two real threads, one connection each,
released together by a barrier), 20 rounds, each on a fresh booth: exactly one confirmed
booking, the other order gets `booth_unavailable`. The partial unique index
`one_confirmed_booking_per_booth` is the backstop: a raw insert that bypasses the service lock
is refused by PostgreSQL; the control shows two writers that skip the lock both decide the
booth is free, and only the index stops the second.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import IntegrityError, connection, transaction

from booths.models import BookingState, Booth, BoothBooking
from booths.services import bookings, confirm_booking, confirm_order_booths, request_booking
from events.db.dberrors import violated_constraint
from events.errors import DomainError
from tests.booths import factories
from tests.booths.helpers import booths_snapshot

REPEATS = 20
THREADS = 2
JOIN_TIMEOUT = 60  # seconds; a deadlock surfaces as a PostgreSQL error long before
INDEX = "one_confirmed_booking_per_booth"


def race(work: Callable[[int, int], object], rounds: int = REPEATS) -> list[list[object]]:
    """Run `work(round, thread)` in THREADS threads released together for every round; per
    round, what each thread got ("ok", an error code — "… via unique_index" when only the
    index stopped it — or the repr of anything unexpected)."""
    barrier = threading.Barrier(THREADS)
    outcomes: list[list[object]] = [[None] * THREADS for _ in range(rounds)]

    def worker(index: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait(timeout=JOIN_TIMEOUT)
                try:
                    work(r, index)
                    outcomes[r][index] = "ok"
                except DomainError as exc:
                    # A refusal decided under the booth lock, told apart from the index's
                    # backstop: with the lock, the index is never what stops the loser.
                    via = exc.details.get("via")
                    outcomes[r][index] = f"{exc.code} via {via}" if via else exc.code
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


def assert_one_winner(booth: Booth, outcome: list[object], orders: list[str]) -> str:
    assert Counter(outcome) == Counter({"ok": 1, "booth_unavailable": 1}), outcome
    winner = orders[outcome.index("ok")]
    held = BoothBooking.objects.filter(booth=booth, state=BookingState.CONFIRMED)
    assert list(held.values_list("order_ref", flat=True)) == [winner]
    booth.refresh_from_db()
    assert (booth.state, booth.order_ref) == ("unavailable", winner)
    return winner


@pytest.mark.django_db(transaction=True)
def test_two_orders_confirming_one_booth_at_once_exactly_one_wins(actor):
    booths = factories.BoothFactory.create_batch(REPEATS)

    def work(r: int, i: int) -> None:
        confirm_order_booths(
            order_ref=f"SO{r}-{i}",
            lines=[{"ref": f"SO{r}-{i}/1", "booth_ids": [booths[r].pk]}],
            partner_ref=f"P{i}",
            contact={"name": f"Renter {i}"},
            actor=actor,
        )

    for r, outcome in enumerate(race(work)):
        assert_one_winner(booths[r], outcome, [f"SO{r}-0", f"SO{r}-1"])


@pytest.mark.django_db(transaction=True)
def test_two_pending_bookings_confirmed_at_once_exactly_one_wins(actor):
    rounds = []
    for r in range(REPEATS):
        booth = factories.BoothFactory()
        pending = [
            request_booking(
                booth=booth,
                order_ref=f"SO{r}-{i}",
                order_line_ref="",
                partner_ref="",
                contact={},
                actor=actor,
            )
            for i in range(THREADS)
        ]
        rounds.append((booth, pending))

    def work(r: int, i: int) -> None:
        confirm_booking(booking=rounds[r][1][i], actor=actor)

    for r, outcome in enumerate(race(work)):
        booth, pending = rounds[r]
        winner = assert_one_winner(booth, outcome, [p.order_ref for p in pending])
        loser = next(p for p in pending if p.order_ref != winner)
        assert BoothBooking.objects.get(pk=loser.pk).state == BookingState.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_two_orders_with_the_same_two_booths_in_opposite_order_one_gets_both(actor):
    """All or nothing under the race, and no deadlock: the booths are locked in id order."""
    pairs = [factories.BoothFactory.create_batch(2) for _ in range(REPEATS)]

    def work(r: int, i: int) -> None:
        a, b = pairs[r]
        confirm_order_booths(
            order_ref=f"SO{r}-{i}",
            lines=[{"ref": f"SO{r}-{i}/1", "booth_ids": [a.pk, b.pk] if i else [b.pk, a.pk]}],
            partner_ref="",
            contact={},
            actor=actor,
        )

    for r, outcome in enumerate(race(work)):
        a, b = pairs[r]
        winner = assert_one_winner(a, outcome, [f"SO{r}-0", f"SO{r}-1"])
        assert assert_one_winner(b, outcome, [f"SO{r}-0", f"SO{r}-1"]) == winner
        assert BoothBooking.objects.filter(order_ref__startswith=f"SO{r}-").count() == 2


@pytest.mark.django_db(transaction=True)
def test_the_index_holds_when_the_lock_is_bypassed_by_a_raw_insert(actor):
    booth = factories.BoothFactory()
    booking = request_booking(
        booth=booth, order_ref="SO1", order_line_ref="", partner_ref="", contact={}, actor=actor
    )
    confirm_booking(booking=booking, actor=actor)
    before = booths_snapshot()
    with pytest.raises(IntegrityError) as info, transaction.atomic(), connection.cursor() as cur:
        cur.execute(
            "INSERT INTO booths_boothbooking (booth_id, order_ref, order_line_ref,"
            " partner_ref, contact_name, contact_email, contact_phone, state, created_at)"
            " VALUES (%s, 'SO2', '', '', '', '', '', 'confirmed', now())",
            [booth.pk],
        )
    assert violated_constraint(info.value) == INDEX
    assert booths_snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_control_without_the_lock_both_decide_free_and_only_the_index_stops_the_second(actor):
    """Check-then-act without the booth lock: a barrier between the read and the write makes
    both writers see a free booth; the partial unique index refuses the second write."""
    booth = factories.BoothFactory()
    pending = [
        factories.BoothBookingFactory(booth=booth, order_ref=f"SO{i}") for i in range(THREADS)
    ]
    barrier = threading.Barrier(THREADS)
    saw_free: list[bool | None] = [None] * THREADS
    outcome: list[object] = [None] * THREADS

    def worker(i: int) -> None:
        try:
            with transaction.atomic():
                saw_free[i] = not BoothBooking.objects.filter(
                    booth=booth, state=BookingState.CONFIRMED
                ).exists()
                barrier.wait(timeout=JOIN_TIMEOUT)
                BoothBooking.objects.filter(pk=pending[i].pk).update(state=BookingState.CONFIRMED)
            outcome[i] = "ok"
        except IntegrityError as exc:
            outcome[i] = violated_constraint(exc)
        except Exception as exc:  # noqa: BLE001 - recorded and asserted by the test
            outcome[i] = repr(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads)
    assert saw_free == [True, True]  # without the lock, both decided to book
    assert Counter(outcome) == Counter({"ok": 1, INDEX: 1}), outcome
    assert BoothBooking.objects.filter(booth=booth, state=BookingState.CONFIRMED).count() == 1


@pytest.mark.django_db
def test_a_stale_decision_hitting_the_index_is_reported_as_booth_unavailable(actor, monkeypatch):
    """Should a writer ever decide on a stale read, the index's refusal reaches the caller as
    `booth_unavailable`, with the transaction rolled back (nothing written)."""
    booth = factories.BoothFactory()
    holder = factories.BoothBookingFactory(booth=booth, state=BookingState.CONFIRMED)
    late = factories.BoothBookingFactory(booth=booth, order_ref="SO-late")
    real = bookings._live_bookings
    monkeypatch.setattr(
        bookings,
        "_live_bookings",
        lambda ids, also=None: [b for b in real(ids, also=also) if b.pk != holder.pk],
    )
    before = booths_snapshot()
    with pytest.raises(DomainError) as info:
        confirm_booking(booking=late, actor=actor)
    assert info.value.code == "booth_unavailable"
    assert info.value.details["via"] == "unique_index"
    assert booths_snapshot() == before
