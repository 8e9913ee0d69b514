"""The seat engine (spec.md §3): availability per (slot, ticket) pair, whole requests, the
ledger kept in the booking transaction (§14 item 13) and checked by `seats_audit`."""

from __future__ import annotations

import io
import logging
import re
import secrets
import time

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from events import hooks
from events.errors import DomainError
from events.models import (
    Event,
    Registration,
    RegistrationState,
    SeatLedger,
)
from events.services import registrations, seats
from tests.events import factories
from tests.helpers import snapshot

S = RegistrationState


def fresh(event) -> Event:
    return Event.objects.get(pk=event.pk)


# --- availability -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_only_active_open_and_done_registrations_hold_seats():
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    factories.RegistrationFactory.create_batch(2, event=event, state=S.OPEN)
    factories.RegistrationFactory(event=event, state=S.DONE)
    factories.RegistrationFactory(event=event, state=S.DRAFT)
    factories.RegistrationFactory(event=event, state=S.CANCEL)
    factories.RegistrationFactory(event=event, state=S.CANCEL, active=False)

    assert seats.availability(event=event) == 2
    assert seats.event_summary(event=event) == seats.SeatSummary(
        reserved=2, used=1, taken=3, max=5, available=2
    )
    assert seats.audit(event=event) == []


@pytest.mark.django_db
@pytest.mark.parametrize(("limited", "maximum"), [(False, 0), (False, 7), (True, 0)])
def test_without_an_event_limit_seats_are_unlimited(limited, maximum):
    """The event limit applies when seats_limited and seats_max > 0 (spec.md §3)."""
    event = factories.EventFactory(seats_limited=limited, seats_max=maximum)
    factories.RegistrationFactory.create_batch(3, event=event)

    assert seats.availability(event=event) is None
    summary = seats.event_summary(event=event)
    assert (summary.taken, summary.max, summary.available) == (3, None, None)
    assert seats.summaries([event])[event.pk] == summary


@pytest.mark.django_db
def test_ticket_limit_is_per_ticket_and_combines_with_the_event_limit():
    event = factories.EventFactory(seats_limited=True, seats_max=10)
    small = factories.TicketFactory(event=event, seats_max=3)
    free = factories.TicketFactory(event=event, seats_max=0)
    factories.RegistrationFactory.create_batch(2, event=event, ticket=small)
    factories.RegistrationFactory.create_batch(2, event=event, ticket=free)

    assert seats.availability(event=event, ticket=small) == 1  # min(10 - 4, 3 - 2)
    assert seats.availability(event=event, ticket=free) == 6  # 10 - 4
    assert seats.availability(event=event) == 6  # the best pair

    event.seats_limited = False
    assert seats.availability(event=event, ticket=small) == 1
    assert seats.availability(event=event, ticket=free) is None
    assert seats.availability(event=event) is None


@pytest.mark.django_db
def test_event_limit_is_per_slot_on_a_multi_slot_event():
    event = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=3)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    factories.RegistrationFactory.create_batch(2, event=event, slot=morning)

    assert seats.availability(event=event, slot=morning) == 1
    assert seats.availability(event=event, slot=afternoon) == 3
    assert seats.availability(event=event) == 3
    assert seats.event_summary(event=event) == seats.SeatSummary(2, 0, 2, 6, 4)


@pytest.mark.django_db
def test_ticket_limit_is_per_slot_and_ticket_on_a_multi_slot_event():
    event = factories.EventFactory(is_multi_slots=True)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    ticket = factories.TicketFactory(event=event, seats_max=2)
    factories.RegistrationFactory.create_batch(2, event=event, slot=morning, ticket=ticket)

    assert seats.availability(event=event, slot=morning, ticket=ticket) == 0
    assert seats.availability(event=event, slot=afternoon, ticket=ticket) == 2
    assert seats.ticket_summaries(event=event) == {
        (morning.pk, ticket.pk): {"taken": 2, "available": 0},
        (afternoon.pk, ticket.pk): {"taken": 0, "available": 2},
    }
    with pytest.raises(DomainError) as caught:
        registrations.register(
            event=event, slot=morning, ticket=ticket, attendees=[{"name": "A"}], actor="system"
        )
    assert caught.value.code == "sold_out"
    registrations.register(
        event=event, slot=afternoon, ticket=ticket, attendees=[{"name": "B"}], actor="system"
    )
    assert seats.availability(event=event, slot=afternoon, ticket=ticket) == 1


@pytest.mark.django_db
def test_negative_availability_is_sold_out(actor):
    """Seats forced in by hand beyond the limit: the event is sold out, never open."""
    event = factories.EventFactory(seats_limited=True, seats_max=2)
    factories.RegistrationFactory.create_batch(3, event=event)  # no check in the factory

    assert seats.availability(event=event) == -1
    summary = seats.event_summary(event=event)
    assert summary.available == -1
    assert summary.sold_out is True
    before = snapshot(event)
    with pytest.raises(DomainError) as caught:
        registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)
    assert caught.value.code == "sold_out"
    assert caught.value.details["missing"] == [{"slot_id": None, "ticket_id": None, "missing": 1}]
    assert snapshot(event) == before


@pytest.mark.django_db
def test_a_request_for_n_seats_fails_whole_naming_the_missing_count(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    ticket = factories.TicketFactory(event=event, seats_max=0)
    factories.RegistrationFactory.create_batch(3, event=event, ticket=ticket)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.register(
            event=event,
            ticket=ticket,
            attendees=[{"name": f"A{i}"} for i in range(4)],
            actor=actor,
        )

    assert caught.value.code == "sold_out"
    assert caught.value.details == {
        "missing": [{"slot_id": None, "ticket_id": ticket.pk, "missing": 2}]
    }
    assert snapshot(event) == before
    # exactly the remaining two still fit
    assert (
        len(
            registrations.register(
                event=event, ticket=ticket, attendees=[{"name": "B"}, {"name": "C"}], actor=actor
            )
        )
        == 2
    )
    assert seats.availability(event=event) == 0


@pytest.mark.django_db
def test_draft_registrations_hold_no_seat(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=1)

    registrations.register(event=event, attendees=[{"name": "A"}], state="draft", actor=actor)
    registrations.register(event=event, attendees=[{"name": "B"}], state="draft", actor=actor)

    assert seats.availability(event=event) == 1
    assert seats.event_summary(event=event).taken == 0


@pytest.mark.django_db
def test_cancel_and_reset_free_seats_and_attendance_moves_reserved_to_used(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=3)
    ticket = factories.TicketFactory(event=event, seats_max=2)
    a, b = registrations.register(
        event=event, ticket=ticket, attendees=[{"name": "A"}, {"name": "B"}], actor=actor
    )

    def state():
        s = seats.event_summary(event=event)
        return (s.reserved, s.used, seats.availability(event=event, ticket=ticket))

    assert state() == (2, 0, 0)
    registrations.mark_attended(registration=a, actor=actor)
    assert state() == (1, 1, 0)
    registrations.cancel(registration=b, actor=actor)
    assert state() == (0, 1, 1)
    registrations.reset_to_draft(registration=b, actor=actor)
    assert state() == (0, 1, 1)
    registrations.confirm(registration=b, actor=actor)
    assert state() == (1, 1, 0)
    registrations.reset_to_draft(registration=b, actor=actor)
    assert state() == (0, 1, 1)
    registrations.undo_attendance(registration=a, actor=actor)
    assert state() == (1, 0, 1)
    assert seats.audit(event=event) == []


@pytest.mark.django_db
def test_confirm_checks_seats(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    factories.RegistrationFactory(event=event)
    draft = factories.RegistrationFactory(event=event, state=S.DRAFT)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.confirm(registration=draft, actor=actor)

    assert caught.value.code == "sold_out"
    assert snapshot(event) == before


@pytest.mark.django_db(transaction=True)
def test_a_refused_confirm_as_its_own_transaction_writes_and_logs_nothing(actor, caplog):
    """The transition's writes travel in one round trip: the seat guard's refusal fails the
    first of them, the server skips the others, and the refusal comes out as sold_out."""
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    factories.RegistrationFactory(event=event)
    draft = factories.RegistrationFactory(event=event, state=S.DRAFT)
    before = snapshot(event)

    with caplog.at_level("WARNING"), pytest.raises(DomainError) as caught:
        registrations.confirm(registration=draft, actor=actor)

    assert caught.value.code == "sold_out"
    assert snapshot(event) == before
    assert [r for r in caplog.records if r.levelno >= 30] == []
    assert not connection.in_atomic_block and connection.connection.autocommit is True
    registrations.cancel(
        registration=Registration.objects.exclude(pk=draft.pk).get(event=event), actor=actor
    )
    assert registrations.confirm(registration=draft, actor=actor).state == S.OPEN  # then it can
    assert seats.audit(event=event) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("shape", "code"),
    [
        ("no_ticket", "ticket_required"),
        ("foreign_ticket", "invalid_ticket"),
        ("no_slot", "slot_required"),
        ("foreign_slot", "invalid_slot"),
        ("slot_on_single", "invalid_slot"),
    ],
)
def test_pair_refusals_write_nothing(shape, code, actor):
    multi = shape in ("no_slot", "foreign_slot")
    event = factories.EventFactory(is_multi_slots=multi, seats_limited=True, seats_max=5)
    ticket = factories.TicketFactory(event=event)
    slot = factories.SlotFactory(event=event) if multi else None
    kwargs = {"ticket": ticket, "slot": slot}
    if shape == "no_ticket":
        kwargs["ticket"] = None
    elif shape == "foreign_ticket":
        kwargs["ticket"] = factories.TicketFactory()
    elif shape == "no_slot":
        kwargs["slot"] = None
    elif shape == "foreign_slot":
        kwargs["slot"] = factories.SlotFactory()
    elif shape == "slot_on_single":
        kwargs["slot"] = factories.SlotFactory()
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.register(event=event, attendees=[{"name": "A"}], actor=actor, **kwargs)

    assert caught.value.code == code
    assert snapshot(event) == before


# --- seats_audit -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_seats_audit_passes_on_consistent_data(actor):
    event = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=5)
    slot = factories.SlotFactory(event=event)
    ticket = factories.TicketFactory(event=event, seats_max=4)
    regs = registrations.register(
        event=event, slot=slot, ticket=ticket, attendees=[{"name": "A"}, {"name": "B"}], actor=actor
    )
    registrations.mark_attended(registration=regs[0], actor=actor)
    factories.EventFactory(name="empty one")
    out = io.StringIO()

    call_command("seats_audit", stdout=out)

    assert out.getvalue().strip() == "seats_audit: 2 event(s) consistent"


@pytest.mark.django_db
def test_seats_audit_fails_naming_the_event_after_the_ledger_is_tampered_with(actor):
    good = factories.EventFactory(name="Good one")
    factories.RegistrationFactory(event=good)
    bad = factories.EventFactory(name="Tampered one", seats_limited=True, seats_max=5)
    registrations.register(event=bad, attendees=[{"name": "A"}], actor=actor)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE events_seatledger SET reserved = reserved + 2 "
            "WHERE event_id = %s AND slot_id IS NULL AND ticket_id IS NULL",
            [bad.pk],
        )
    out, err = io.StringIO(), io.StringIO()

    with pytest.raises(SystemExit) as exited:
        call_command("seats_audit", stdout=out, stderr=err)

    assert exited.value.code == 1
    assert err.getvalue().splitlines() == [
        f"event {bad.pk} (Tampered one): slot=None ticket=None: "
        "ledger reserved/used/held=3/0/0, registrations and offers 1/0/0",
        "seats_audit: 1 difference(s) in 2 event(s)",
    ]
    assert seats.audit(event=good) == []


@pytest.mark.django_db
def test_seats_audit_notices_a_registration_changed_behind_the_ledger():
    event = factories.EventFactory()
    registration = factories.RegistrationFactory(event=event)
    Registration.objects.filter(pk=registration.pk).update(state=S.CANCEL)  # forced by hand

    assert seats.audit(event=event) == [
        "slot=None ticket=None: ledger reserved/used/held=1/0/0, registrations and offers 0/0/0"
    ]
    with pytest.raises(SystemExit) as exited:
        call_command(
            "seats_audit", "--event", str(event.pk), stdout=io.StringIO(), stderr=io.StringIO()
        )
    assert exited.value.code == 1


# --- the cost of a booking does not grow with the event (spec.md §3 rule 5) ----------------


def bulk_registrations(event, n: int) -> None:
    """n open registrations written in bulk, their seats added to the ledger in one apply."""
    Registration.objects.bulk_create(
        [
            Registration(
                event=event,
                state=S.OPEN,
                barcode=str(secrets.randbits(64)),
                name=f"Bulk {i}",
            )
            for i in range(n)
        ],
        batch_size=2000,
    )
    seats.apply(event=event, holds=[seats.Hold(None, None, reserved=n)])


def register_queries(event, actor) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        registrations.register(event=event, attendees=[{"name": "Measured"}], actor=actor)
    return [q["sql"] for q in ctx.captured_queries]


@pytest.mark.django_db
def test_register_costs_the_same_queries_with_0_and_5000_registrations(actor):
    empty = factories.EventFactory(seats_limited=True, seats_max=10_000)
    full = factories.EventFactory(seats_limited=True, seats_max=10_000)
    bulk_registrations(full, 5_000)

    on_empty = register_queries(empty, actor)
    on_full = register_queries(full, actor)

    assert len(on_full) == len(on_empty)
    assert len(on_empty) <= 10  # design-notes: ~6–10 statements per booking
    assert seats.availability(event=full) == 10_000 - 5_001
    assert seats.audit(event=full) == []
    # no statement of a booking reads the registrations table (to count them or otherwise): the
    # counts it has are the seat guard's, inside events_book, over the ledger rows it changed
    assert not [q for q in on_full if re.search(r'\bFROM\s+"?events_registration"?\s', q)]
    assert [q for q in on_full if "events_book(" in q]  # the locked work, one call


# --- the guard: the limit check inside the statement that takes the seats ---------------------


@pytest.mark.django_db
def test_the_statement_itself_refuses_past_a_limit_whatever_the_caller_checks(actor):
    """The decision is PostgreSQL's (events_seats_guard, on the counters the increment produced):
    the statement fails, so nothing it wrote survives even if the caller never looked at it."""
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    ticket = factories.TicketFactory(event=event, seats_max=0)
    registrations.register(event=event, ticket=ticket, attendees=[{"name": "A"}], actor=actor)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught, transaction.atomic():
        seats.send_reserve(event=event, slot_id=None, ticket=ticket, count=3)  # raises as it runs
    assert caught.value.code == "sold_out"
    assert caught.value.details["missing"] == [
        {"slot_id": None, "ticket_id": ticket.pk, "missing": 3}
    ]
    assert snapshot(event) == before


@pytest.mark.django_db
def test_a_ledger_missing_the_rows_it_should_move_refuses_with_nothing_written(actor):
    """Moving held seats to reserved updates rows that must exist; a ledger without them (data
    broken by hand) fails the statement instead of booking past the counters."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    before = snapshot(event)
    with pytest.raises(RuntimeError, match="missing rows"), transaction.atomic():
        seats.reserve(event=event, slot_id=None, ticket=None, count=1, from_held=1)
    assert snapshot(event) == before
    assert not SeatLedger.objects.filter(event=event).exists()


@pytest.mark.django_db
def test_an_unlimited_pair_passes_the_guard_and_returns_its_counters(actor):
    event = factories.EventFactory(seats_limited=False)
    with transaction.atomic():
        sent = seats.send_reserve(event=event, slot_id=None, ticket=None, count=4)
        assert sent.check() == {(None, None): (4, 0, 0)}


@pytest.mark.parametrize(
    "owned",
    [
        pytest.param(False, marks=pytest.mark.django_db, id="savepoint"),
        # the booking opens its own transaction: the refusal meets the queued COMMIT
        pytest.param(True, marks=pytest.mark.django_db(transaction=True), id="own-transaction"),
    ],
)
def test_a_refusal_reaching_the_client_mid_queue_logs_nothing_and_writes_nothing(
    actor, caplog, owned
):
    """Under load the guard's refusal can reach the client while the booking still queues its
    hook statements and COMMIT (psycopg raises it at a later execute): still `SeatsUnavailable`,
    nothing written, and no psycopg WARNING about the skipped statements (one per refusal in a
    ticket rush otherwise)."""
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)
    before = snapshot(event)

    def slow_hook(rows, who):
        time.sleep(0.05)  # the refusal arrives meanwhile; the next statement meets it

    hooks.registrations_changed.insert(0, slow_hook)
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                with pytest.raises(DomainError) as caught:
                    registrations.register(event=event, attendees=[{"name": "B"}], actor=actor)
                assert caught.value.code == "sold_out"
    finally:
        hooks.registrations_changed.remove(slow_hook)
    # neither psycopg's warning nor the pipeline's own (the skipped statements answer "pipeline
    # aborted", the one error expected at the pipeline's end)
    assert [
        r.getMessage() for r in caplog.records if r.name.startswith(("psycopg", "events.pipeline"))
    ] == []
    assert snapshot(event) == before
    # the connection is fine afterwards
    assert registrations.register(
        event=factories.EventFactory(), attendees=[{"name": "C"}], actor=actor
    )


@pytest.mark.django_db(transaction=True)
def test_a_booking_that_owns_its_transaction_commits_nothing_when_the_ledger_misses_rows(actor):
    """Outside any transaction `events_book` is its own transaction: its guard must refuse a
    ledger change that found no row (held seats that are not there) inside it, so nothing
    commits."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    with pytest.raises(RuntimeError, match="missing rows"):
        registrations.register(event=event, attendees=[{"name": "Held"}], held_seats=1, actor=actor)
    assert not Registration.objects.filter(event=event).exists()
    assert not SeatLedger.objects.filter(event=event).exists()


@pytest.mark.parametrize(
    "own",
    [
        pytest.param(False, marks=pytest.mark.django_db, id="in-a-callers-transaction"),
        pytest.param(True, marks=pytest.mark.django_db(transaction=True), id="own-transaction"),
    ],
)
def test_a_transition_whose_ledger_rows_are_missing_fails_whole(actor, own):
    """An error met after the UPDATE and the audit row were sent with the ledger change (the
    ledger's rows deleted by hand): the transition raises and nothing of it stays. As its own
    transaction the COMMIT travels right behind the writes: the ledger statement's own check
    (seats.send_apply(guarded=True)) is what keeps that COMMIT from running."""
    event = factories.EventFactory(seats_limited=True, seats_max=3)
    (reg,) = registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)
    SeatLedger.objects.filter(event=event).delete()
    before = snapshot(event)

    with pytest.raises(RuntimeError, match="missing rows"):
        registrations.mark_attended(registration=reg, actor=actor)

    assert snapshot(event) == before
    assert Registration.objects.get(pk=reg.pk).state == S.OPEN
