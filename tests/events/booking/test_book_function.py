"""The booking's locked work as one function call (`events_book`, events/db/sql/book.sql):
nothing is touched before the Event lock; inputs that changed since they were read are read
again under the lock and decided on again; a slot deleted meanwhile is refused there."""

from __future__ import annotations

import threading
import time

import hypothesis
import psycopg
import pytest
from django.db import connection, models, transaction
from hypothesis import strategies as st

from events.errors import DomainError
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
    """`events_book` takes the Event row lock before anything else. While the booking waits
    for that lock, the seat-ledger row and the event's lead request (both existing: upserts that ran
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
def test_inputs_edited_after_the_read_are_read_again_under_the_lock_and_decided_on(actor):
    """The ticket's price changes between the booking's read of its inputs and its call of
    `events_book` (the caller's recheck runs in between): the function refuses the stale
    digest and writes nothing; the booking reads the inputs again, under the lock, decides
    again (the recheck runs twice, the second time on the new price) and books."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    ticket = factories.TicketFactory(event=event, price=10)
    prices: list[str] = []

    def edit_once(event, ticket) -> None:
        prices.append(str(ticket.price))
        if len(prices) == 1:
            with psycopg.connect(database_url(), autocommit=True) as other:
                other.execute("UPDATE events_ticket SET price = 12 WHERE id = %s", [ticket.pk])

    (row,) = registrations.register(
        event=event, attendees=[{"name": "A"}], ticket=ticket, recheck=edit_once, actor=actor
    )
    assert [float(p) for p in prices] == [10.0, 12.0]
    assert list(event.registrations.values_list("pk", flat=True)) == [row.pk]
    assert SeatLedger.objects.get(event=event, slot=None, ticket=None).reserved == 1


@pytest.mark.django_db(transaction=True)
def test_a_stale_digest_is_refused_by_the_function_and_writes_nothing(actor):
    """`events_book` itself: a document whose digest is not the inputs' as committed is
    refused (`events_booking_stale`) before any row is written."""
    from django.db import DatabaseError

    from events.db import booking as booking_sql
    from events.models import EventAuditLog

    event = factories.EventFactory(seats_limited=True, seats_max=5)
    inputs = booking_sql.read_inputs(event.pk, None)
    Event.objects.filter(pk=event.pk).update(name="Renamed")
    row = Registration(pk=1, event=event, name="A", barcode="1", state="open")
    document = booking_sql.document(
        inputs,
        ticket_id=None,
        slot_id=None,
        registrations=[row],
        seats={"requested": 1, "changes": [[None, None, 1, 0, 0]], "limits": []},
    )
    with pytest.raises(DatabaseError) as refused:
        booking_sql.book(document)
    assert booking_sql.is_stale(refused.value)
    assert not Registration.objects.filter(event=event).exists()
    assert not SeatLedger.objects.filter(event=event).exists()
    assert not EventAuditLog.objects.filter(event_id=event.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_recheck_that_marks_a_rollback_refuses_the_booking_and_writes_nothing(actor):
    """A booking whose caller's recheck asks for a rollback (`transaction.set_rollback(True)`)
    is refused by Django and writes nothing."""
    from django.db.transaction import TransactionManagementError

    event = factories.EventFactory(seats_limited=True, seats_max=5)
    registrations.register(event=event, attendees=[{"name": "Warm"}], actor=actor)

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
    then `events_book`): a change to the event's stage `pipe_end` meanwhile — a booking input
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
    deleted after the caller read it, `events_book` refuses it under the Event lock —
    `invalid_slot`, at the call, so inside a caller's transaction too (the foreign keys to
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


@pytest.mark.django_db(transaction=True)
def test_inputs_the_caller_holds_are_confirmed_under_the_lock_and_read_again_when_stale(actor):
    """A caller hands register() inputs it read earlier: the booking decides on them without
    reading; a ticket limit lowered since is caught by `events_book`'s digest under the lock,
    and the booking reads the inputs again and decides on the new limit."""
    from events.errors import SeatsUnavailable

    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=3)
    held = registrations.read_inputs(event.pk, ticket.pk)
    for name in ("A", "B"):
        registrations.register(
            event=event, attendees=[{"name": name}], ticket=ticket, inputs=held, actor=actor
        )
    ticket.seats_max = 2
    ticket.save(update_fields=["seats_max"])

    with pytest.raises(SeatsUnavailable):  # the held inputs still say 3: decided again on 2
        registrations.register(
            event=event, attendees=[{"name": "C"}], ticket=ticket, inputs=held, actor=actor
        )
    assert event.registrations.count() == 2


@pytest.mark.django_db
def test_inputs_read_for_another_event_or_ticket_are_refused(actor):
    event, other = factories.EventFactory(), factories.EventFactory()
    ticket = factories.TicketFactory(event=event)
    for held in (
        registrations.read_inputs(other.pk, None),
        registrations.read_inputs(event.pk, None),
    ):
        with pytest.raises(ValueError, match="another event or ticket"):
            registrations.register(
                event=event, attendees=[{"name": "A"}], ticket=ticket, inputs=held, actor=actor
            )
    assert not event.registrations.exists()


# Any text the intake would accept, and any storable answer text: what `events_book` writes is
# exactly the row Python built (the JSON document and jsonb_populate_record lose nothing).
ONE_LINE = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp"), exclude_characters="\x00"),
    min_size=1,
    max_size=80,
).filter(str.strip)
ANSWER = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=200
).filter(str.strip)


@hypothesis.settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture],
)
@hypothesis.given(name=ONE_LINE, company=ONE_LINE, answer=ANSWER, partner=ONE_LINE)
@pytest.mark.django_db
def test_the_rows_events_book_writes_are_the_rows_python_built(
    actor, name, company, answer, partner
):
    from events.models import EventAuditLog, QuestionType, RegistrationAnswer

    event = factories.EventFactory(seats_limited=True, seats_max=5)
    question = factories.QuestionFactory(event=event, question_type=QuestionType.TEXT_BOX)
    with transaction.atomic():
        try:
            rows = registrations.register(
                event=event,
                attendees=[
                    {"name": name, "company_name": company, "answers": {question.pk: answer}}
                ],
                partner_ref=partner[:64],
                utm={"source": partner[:64]},
                actor=actor,
            )
        except DomainError:
            hypothesis.event("refused by the checks")
            return  # a text they do not take: nothing to compare
        hypothesis.event("booked")
        (row,) = rows
        stored = Registration.objects.get(pk=row.pk)
        fields = [f.attname for f in Registration._meta.concrete_fields]
        assert {f: getattr(stored, f) for f in fields} == {f: getattr(row, f) for f in fields}
        (written,) = RegistrationAnswer.objects.filter(registration=row)
        assert (written.question_id, written.text_value) == (question.pk, answer.strip() or answer)
        audit = EventAuditLog.objects.get(registration_id=row.pk, verb="registration.created")
        assert audit.data == {"state": "open", "ticket": None, "slot": None, "order": ""}
        transaction.set_rollback(True)


# The field types whose prepared values `events.db.booking.record` gives a JSON form that
# jsonb_populate_record reads back into the column's type (checked below on a scratch table).
JSON_FORMS = {
    "AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
    "SmallIntegerField", "PositiveIntegerField", "PositiveBigIntegerField",
    "PositiveSmallIntegerField", "BooleanField", "CharField", "TextField", "SlugField",
    "EmailField", "URLField", "DateTimeField", "DateField", "TimeField", "DurationField",
    "DecimalField", "UUIDField", "JSONField", "BinaryField", "ForeignKey",
}  # fmt: skip


def test_every_column_of_the_booked_models_has_a_json_form():
    """A field added to a booked model travels through `events_book` without a change of the
    SQL, provided `record` can write it: this fails for a field of another type, a database
    default or a generated column, before any booking does."""
    from events.models import EventAuditLog, MailRegistration, RegistrationAnswer

    for model in (Registration, RegistrationAnswer, EventAuditLog, MailRegistration):
        for field in model._meta.concrete_fields:
            assert field.get_internal_type() in JSON_FORMS, (model.__name__, field.name)
            assert not getattr(field, "generated", False), (model.__name__, field.name)
            assert field.db_default is models.NOT_PROVIDED, (model.__name__, field.name)


@pytest.mark.django_db
def test_the_json_forms_read_back_into_their_columns_types():
    import json
    from datetime import UTC, date, datetime, time, timedelta
    from decimal import Decimal
    from uuid import UUID

    from psycopg.types.json import Jsonb

    from events.db import booking as booking_sql

    values = {
        "at": datetime(2026, 12, 3, 14, 5, 6, 789012, tzinfo=UTC),
        "day": date(2026, 12, 3),
        "clock": time(9, 30, 15, 250000),
        "span": timedelta(days=1, hours=2, microseconds=5),
        "amount": Decimal("12.50"),
        "ref": UUID("12345678-1234-5678-1234-567812345678"),
        "raw": b"\x00\xffbytes",
        "doc": Jsonb({"state": "open", "n": [1, 2.5, None], "text": "é\u2028"}),
    }
    document = json.dumps(values, default=booking_sql._json_value)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE json_forms (at timestamptz, day date, clock time, span interval,"
            " amount numeric(8, 2), ref uuid, raw bytea, doc jsonb)"
        )
        cursor.execute(
            "SELECT r.* FROM jsonb_populate_record(NULL::json_forms, %s::jsonb) AS r", [document]
        )
        (row,) = cursor.fetchall()
    at, day, clock, span, amount, ref, raw, doc = row
    assert (at, day, clock, span, amount, ref) == (
        values["at"], values["day"], values["clock"], values["span"], values["amount"],
        values["ref"],
    )  # fmt: skip
    assert bytes(raw) == values["raw"]
    assert (json.loads(doc) if isinstance(doc, str) else doc) == values["doc"].obj
