"""The booking as one statement (registrations.register, docs/spec.md "The booking in one
statement"): every part waits for the Event lock its first CTE takes; the statement is the
whole transaction of its atomic block; the drawn ids and the leading rider in the SQL; the
inputs a thread keeps."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection, transaction
from psycopg import pq

from events.db import locks, pipeline, rows
from events.models import Event, Registration, SeatLedger
from events.services import registrations
from leads.models import LeadRequest
from tests.events import factories
from tests.helpers import database_url


def _waits_for_a_lock(pid: int) -> bool:
    with psycopg.connect(database_url(), autocommit=True) as watcher:
        return watcher.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)", [pid]
        ).fetchone()[0]


def _row_free(sql: str, key: int) -> bool:
    """Whether another connection can lock the row at once (FOR UPDATE NOWAIT)."""
    with psycopg.connect(database_url(), autocommit=True) as other:
        try:
            other.execute(sql, [key])
        except psycopg.errors.LockNotAvailable:
            return False
        return True


@pytest.mark.django_db(transaction=True)
def test_a_booking_waiting_for_the_event_lock_holds_no_ledger_or_lead_request_row(actor):
    """PostgreSQL runs a statement's CTEs in no set order; the booking's parts refer to its
    lock CTE, so none runs before the Event row is locked. While the booking waits for that
    lock, the seat-ledger row and the event's lead request (both existing: upserts that ran
    early would lock them) stay free for others — the lock order of every verb, Event first."""
    event = factories.EventFactory(seats_limited=True, seats_max=10)
    registrations.register(event=event, attendees=[{"name": "First"}], actor=actor)
    assert LeadRequest.objects.filter(event=event).exists()
    booker_pid: list[int] = []
    booked: list[Registration] = []
    errors: list[BaseException] = []

    def booker() -> None:
        try:
            connection.ensure_connection()
            booker_pid.append(connection.connection.info.backend_pid)
            booked.extend(
                registrations.register(event=event, attendees=[{"name": "Late"}], actor=actor)
            )
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()

    with psycopg.connect(database_url()) as holder:  # holds the Event row until it rolls back
        holder.execute("SELECT 1 FROM events_event WHERE id = %s FOR UPDATE", [event.pk])
        thread = threading.Thread(target=booker)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not (booker_pid and _waits_for_a_lock(booker_pid[0])):
                assert time.monotonic() < deadline, "the booking never waited for the Event lock"
                time.sleep(0.01)
            ledger_free = _row_free(
                "SELECT 1 FROM events_seatledger WHERE event_id = %s FOR UPDATE NOWAIT", event.pk
            )
            request_free = _row_free(
                "SELECT 1 FROM leads_leadrequest WHERE event_id = %s FOR UPDATE NOWAIT", event.pk
            )
        finally:
            holder.rollback()
            thread.join(30)
    assert errors == [] and len(booked) == 1
    assert ledger_free and request_free
    assert event.registrations.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_lone_statement_is_the_whole_transaction_and_on_commit_runs_after_it():
    event = factories.EventFactory()
    ran: list[str] = []
    with transaction.atomic():
        with pipeline.lone_statement() as owned:
            assert owned
            transaction.on_commit(lambda: ran.append("after"))
            with connection.cursor() as cursor:
                cursor.execute("UPDATE events_event SET name = 'Renamed' WHERE id = %s", [event.pk])
            raw = connection.connection
            assert raw.info.transaction_status == pq.TransactionStatus.IDLE  # committed
        assert raw.autocommit is False  # back to the atomic block's setting
        with psycopg.connect(database_url(), autocommit=True) as other:
            (name,) = other.execute(
                "SELECT name FROM events_event WHERE id = %s", [event.pk]
            ).fetchone()
        assert name == "Renamed" and ran == []
    assert ran == ["after"]
    assert connection.connection.autocommit is True


@pytest.mark.django_db(transaction=True)
def test_a_lone_statement_takes_over_nothing_in_a_savepoint_or_a_begun_transaction():
    with transaction.atomic():
        with transaction.atomic(), pipeline.lone_statement() as owned:
            assert not owned
    with transaction.atomic():
        Event.objects.exists()  # the transaction is under way
        with pipeline.lone_statement() as owned:
            assert not owned
            assert connection.connection.autocommit is False


def test_a_drawn_id_is_written_as_its_subquery_in_every_row_or_refused():
    first = Registration(pk=rows.Drawn(1), event_id=1, barcode="1", name="A")
    second = Registration(pk=rows.Drawn(2), event_id=1, barcode="2", name="B")
    sql, params = rows.insert_statement([first, second])
    assert sql.count(rows.Drawn.sql) == 2
    assert params.count(1) >= 1 and 2 in params
    with pytest.raises(TypeError, match="drawn id in some rows only"):
        rows.insert_statement(
            [
                Registration(pk=rows.Drawn(1), event_id=1, barcode="1", name="A"),
                Registration(pk=7, event_id=1, barcode="2", name="B"),
            ]
        )
    assert rows.Drawn(1).statement(offset=-1) == (f"({rows.Drawn.sql} + %s)", [1, -1])
    assert rows.Drawn(1) < rows.Drawn(2)


def test_a_leading_rider_comes_first_and_its_parameters_with_it():
    lead = rows.Rider(ctes="lead AS (SELECT %s AS x)", params=["L"], counted="lead", leading=True)
    tail = rows.Rider(ctes="tail AS (SELECT %s AS y)", params=["T"], counted="tail")
    sql, params = rows.combined([("INSERT INTO t (v) VALUES (%s)", ["W"])], [lead, tail])
    assert sql.index("lead AS") < sql.index("w0 AS") < sql.index("tail AS")
    assert params == ["L", "W", "T"]
    column = rows.Rider(ctes="c AS (SELECT 1)", params=[], counted="c", column="(SELECT 5)")
    assert rows.rider_columns([column, tail]) == ", (SELECT 5), (SELECT count(*) FROM tail)"


@pytest.mark.django_db(transaction=True)
def test_the_inputs_a_thread_keeps_are_bounded_and_a_deleted_event_forgets_its_own(
    actor, monkeypatch
):
    monkeypatch.setattr(locks, "_KEPT", 2)
    events = [factories.EventFactory() for _ in range(3)]
    locks.booking_inputs(events[0].pk, None)
    locks.booking_inputs(events[1].pk, None)
    assert locks.booking_inputs(events[0].pk, None).kept  # used again: the most recent now
    locks.booking_inputs(events[2].pk, None)
    assert list(locks._kept.inputs) == [(events[0].pk, None), (events[2].pk, None)]
    gone = events[-1]
    assert (gone.pk, None) in locks._kept.inputs
    Event.objects.filter(pk=gone.pk).delete()
    with pytest.raises(Event.DoesNotExist):
        registrations.register(event=gone, attendees=[{"name": "A"}], actor=actor)
    assert (gone.pk, None) not in locks._kept.inputs


@pytest.mark.django_db(transaction=True)
def test_a_refusal_is_never_decided_on_kept_inputs(actor):
    """The thread kept an event's inputs; the event is cancelled since. A request that the kept
    inputs would refuse for another reason (a slot on an event without slots) is refused for
    the reason the committed event gives, checked first: registrations closed."""
    from events.errors import RegistrationsClosed
    from events.services import events as event_services

    event = factories.EventFactory()
    other = factories.EventFactory(is_multi_slots=True)
    slot = factories.SlotFactory(event=other)
    registrations.register(event=event, attendees=[{"name": "Kept"}], actor=actor)
    event_services.cancel_event(event=event, actor=actor)
    with pytest.raises(RegistrationsClosed):
        registrations.register(event=event, attendees=[{"name": "A"}], slot=slot, actor=actor)


@pytest.mark.django_db(transaction=True)
def test_a_booking_the_kept_inputs_would_refuse_is_decided_again_and_booked(actor):
    """Kept inputs say the event has tickets (so one must be chosen); the ticket was deleted
    since: the booking without a ticket is decided again on the inputs read now, and books."""
    from events.services import tickets

    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    assert locks.booking_inputs(event.pk, None).event.has_tickets  # kept by this thread
    tickets.delete_ticket(ticket=ticket, actor=actor)
    (row,) = registrations.register(event=event, attendees=[{"name": "After"}], actor=actor)
    assert row.ticket_id is None and row.pk is not None
    assert not locks.booking_inputs(event.pk, None).event.has_tickets  # kept now: the new ones


@pytest.mark.django_db(transaction=True)
def test_a_block_marked_for_rollback_is_not_taken_over_and_the_booking_writes_nothing(actor):
    """A block marked to be rolled back (`transaction.set_rollback(True)`) is never made a
    transaction of its own statement: nothing in it may commit. A booking whose caller's
    recheck marks its block is refused by Django (no query runs in a block so marked) and
    writes nothing."""
    from django.db.transaction import TransactionManagementError

    event = factories.EventFactory(seats_limited=True, seats_max=5)
    registrations.register(event=event, attendees=[{"name": "Warm"}], actor=actor)
    with transaction.atomic():
        transaction.set_rollback(True)
        with pipeline.lone_statement() as owned:
            assert not owned
            assert connection.connection.autocommit is False

    def mark(event, ticket) -> None:
        transaction.set_rollback(True)

    with pytest.raises(TransactionManagementError):
        registrations.register(
            event=event, attendees=[{"name": "Undone"}], recheck=mark, actor=actor
        )

    assert list(event.registrations.values_list("name", flat=True)) == ["Warm"]
    ledger = SeatLedger.objects.get(event=event, slot=None, ticket=None)
    assert ledger.reserved == 1


@pytest.mark.django_db(transaction=True)
def test_a_stage_edit_waits_for_a_booking_holding_the_event_lock(actor):
    """A caller's transaction books with no savepoint (its inputs read under the Event lock,
    then the statement): a change to the event's stage `pipe_end` meanwhile — a booking input
    — waits for the Event lock, so the statement finds the inputs it decided on and books;
    the stage edit lands after."""
    from events.services import reference

    stage = factories.StageFactory(pipe_end=False)
    event = factories.EventFactory(stage=stage)
    editor_pid: list[int] = []
    edited = threading.Event()
    errors: list[BaseException] = []

    def editor() -> None:
        try:
            connection.ensure_connection()
            editor_pid.append(connection.connection.info.backend_pid)
            reference.update_stage(stage=stage, actor=actor, pipe_end=True)
            edited.set()
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=editor)

    def edit_meanwhile(event, ticket) -> None:
        thread.start()
        deadline = time.monotonic() + 30
        while not edited.is_set() and not errors:
            if editor_pid and _waits_for_a_lock(editor_pid[0]):
                return  # the edit waits for this transaction's Event lock
            assert time.monotonic() < deadline, "the stage edit neither waited nor ended"
            time.sleep(0.01)

    with transaction.atomic():
        (row,) = registrations.register(
            event=event,
            attendees=[{"name": "Booked"}],
            recheck=edit_meanwhile,
            savepoint=False,
            actor=actor,
        )
        assert not edited.is_set()
    thread.join(30)
    assert errors == [] and edited.is_set()
    assert Registration.objects.filter(pk=row.pk).exists()
    assert Event.objects.get(pk=event.pk).stage.pipe_end is True


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["alone", "in_a_callers_transaction", "without_a_savepoint"])
def test_a_slot_deleted_since_the_caller_read_it_is_refused_as_invalid_and_writes_nothing(
    actor, where
):
    """A slot is not one of the booking's inputs (only that it is still the event's matters):
    deleted after the caller read it, the booking lock refuses it under the Event lock —
    `invalid_slot`, at the statement, so inside a caller's transaction too (the foreign keys to
    it are only checked at COMMIT)."""
    from contextlib import nullcontext

    from events.errors import ValidationFailed
    from events.models import EventAuditLog
    from events.services import events as event_services

    event = factories.EventFactory(is_multi_slots=True, seats_limited=True, seats_max=5)
    kept, gone = factories.SlotFactory(event=event), factories.SlotFactory(event=event)
    registrations.register(event=event, attendees=[{"name": "Warm"}], slot=kept, actor=actor)
    event_services.delete_slot(slot=gone, actor=actor)
    audit_rows = EventAuditLog.objects.count()
    ledger = list(SeatLedger.objects.filter(event=event).values_list("slot_id", "reserved"))
    outer = nullcontext() if where == "alone" else transaction.atomic()

    with pytest.raises(ValidationFailed) as refused, outer:
        registrations.register(
            event=event,
            attendees=[{"name": "Late"}],
            slot=gone,
            actor=actor,
            savepoint=where != "without_a_savepoint",
        )

    assert refused.value.code == "invalid_slot"
    assert list(event.registrations.values_list("name", flat=True)) == ["Warm"]
    assert EventAuditLog.objects.count() == audit_rows
    assert list(SeatLedger.objects.filter(event=event).values_list("slot_id", "reserved")) == ledger
