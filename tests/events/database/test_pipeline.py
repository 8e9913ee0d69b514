"""events.db.pipeline: a transaction the pipeline opened (BEGIN travelling with the first
statements) and that goes on after the block behaves as any Django transaction; the first
transaction of a request re-runs only when its first round trip met a dropped connection."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, connection, transaction
from psycopg import pq

from events.db import locks, pipeline
from events.models import Event, Registration
from events.services import registrations
from tests.events import factories
from tests.helpers import database_url


@pytest.mark.django_db(transaction=True)
def test_a_transaction_the_block_opened_goes_on_with_autocommit_off():
    event = factories.EventFactory()
    regs = registrations.register(
        event=event, attendees=[{"name": f"A{i}"} for i in range(5)], actor="system"
    )
    with transaction.atomic():
        _, reg = locks.lock_event_and_registration(event.pk, regs[0].pk)
        raw = connection.connection
        assert raw.info.transaction_status == pq.TransactionStatus.INTRANS
        assert raw.autocommit is False  # psycopg's flag, not only Django's
        # A server-side cursor inside it: not WITH HOLD (PostgreSQL refuses that for FOR
        # UPDATE, and would keep it open past COMMIT).
        locked = list(
            Registration.objects.select_for_update().filter(event=event).iterator(chunk_size=2)
        )
        assert len(locked) == 5
    assert raw.autocommit is True  # the atomic block's end restored it, the transaction over
    assert raw.info.transaction_status == pq.TransactionStatus.IDLE


@pytest.mark.django_db
def test_psycopg_still_keeps_the_flag_where_the_pipeline_resets_it():
    """A psycopg upgrade that moves it fails here (the reset would then change nothing)."""
    with psycopg.connect(database_url(), autocommit=True) as raw:
        raw.execute("BEGIN")
        assert pipeline._autocommit_off_in_transaction(raw) is True
        assert raw.autocommit is False
        raw.execute("ROLLBACK")


@pytest.mark.django_db(transaction=True)
def test_a_transaction_managed_by_hand_is_never_committed_by_a_booking():
    """Autocommit off: the booking's atomic block (no savepoint) is the outermost one, but
    Django does not commit on its exit, so the booking's pipeline must not queue a COMMIT of
    its own."""
    event = factories.EventFactory()
    transaction.set_autocommit(False)
    try:
        registrations.register(
            event=event, attendees=[{"name": "Kept?"}], actor="system", savepoint=False
        )
        with psycopg.connect(database_url()) as other:
            (seen,) = other.execute(
                "SELECT count(*) FROM events_registration WHERE event_id = %s", [event.pk]
            ).fetchone()
        assert seen == 0  # not committed
        transaction.rollback()
    finally:
        transaction.set_autocommit(True)
    assert not Registration.objects.filter(event=event).exists()


@pytest.mark.django_db(transaction=True)
def test_a_transaction_managed_by_hand_is_never_committed_by_a_transition():
    """A transition queues its COMMIT behind its writes only in a transaction its own atomic
    block began and will commit: not under autocommit turned off by hand."""
    (reg,) = registrations.register(
        event=factories.EventFactory(), attendees=[{"name": "A"}], actor="system"
    )
    transaction.set_autocommit(False)
    try:
        registrations.mark_attended(registration=reg, actor="system")
        assert _committed("events_registration", "state", reg.pk) == "open"
        transaction.rollback()
    finally:
        transaction.set_autocommit(True)
    assert Registration.objects.get(pk=reg.pk).state == "open"


def _committed(table: str, column: str, pk: int):
    """The column's value as committed, read on a connection of its own."""
    with psycopg.connect(database_url()) as other:
        (value,) = other.execute(
            f"SELECT {column} FROM {table} WHERE id = %s",  # noqa: S608 - names from the test
            [pk],
        ).fetchone()
    return value


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("marked_for_rollback", [False, True])
def test_a_block_later_in_the_outermost_transaction_may_queue_its_commit(marked_for_rollback):
    """The transaction under way (begun here by an ORM statement) is the outermost atomic
    block's own: a later block may queue its COMMIT (no BEGIN of its own), and the atomic
    block then ends it as Django would have, its on_commit callbacks run once — unless it was
    marked for rollback meanwhile: then no COMMIT is queued and the block rolls back."""
    event = factories.EventFactory(name="Before")
    ran: list[str] = []
    with transaction.atomic():
        assert Event.objects.filter(pk=event.pk).exists()
        raw = connection.connection
        assert raw.info.transaction_status == pq.TransactionStatus.INTRANS
        transaction.on_commit(lambda: ran.append("on_commit"))
        with pipeline.pipelined(own_transaction=True) as pipe:
            cursor = pipeline.cursor()
            cursor.execute("UPDATE events_event SET name = 'After' WHERE id = %s", [event.pk])
            if marked_for_rollback:
                transaction.set_rollback(True)
            pipe.commit()
        cursor.close()
        seen_inside = _committed("events_event", "name", event.pk)
        status = raw.info.transaction_status
        assert raw.autocommit is False
    expected = "Before" if marked_for_rollback else "After"
    assert seen_inside == expected
    assert status == (
        pq.TransactionStatus.INTRANS if marked_for_rollback else pq.TransactionStatus.IDLE
    )
    assert Event.objects.get(pk=event.pk).name == expected
    assert ran == ([] if marked_for_rollback else ["on_commit"])
    assert raw.autocommit is True and raw.info.transaction_status == pq.TransactionStatus.IDLE


@pytest.mark.django_db(transaction=True)
def test_a_block_in_a_savepoint_never_queues_a_commit():
    event = factories.EventFactory(name="Before")
    with transaction.atomic():
        assert Event.objects.filter(pk=event.pk).exists()
        with transaction.atomic(), pipeline.pipelined(own_transaction=True) as pipe:
            cursor = pipeline.cursor()
            cursor.execute("UPDATE events_event SET name = 'After' WHERE id = %s", [event.pk])
            pipe.commit()
        cursor.close()
        assert _committed("events_event", "name", event.pk) == "Before"
        transaction.set_rollback(True)
    assert Event.objects.get(pk=event.pk).name == "Before"


@pytest.mark.django_db(transaction=True)
def test_the_first_transaction_is_not_run_again_after_an_error_on_a_live_connection():
    connection.ensure_connection()  # a kept connection, as a request finds it
    runs: list[int] = []

    def work(first_round_answered):
        runs.append(1)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = '10ms'")
            cursor.execute("SELECT pg_sleep(1)")  # canceled: OperationalError, connection fine
        first_round_answered()

    with pytest.raises(OperationalError):
        pipeline.first_transaction(work)
    assert runs == [1]
    assert connection.is_usable()
