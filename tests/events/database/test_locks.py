"""The transitions' fixed statements (docs/spec.md "Transitions and the desk scan"): the two
locks, the transition's UPDATE and the audit INSERT, against what the ORM forms they replaced
did."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from events.db import locks
from events.models import Event, EventAuditLog, Registration
from events.services import audit, registrations
from tests.events import factories

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_a_lock_outside_a_transaction_is_refused_as_the_orm_refuses_it():
    reg = factories.RegistrationFactory()
    with pytest.raises(TransactionManagementError):
        locks.lock_event(reg.event_id)
    with pytest.raises(TransactionManagementError):
        locks.lock_registration(reg.pk)
    with pytest.raises(TransactionManagementError):
        locks.lock_event_and_registration(reg.event_id, reg.pk)
    with pytest.raises(TransactionManagementError):  # the control: the ORM's own refusal
        Event.objects.select_for_update().get(pk=reg.event_id)


def test_an_unknown_row_is_does_not_exist():
    with transaction.atomic():
        with pytest.raises(Event.DoesNotExist):
            locks.lock_event(2**62)
    with transaction.atomic():
        with pytest.raises(Registration.DoesNotExist):
            locks.lock_registration(2**62)
    reg = factories.RegistrationFactory()
    with transaction.atomic():
        with pytest.raises(Event.DoesNotExist):
            locks.lock_event_and_registration(2**62, reg.pk)
    with transaction.atomic():
        with pytest.raises(Registration.DoesNotExist):
            locks.lock_event_and_registration(reg.event_id, 2**62)


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "together"])
@pytest.mark.parametrize("with_ticket", [True, False])
def test_the_locked_rows_equal_the_orm_s_and_the_ticket_comes_with_the_registration(
    with_ticket, together
):
    event = factories.EventFactory()
    ticket = factories.TicketFactory(event=event) if with_ticket else None
    reg = factories.RegistrationFactory(event=event, ticket=ticket)
    with transaction.atomic():
        if together:
            locked_event, locked = locks.lock_event_and_registration(event.pk, reg.pk)
        else:
            locked_event = locks.lock_event(event.pk)
            locked = locks.lock_registration(reg.pk)
        with CaptureQueriesContext(connection) as ctx:
            read_ticket = locked.ticket
    assert ctx.captured_queries == []  # read with the row: no query on access
    fields = [f.attname for f in Event._meta.concrete_fields]
    orm_event = Event.objects.get(pk=event.pk)
    assert [getattr(locked_event, f) for f in fields] == [getattr(orm_event, f) for f in fields]
    fields = [f.attname for f in Registration._meta.concrete_fields]
    orm = Registration.objects.get(pk=reg.pk)
    assert [getattr(locked, f) for f in fields] == [getattr(orm, f) for f in fields]
    assert (read_ticket.pk if read_ticket else None) == (ticket.pk if ticket else None)


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "together"])
def test_the_locks_take_row_locks(together):
    reg = factories.RegistrationFactory()
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        if together:
            locks.lock_event_and_registration(reg.event_id, reg.pk)
        else:
            locks.lock_event(reg.event_id)
            locks.lock_registration(reg.pk)
    sql = [q["sql"] for q in ctx.captured_queries if "FOR UPDATE" in q["sql"]]
    assert len(sql) == 2
    assert "FOR UPDATE OF e" in sql[0] and "FOR UPDATE OF r" in sql[1]


def test_a_transition_writes_its_five_columns_and_leaving_cancel_clears_the_source():
    reg = factories.RegistrationFactory(state="open")
    before = Registration.objects.get(pk=reg.pk)
    registrations.cancel(registration=reg, actor=audit.SYSTEM, source="order")
    cancelled = Registration.objects.get(pk=reg.pk)
    assert (cancelled.state, cancelled.cancel_source) == ("cancel", "order")
    assert cancelled.updated_at > before.updated_at
    assert cancelled.confirmed_at == before.confirmed_at  # unchanged values written back
    registrations.reset_to_draft(registration=reg, actor=audit.SYSTEM)
    draft = Registration.objects.get(pk=reg.pk)
    assert (draft.state, draft.cancel_source) == ("draft", "")
    registrations.confirm(registration=reg, actor=audit.SYSTEM)
    registrations.mark_attended(registration=reg, actor=audit.SYSTEM)
    done = Registration.objects.get(pk=reg.pk)
    assert done.state == "done" and done.date_closed is not None
    verbs = list(
        EventAuditLog.objects.filter(registration=reg).order_by("pk").values_list("verb", "data")
    )
    assert verbs == [
        ("registration.cancelled", {"state": ["open", "cancel"]}),
        ("registration.reset_to_draft", {"state": ["cancel", "draft"]}),
        ("registration.confirmed", {"state": ["draft", "open"]}),
        ("registration.attended", {"state": ["open", "done"]}),
    ]


def test_audit_rows_are_one_insert_per_call_with_every_column():
    event = factories.EventFactory()
    entries = [
        audit.entry(actor="desk:gate 1", verb="desk.scan", event=event, data={"n": n, "s": "é"})
        for n in range(3)
    ]
    with CaptureQueriesContext(connection) as ctx:
        audit.record_many(entries)
    assert [q["sql"].split(" (")[0] for q in ctx.captured_queries] == [
        'INSERT INTO "events_eventauditlog"'
    ]
    rows = list(
        EventAuditLog.objects.filter(event=event)
        .order_by("pk")
        .values_list("actor_type", "actor_label", "verb", "data")
    )
    assert rows == [("desk", "gate 1", "desk.scan", {"n": n, "s": "é"}) for n in range(3)]
    assert all(row.at is not None for row in EventAuditLog.objects.filter(event=event))


def _other_connection():
    import psycopg

    settings = connection.settings_dict
    other = psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
    )
    other.execute("SET lock_timeout = '1s'")
    other.commit()  # kept by the session (a rollback would undo it)
    return other


def _versions(event_id: int, registration_id: int) -> tuple[str, str]:
    from events.services.registrations.transitions import row_version

    event, registration = Event._meta.db_table, Registration._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {row_version(event)}, {row_version(registration)} "  # noqa: S608
            f"FROM {event}, {registration} WHERE {event}.id = %s AND {registration}.id = %s",
            [event_id, registration_id],
        )
        return cursor.fetchone()


LOCK_AS_SEEN = "SELECT events_lock_as_seen(%s, %s, %s, %s, %s)"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("share_event", [True, False], ids=["admission", "seat-taking"])
def test_a_transition_on_seen_rows_shares_the_event_only_when_it_takes_no_seat(share_event):
    """events_lock_as_seen with share_event (the desk's admission): a second admission of the
    same event takes its locks while the first holds them, and a change to the event waits for
    both. Without it (a transition that takes a seat) the second waits, as every core verb."""
    import psycopg

    event = factories.EventFactory()
    first, second = (factories.RegistrationFactory(event=event) for _ in range(2))
    seen = {
        reg.pk: [event.pk, _versions(event.pk, reg.pk)[0], reg.pk, _versions(event.pk, reg.pk)[1]]
        for reg in (first, second)
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(LOCK_AS_SEEN, [*seen[first.pk], share_event])
        with _other_connection() as other:
            if share_event:
                assert other.execute(LOCK_AS_SEEN, [*seen[second.pk], True]).fetchone() == (0,)
            else:
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    other.execute(LOCK_AS_SEEN, [*seen[second.pk], False])
            other.rollback()
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute(
                    f"UPDATE {Event._meta.db_table} SET name = 'Renamed' WHERE id = %s",  # noqa: S608
                    [event.pk],
                )


@pytest.mark.django_db(transaction=True)
def test_rows_changed_since_they_were_seen_fail_the_check_and_write_nothing():
    import psycopg

    event = factories.EventFactory()
    reg = factories.RegistrationFactory(event=event)
    event_version, registration_version = _versions(event.pk, reg.pk)
    Registration.objects.filter(pk=reg.pk).update(name="Changed")
    with transaction.atomic(), connection.cursor() as cursor:
        with pytest.raises(Exception) as refused:
            cursor.execute(
                LOCK_AS_SEEN, [event.pk, event_version, reg.pk, registration_version, True]
            )
    assert isinstance(refused.value.__cause__, psycopg.errors.RaiseException)
    assert "rows_as_seen: 0 of 1 rows changed" in str(refused.value.__cause__.diag.message_detail)
