"""Round trips per booking, counted on the wire (the booking's latency is its waits for
PostgreSQL): a booking of 1 or n attendees costs two waits whatever the event carries — its
inputs, then one `events_book` call, its own transaction, that takes the Event lock, checks
the inputs the booking decided on and writes everything
(events/services/registrations/booking.py); a refusal costs the same. Stale inputs cost the
refused call, then BEGIN with the lock and the inputs, the call again, COMMIT. Inside a
caller's transaction: SAVEPOINT; the lock and the inputs; the call; RELEASE (with
`savepoint=False`: the lock and the inputs; the call).

The count is taken by a TCP proxy between Django and PostgreSQL that reads the server's
protocol stream and counts ReadyForQuery messages: PostgreSQL sends exactly one whenever the
client waits for the end of what it sent (a simple query, or a Sync of the extended protocol
and of pipeline mode). A statement sent without waiting (pipelined) adds no ReadyForQuery, so
this counts round trips, not statements; the statements are counted beside it
(CaptureQueriesContext) to show the difference.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from datetime import timedelta
from unittest import mock

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from psycopg import pq

from events.errors import SeatsUnavailable
from events.models import (
    Event,
    EventAuditLog,
    IntervalType,
    IntervalUnit,
    MailRegistration,
    QuestionType,
    Registration,
)
from events.services import nudge, registrations, seats, waitlist_nudge
from leads.models import LeadRequest
from tests.events import factories
from tests.helpers import database_url

BOOKING_ROUND_TRIPS = 2  # the inputs; the events_book call (lock, check, writes), autocommit
HELD_INPUTS_ROUND_TRIPS = 1  # the call alone, on the inputs the caller read (register(inputs=))
REFUSAL_ROUND_TRIPS = 2  # the inputs; the refused call: its transaction is over, no ROLLBACK
STALE_ROUND_TRIPS = 5  # the inputs; the refused call; BEGIN + lock + inputs; the call; COMMIT
NESTED_ROUND_TRIPS = 4  # SAVEPOINT; lock + inputs; the call; RELEASE SAVEPOINT
NESTED_NO_SAVEPOINT_ROUND_TRIPS = 2  # lock + inputs; the call (register(savepoint=False))


class WireCounter:
    """A TCP proxy to PostgreSQL counting the server's ReadyForQuery ('Z') messages."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.ready_for_query = 0
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.ready_for_query = 0

    def count(self) -> int:
        with self.lock:
            return self.ready_for_query

    def close(self) -> None:
        """Close every proxied connection. `shutdown` first: a bare `close` does not end a
        connection another thread is blocked reading, so PostgreSQL kept that backend (and
        the test database could not be dropped at the end of the run)."""
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        pending = b""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                # Pass the end on; the other side may already be closed (the teardown).
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            if from_server:
                # Messages are a type byte and a length that counts itself (sslmode and
                # gssencmode are off on this connection, so the stream is framed from its start).
                pending += data
                while len(pending) >= 5:
                    (length,) = struct.unpack("!i", pending[1:5])
                    if len(pending) < 1 + length:
                        break
                    if pending[:1] == b"Z":
                        with self.lock:
                            self.ready_for_query += 1
                    pending = pending[1 + length :]
            # Counted before forwarded: the client cannot go on before the count is taken.
            try:
                sink.sendall(data)
            except OSError:  # the other side closed (the fixture's teardown)
                return


@pytest.fixture
def wire() -> Iterator[WireCounter]:
    """The default connection, reconnected through the counting proxy for the test."""
    settings = connection.settings_dict
    saved = (settings["HOST"], settings["PORT"], dict(settings["OPTIONS"]))
    counter = WireCounter(settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))
    connection.close()
    settings["HOST"], settings["PORT"] = "127.0.0.1", str(counter.port)
    settings["OPTIONS"].update(sslmode="disable", gssencmode="disable")
    try:
        connection.ensure_connection()
        yield counter
    finally:
        connection.close()
        settings["HOST"], settings["PORT"] = saved[0], saved[1]
        settings["OPTIONS"].clear()
        settings["OPTIONS"].update(saved[2])
        counter.close()


def book(wire: WireCounter, event, attendees: int, **kwargs) -> tuple[int, int]:
    """(round trips, statements) of one register() call."""
    wire.reset()
    with CaptureQueriesContext(connection) as statements:
        registrations.register(
            event=event,
            attendees=[{"name": f"A{i}", "email": f"a{i}@example.org"} for i in range(attendees)],
            actor="system",
            **kwargs,
        )
    return wire.count(), len(statements.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_the_proxy_counts_one_round_trip_per_plain_statement(wire):
    """The counter itself: three statements sent one after another are three round trips."""
    wire.reset()
    with connection.cursor() as cursor:
        for _ in range(3):
            cursor.execute("SELECT 1")
    assert wire.count() == 3


def warm(wire: WireCounter, event, attendees: int, **kwargs) -> None:
    """Three bookings: psycopg has prepared the two statements (after two executions on a
    connection: DATABASES OPTIONS prepare_threshold; outside pipeline mode psycopg waits for
    the PREPARE, a round trip once per connection and statement)."""
    for _ in range(3):
        book(wire, event, attendees, **kwargs)


def sent(statements) -> list[str]:
    """The statements that went to the server (Django also logs the BEGIN and COMMIT of an
    atomic block)."""
    return [q["sql"] for q in statements.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]


@pytest.mark.django_db(transaction=True)
def test_a_booking_is_two_round_trips_for_one_or_many_attendees(wire):
    event = factories.EventFactory(seats_limited=True, seats_max=200)
    assert book(wire, event, 1)[0] == BOOKING_ROUND_TRIPS
    for attendees in (1, 5, 30):
        warm(wire, event, attendees)
        wire.reset()
        with CaptureQueriesContext(connection) as statements:
            registrations.register(
                event=event,
                attendees=[{"name": f"A{i}", "email": f"a{i}@ex.org"} for i in range(attendees)],
                actor="system",
            )
        assert wire.count() == BOOKING_ROUND_TRIPS, attendees
        # the inputs, then the lock, its check and every write in one call (the lead request
        # is the leads overlay's trigger's, inside it)
        read, call = sent(statements)
        assert "events_booking_inputs(" in read and "FROM events_book(" in call
    assert event.registrations.count() == 1 + 4 * (1 + 5 + 30)
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_a_booking_on_inputs_its_caller_holds_is_one_round_trip(wire):
    """A caller that read the event's inputs (registrations.read_inputs) hands them over: the
    booking is the `events_book` call alone, its own transaction."""
    event = factories.EventFactory(seats_limited=True, seats_max=50)
    held = registrations.read_inputs(event.pk, None)
    warm(wire, event, 1, inputs=held)
    for attendees in (1, 5):
        wire.reset()
        with CaptureQueriesContext(connection) as statements:
            book(wire, event, attendees, inputs=held)
        assert wire.count() == HELD_INPUTS_ROUND_TRIPS, attendees
        (call,) = sent(statements)
        assert "FROM events_book(" in call
    assert event.registrations.count() == 3 + 1 + 5
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_a_booking_with_ticket_slot_questions_and_scheduler_is_still_two(wire):
    event = factories.EventFactory(seats_limited=True, seats_max=100, is_multi_slots=True)
    slot = factories.SlotFactory(event=event)
    ticket = factories.TicketFactory(event=event, seats_max=50)
    text = factories.QuestionFactory(event=event, question_type=QuestionType.TEXT_BOX)
    choice = factories.QuestionChoiceFactory(question__event=event)
    factories.MailFactory(
        event=event,
        interval_type=IntervalType.AFTER_SUB,
        interval_unit=IntervalUnit.HOURS,
        scheduled_date=None,
    )
    answers = {str(text.pk): "Vegetarian", str(choice.question_id): choice.pk}

    def booking() -> list[Registration]:
        return registrations.register(
            event=event,
            attendees=[{"name": f"A{i}", "answers": answers} for i in range(3)],
            ticket=ticket,
            slot=slot,
            actor="system",
        )

    wire.reset()
    booking()
    assert wire.count() == BOOKING_ROUND_TRIPS
    booking()
    booking()  # prepared
    wire.reset()
    rows = booking()
    assert wire.count() == BOOKING_ROUND_TRIPS
    assert {r.ticket_id for r in rows} == {ticket.pk}
    assert sum(r.answers.count() for r in rows) == 6
    assert all(r.mail_rows.count() == 1 for r in rows)
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_a_refused_booking_costs_the_same_and_writes_nothing(wire):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    warm(wire, event, 1)
    book(wire, event, 1)  # 4 of 5 taken

    wire.reset()
    with pytest.raises(SeatsUnavailable) as refused:
        registrations.register(
            event=event, attendees=[{"name": "Late"}, {"name": "Later"}], actor="system"
        )
    assert refused.value.details["missing"] == [{"slot_id": None, "ticket_id": None, "missing": 1}]
    assert wire.count() == REFUSAL_ROUND_TRIPS
    assert event.registrations.count() == 4
    assert not connection.in_atomic_block and connection.get_autocommit()
    assert connection.connection.autocommit is True  # psycopg's too: nothing left half-set
    assert connection.connection.info.transaction_status == pq.TransactionStatus.IDLE
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_stale_inputs_are_read_again_under_the_lock_and_booked_once(wire):
    """A ticket edited between the booking's read of its inputs and its call (another
    connection, while the caller's recheck runs): the call refuses them, and the booking reads
    them again under the Event lock and decides on the new limit."""
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event, seats_max=5)
    warm(wire, event, 1, ticket=ticket)  # 3 taken

    def edit_once(event, ticket_read) -> None:
        if ticket_read.seats_max == 5:
            with psycopg.connect(database_url(), autocommit=True) as other:
                other.execute("UPDATE events_ticket SET seats_max = 4 WHERE id = %s", [ticket.pk])

    assert book(wire, event, 1, ticket=ticket, recheck=edit_once)[0] == STALE_ROUND_TRIPS
    wire.reset()
    with pytest.raises(SeatsUnavailable):  # decided on the limit of 4 as committed
        registrations.register(event=event, attendees=[{"name": "E"}], ticket=ticket, actor="x")
    assert wire.count() == REFUSAL_ROUND_TRIPS
    assert event.registrations.count() == 4
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_inside_a_callers_transaction_the_booking_is_a_savepoint_and_commits_with_it(wire):
    """The pipeline opens no transaction of its own there: the caller's commit decides."""
    event = factories.EventFactory(seats_limited=True, seats_max=10)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # outside any transaction
    with transaction.atomic():
        factories.EventFactory(name="Written first")
        wire.reset()
        registrations.register(event=event, attendees=[{"name": "Inside"}], actor="system")
        assert wire.count() == NESTED_ROUND_TRIPS
        wire.reset()
        registrations.register(event=event, attendees=[{"name": "Again"}], actor="system")
        assert wire.count() == NESTED_ROUND_TRIPS
        assert connection.connection.info.transaction_status == pq.TransactionStatus.INTRANS
        transaction.set_rollback(True)
    assert event.registrations.count() == 0  # rolled back with the caller's transaction
    assert not Event.objects.filter(name="Written first").exists()


@pytest.mark.django_db(transaction=True)
def test_without_a_savepoint_a_booking_in_a_callers_transaction_is_two_round_trips(wire):
    """`savepoint=False` (a seam message's effect): no SAVEPOINT, no RELEASE."""
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    with transaction.atomic():
        factories.EventFactory(name="Written first")
        wire.reset()
        registrations.register(
            event=event, attendees=[{"name": "Inside"}], actor="system", savepoint=False
        )
        assert wire.count() == NESTED_NO_SAVEPOINT_ROUND_TRIPS
    assert event.registrations.count() == 1  # committed with the caller's transaction
    assert Event.objects.filter(name="Written first").exists()

    # A refusal leaves the caller's block to roll back, to its own savepoint here.
    with transaction.atomic():
        factories.EventFactory(name="Kept")
        with pytest.raises(SeatsUnavailable), transaction.atomic():
            registrations.register(
                event=event, attendees=[{"name": "Refused"}], actor="system", savepoint=False
            )
        assert not connection.needs_rollback  # the savepoint above took the refusal back
    assert event.registrations.count() == 1
    assert Event.objects.filter(name="Kept").exists()


@pytest.mark.django_db(transaction=True)
def test_an_event_starting_soon_books_the_same_way(wire):
    """A control that the count does not depend on the event's dates (reminder windows)."""
    event = factories.EventFactory(seats_limited=False)
    event.date_begin = event.date_begin - timedelta(days=9)
    event.save(update_fields=["date_begin"])
    assert book(wire, event, 2)[0] == BOOKING_ROUND_TRIPS
    warm(wire, event, 2)
    assert book(wire, event, 2)[0] == BOOKING_ROUND_TRIPS


# --- a sale-seam message ------------------------------------------------------------------------

# Django's health check (SELECT 1); BEGIN; the inbox insert; SAVEPOINT (parking's); the order
# lock; its tickets (plain statements of the overlay's own, one each); live counts +
# once-per-order questions; the booking's lock + inputs; its events_book call; the order's version;
# RELEASE; COMMIT.
SEAM_MESSAGE_ROUND_TRIPS = 12


@pytest.mark.django_db(transaction=True)
def test_a_seam_order_message_is_twelve_round_trips_with_django_s_health_check(wire):
    """An order.confirmed message minting two registrations, as the request's first
    transaction on a kept connection: Django tests the connection first (CONN_HEALTH_CHECKS)
    and psycopg sends BEGIN on its own; the booking adds no savepoint of its own."""
    from seams.messages import parse
    from seams.models import SeamInbox
    from seams.services.receive import record_and_apply
    from tests.seams.host import order_message, ticket_line

    ticket = factories.TicketFactory(event=factories.EventFactory(seats_limited=True, seats_max=9))
    document = order_message(ref="SO-RT", lines=[ticket_line(ticket, 2, ref="SO-RT/1")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # the kept connection of an earlier request
    connection.health_check_done = False  # a new request: Django would check it first
    wire.reset()
    result = record_and_apply(message_id="msg_rt", document=document, message=parse(document))
    assert result.status == "applied"
    assert wire.count() == SEAM_MESSAGE_ROUND_TRIPS
    assert SeamInbox.objects.get().status == "applied"
    assert ticket.event.registrations.count() == 2


# --- a transition -----------------------------------------------------------------------------

# BEGIN + the Event lock + the registration lock; the ledger, then the registration with the
# audit row and the leads hook's request, then COMMIT.
TRANSITION_ROUND_TRIPS = 2
# Inside a caller's transaction: its BEGIN; SAVEPOINT; the locks; the writes; RELEASE SAVEPOINT.
NESTED_TRANSITION_ROUND_TRIPS = 5


@pytest.mark.django_db(transaction=True)
def test_a_transition_takes_both_locks_and_begins_in_one_round_trip(wire):
    """mark_attended as its own transaction (the desk's scan): BEGIN travels with the Event
    and registration locks (locks.lock_event_and_registration)."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    (registration,) = registrations.register(event=event, attendees=[{"name": "A"}], actor="system")
    LeadRequest.objects.filter(event=event).delete()  # the leads trigger writes it again
    wire.reset()
    with CaptureQueriesContext(connection) as statements:
        done = registrations.mark_attended(registration=registration, actor="system")
    assert done.state == "done"
    assert wire.count() == TRANSITION_ROUND_TRIPS
    sent = [q["sql"] for q in statements.captured_queries if q["sql"] != "BEGIN"]
    assert "FOR UPDATE OF e" in sent[0] and "FOR UPDATE OF r" in sent[1]  # Event first

    assert [sql for sql in sent if "events_rows_guard" in sql]  # the row, checked by itself
    # the leads trigger wrote the request again inside the transition's transaction
    assert Registration.objects.get(pk=registration.pk).state == "done"
    assert LeadRequest.objects.get(event=event).cursor == registration.pk - 1
    assert EventAuditLog.objects.filter(
        registration_id=registration.pk, verb="registration.attended"
    ).exists()
    assert seats.event_summary(event=event).used == 1


@pytest.mark.django_db(transaction=True)
def test_a_transition_in_a_callers_transaction_queues_no_commit(wire):
    """Inside a caller's transaction the transition's writes take their own round trip and
    the caller's block decides: rolled back, nothing of the transition stays."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    (registration,) = registrations.register(event=event, attendees=[{"name": "A"}], actor="system")
    wire.reset()
    with transaction.atomic():
        registrations.mark_attended(registration=registration, actor="system")
        assert wire.count() == NESTED_TRANSITION_ROUND_TRIPS
        transaction.set_rollback(True)
    assert Registration.objects.get(pk=registration.pk).state == "open"
    assert not EventAuditLog.objects.filter(verb="registration.attended").exists()
    assert seats.event_summary(event=event).used == 0


def _after_the_locks(statements, marker: str) -> bool:
    """Whether the statement holding `marker` was sent after both locks (Event first)."""
    sent = [q["sql"] for q in statements.captured_queries if q["sql"] != "BEGIN"]
    at = next(i for i, sql in enumerate(sent) if marker in sql)
    return "FOR UPDATE OF e" in sent[0] and "FOR UPDATE OF r" in sent[1] and at >= 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("refused", [False, True], ids=["confirmed", "sold-out"])
def test_confirming_a_draft_reads_its_schedulers_with_the_locks_and_is_two(wire, refused):
    """The after_sub schedulers come with the locks, after them (locks.lock_for_transition);
    their rows travel with the writes and the COMMIT, and the pass is nudged after it (the row
    is due at once). Sold out: no row, no nudge, nothing written."""
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    mail = factories.MailFactory(
        event=event,
        interval_type=IntervalType.AFTER_SUB,
        interval_nbr=0,
        interval_unit=IntervalUnit.HOURS,
        scheduled_date=None,
    )
    (draft,) = registrations.register(
        event=event, attendees=[{"name": "A"}], state="draft", actor="system"
    )
    if refused:
        registrations.register(event=event, attendees=[{"name": "B"}], actor="system")
    wire.reset()
    with (
        mock.patch.object(nudge, "_send") as sent,
        CaptureQueriesContext(connection) as statements,
    ):
        if refused:
            with pytest.raises(SeatsUnavailable):
                registrations.confirm(registration=draft, actor="system")
        else:
            registrations.confirm(registration=draft, actor="system")
        # the core's nudges (the leads overlay nudges its own pass after every commit)
        calls = [c.args[:2] for c in sent.call_args_list if c.args[0].startswith("events:")]
    trips = wire.count()
    assert _after_the_locks(statements, "interval_type = 'after_sub'")
    rows = MailRegistration.objects.filter(scheduler=mail, registration=draft).count()
    if refused:
        # … and the ROLLBACK; one more when the refusal reaches the client while the writes
        # are still being queued: the pipeline's end then waits for the skipped statements'
        # answers (pipeline._ended_after)
        assert trips in (TRANSITION_ROUND_TRIPS + 1, TRANSITION_ROUND_TRIPS + 2)
        assert Registration.objects.get(pk=draft.pk).state == "draft"
        assert rows == 0 and calls == []
    else:
        assert trips == TRANSITION_ROUND_TRIPS
        assert Registration.objects.get(pk=draft.pk).state == "open"
        assert rows == 1
        assert calls == [(nudge.PASS_KEY, nudge.PASS_TASK)]
    assert seats.event_summary(event=event).reserved == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("verb", ["cancel", "reset_to_draft"])
@pytest.mark.parametrize("waiting", [True, False], ids=["someone-waits", "nobody-waits"])
def test_a_freed_seat_asks_for_the_waiting_list_with_the_locks_and_is_two(wire, verb, waiting):
    """Whether someone waits comes with the locks, after them; the offer pass is nudged once,
    after the COMMIT that travelled with the writes, and only when someone waits."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    (registration,) = registrations.register(event=event, attendees=[{"name": "A"}], actor="system")
    if waiting:
        factories.WaitlistEntryFactory(event=event)
    wire.reset()
    with (
        mock.patch.object(nudge, "_send") as sent,
        CaptureQueriesContext(connection) as statements,
    ):
        getattr(registrations, verb)(registration=registration, actor="system")
        # the core's nudges (the leads overlay nudges its own pass after every commit)
        calls = [c.args[:3] for c in sent.call_args_list if c.args[0].startswith("events:")]
    assert wire.count() == TRANSITION_ROUND_TRIPS
    assert _after_the_locks(statements, "events_waitlistentry")
    assert Registration.objects.get(pk=registration.pk).state != "open"
    assert seats.event_summary(event=event).reserved == 0
    offer = (f"{waitlist_nudge.OFFER_KEY}:{event.pk}", waitlist_nudge.OFFER_TASK, (event.pk,))
    assert calls == ([offer] if waiting else [])


@pytest.mark.django_db(transaction=True)
def test_undoing_attendance_is_two_and_adds_no_scheduler_row(wire):
    """done → open enters `open` too, but only a confirmed draft gets after_sub rows."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    factories.MailFactory(
        event=event,
        interval_type=IntervalType.AFTER_SUB,
        interval_unit=IntervalUnit.HOURS,
        scheduled_date=None,
    )
    (registration,) = registrations.register(event=event, attendees=[{"name": "A"}], actor="system")
    registrations.mark_attended(registration=registration, actor="system")
    before = MailRegistration.objects.count()
    wire.reset()
    registrations.undo_attendance(registration=registration, actor="system")
    assert wire.count() == TRANSITION_ROUND_TRIPS
    assert Registration.objects.get(pk=registration.pk).state == "open"
    assert MailRegistration.objects.count() == before
    assert seats.event_summary(event=event).reserved == 1


# --- a desk scan, the whole request --------------------------------------------------------

# The session with its user and the user's grants (the request's first statement: it tests the
# kept connection in place of Django's health check), the lookup with the choice answers, then
# the admission: BEGIN, the two locks, the check that both rows are as the lookup saw them, the
# ledger, the registration with the audit rows and the nonce's answer, COMMIT.
DESK_ADMISSION_ROUND_TRIPS = 3
# The session with its user, the lookup, the scan's audit row with the nonce's answer.
DESK_ANSWER_ROUND_TRIPS = 3


def _desk_client():
    from django.contrib.auth.models import Group
    from django.test import Client

    user = factories.UserFactory(username="door-rt")
    user.groups.add(Group.objects.get(name="Event desk"))
    client = Client()
    client.force_login(user)
    return client


def _scan(client, barcode: str, nonce: str) -> str:
    import json

    response = client.post(
        "/desk/api/scan",
        data=json.dumps({"barcode": barcode, "nonce": nonce}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    return response.json()["status"]


@pytest.mark.django_db(transaction=True)
def test_a_desk_scan_over_http_is_three_round_trips_admitted_or_not(wire):
    from django.utils import timezone

    begin = timezone.now() - timedelta(hours=1)
    event = factories.EventFactory(
        date_begin=begin, date_end=begin + timedelta(hours=8), seats_limited=True, seats_max=50
    )
    tickets = registrations.register(
        event=event, attendees=[{"name": f"A{i}"} for i in range(6)], actor="system"
    )
    client = _desk_client()
    for ticket in tickets[:3]:  # psycopg prepares each statement on its second use
        assert _scan(client, ticket.barcode, f"warm-{ticket.pk}") == "confirmed_registration"
        assert _scan(client, ticket.barcode, f"rewarm-{ticket.pk}") == "already_registered"

    for ticket in tickets[3:]:
        connection.health_check_done = False  # a new request on the kept connection
        wire.reset()
        with CaptureQueriesContext(connection) as statements:
            assert _scan(client, ticket.barcode, f"n-{ticket.pk}") == "confirmed_registration"
        assert wire.count() == DESK_ADMISSION_ROUND_TRIPS
        sent = [q["sql"] for q in statements.captured_queries]
        assert 'FROM "events_staff_session" LEFT OUTER JOIN "auth_user"' in sent[0]
        assert [sql for sql in sent if "events_lock_as_seen" in sql]

        connection.health_check_done = False
        wire.reset()
        assert _scan(client, ticket.barcode, f"again-{ticket.pk}") == "already_registered"
        assert wire.count() == DESK_ANSWER_ROUND_TRIPS

    assert seats.event_summary(event=event).used == 6
    assert seats.audit(event=event) == []
    assert EventAuditLog.objects.filter(verb="registration.attended").count() == 6
