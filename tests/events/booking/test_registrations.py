"""Registrations (spec.md §4): creation, fences (cancelled events, archive), sync_from_partner."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import IntegrityError, connection, transaction

from events import hooks
from events.db import locks
from events.errors import DomainError
from events.models import (
    ContactSource,
    Event,
    EventAuditLog,
    IntervalType,
    IntervalUnit,
    KanbanState,
    Mail,
    MailRegistration,
    Registration,
    RegistrationAnswer,
    RegistrationState,
)
from events.services import registrations, scheduler, seats
from leads.models import LeadRequest
from tests.events import factories
from tests.helpers import database_url, snapshot

S = RegistrationState


def seat_numbers(event) -> tuple:
    s = seats.event_summary(event=event)
    return (s.reserved, s.used, s.available)


# --- register --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_register_writes_rows_audit_and_seats_in_one_go(actor, now):
    event = factories.EventFactory(seats_limited=True, seats_max=10, country="BE")
    ticket = factories.TicketFactory(event=event)
    question = factories.QuestionFactory(event=event, once_per_order=True)

    rows = registrations.register(
        event=event,
        ticket=ticket,
        attendees=[
            {
                "name": " Ann ",
                "email": "ann@example.org",
                "phone": "0470 12 34 56",
                "answers": {str(question.pk): "vegan"},
            },
            {"name": "Bob", "email": "bob@example.org"},
        ],
        sale_order_ref="SO1",
        utm={"source": "newsletter"},
        actor=actor,
        now=now,
    )

    assert [(r.name, r.state, r.confirmed_at, r.ticket_id) for r in rows] == [
        ("Ann", S.OPEN, now, ticket.pk),
        ("Bob", S.OPEN, now, ticket.pk),
    ]
    assert rows[0].phone == "+32470123456"
    assert all(r.barcode.isdigit() and len(r.barcode) <= 20 for r in rows)
    assert len({r.barcode for r in rows}) == 2
    # a once-per-order answer is copied to every attendee of the request
    assert sorted(
        RegistrationAnswer.objects.values_list("registration_id", "text_value")
    ) == sorted([(rows[0].pk, "vegan"), (rows[1].pk, "vegan")])
    assert list(
        EventAuditLog.objects.order_by("pk").values_list("verb", "registration_id", "event_id")
    ) == [
        ("registration.created", rows[0].pk, event.pk),
        ("registration.created", rows[1].pk, event.pk),
    ]
    assert seat_numbers(event) == (2, 0, 8)
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_the_registrations_changed_hook_runs_after_commit_and_never_for_a_rollback(actor):
    """The booking and a transition call the overlays' hook once their writes committed (the
    rows are there, with their ids); in a caller's transaction, only when it commits: rolled
    back, the hook never hears of registrations that do not exist."""
    event = factories.EventFactory()
    seen = []

    def hook(rows, who, signals):
        seen.append(([r.pk for r in rows], who, Registration.objects.filter(event=event).count()))

    hooks.registrations_changed.append(hook)
    try:
        rows = registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)
        registrations.cancel(registration=rows[0], actor=actor)
        with transaction.atomic():
            (inner,) = registrations.register(event=event, attendees=[{"name": "B"}], actor=actor)
            assert len(seen) == 2  # not yet: the caller's transaction has not committed
        with pytest.raises(RuntimeError), transaction.atomic():
            registrations.register(event=event, attendees=[{"name": "Undone"}], actor=actor)
            raise RuntimeError("the caller fails after booking")
    finally:
        hooks.registrations_changed.remove(hook)

    assert seen == [([rows[0].pk], actor, 1), ([rows[0].pk], actor, 1), ([inner.pk], actor, 2)]
    assert not Registration.objects.filter(name="Undone").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("attendees", "code"),
    [
        ([], "invalid_quantity"),
        ([{"name": "A", "email": "not-an-email"}], "invalid_attendee"),
    ],
)
def test_register_refusals_write_nothing(attendees, code, actor):
    event = factories.EventFactory()
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.register(event=event, attendees=attendees, actor=actor)

    assert caught.value.code == code
    assert snapshot(event) == before


# --- fences -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_cancelled_event_refuses_new_seats_on_register(actor):
    event = factories.EventFactory(kanban_state=KanbanState.CANCEL)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)

    assert caught.value.code == "registrations_closed"
    assert snapshot(event) == before


@pytest.mark.django_db
def test_a_cancelled_event_refuses_new_seats_on_confirm(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    draft = factories.RegistrationFactory(event=event, state=S.DRAFT)
    from events.services import events as event_services

    event = event_services.cancel_event(event=event, actor=actor)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.confirm(registration=draft, actor=actor)

    assert caught.value.code == "registrations_closed"
    assert snapshot(event) == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("state", "verb"),
    [(S.OPEN, registrations.mark_attended), (S.DONE, registrations.undo_attendance)],
)
def test_a_cancelled_event_refuses_every_entry_into_open_or_done(state, verb, actor):
    """spec.md §4: no registration may enter open/done on a cancelled event."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    registration = factories.RegistrationFactory(event=event, state=state)
    from events.services import events as event_services

    event = event_services.cancel_event(event=event, actor=actor)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        verb(registration=registration, actor=actor)

    assert caught.value.code == "registrations_closed"
    assert snapshot(event) == before


@pytest.mark.django_db
def test_a_cancelled_event_keeps_existing_registrations_and_frees_on_cancel(actor):
    """Registrations keep their state; freeing a seat is still possible; a draft may be
    recorded (it holds no seat)."""
    event = factories.EventFactory(kanban_state=KanbanState.CANCEL, seats_limited=True, seats_max=3)
    held = factories.RegistrationFactory(event=event)

    (draft,) = registrations.register(
        event=event, attendees=[{"name": "D"}], state="draft", actor=actor
    )
    registrations.cancel(registration=held, actor=actor)

    assert draft.state == S.DRAFT
    assert seat_numbers(event) == (0, 0, 3)


@pytest.mark.django_db
@pytest.mark.parametrize("state", [S.OPEN, S.DONE])
def test_archive_is_refused_for_seat_holders(state, actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    registration = factories.RegistrationFactory(event=event, state=state)
    before = snapshot(event)

    with pytest.raises(DomainError) as caught:
        registrations.archive(registration=registration, actor=actor)

    assert caught.value.code == "archive_refused"
    assert snapshot(event) == before


@pytest.mark.django_db
@pytest.mark.parametrize("state", [S.DRAFT, S.CANCEL])
def test_archive_and_unarchive_never_change_seats(state, actor):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    factories.RegistrationFactory(event=event)
    registration = factories.RegistrationFactory(event=event, state=state)
    seats_before = seat_numbers(event)
    ledger_before = snapshot(event)["ledger"]

    registrations.archive(registration=registration, actor=actor)
    registration.refresh_from_db()
    archived = (registration.active, seat_numbers(event), snapshot(event)["ledger"])
    registrations.unarchive(registration=registration, actor=actor)
    registration.refresh_from_db()

    assert archived == (False, seats_before, ledger_before)
    assert (registration.active, registration.state) == (True, state)
    assert seat_numbers(event) == seats_before
    assert snapshot(event)["ledger"] == ledger_before
    assert list(
        EventAuditLog.objects.filter(registration=registration)
        .order_by("pk")
        .values_list("verb", "data")
    ) == [
        ("registration.archived", {"active": [True, False]}),
        ("registration.unarchived", {"active": [False, True]}),
    ]


@pytest.mark.django_db
def test_an_archived_cancelled_registration_reset_to_draft_still_holds_no_seat(actor):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    registration = factories.RegistrationFactory(event=event, state=S.CANCEL)
    registrations.archive(registration=registration, actor=actor)

    registrations.reset_to_draft(registration=registration, actor=actor)

    registration.refresh_from_db()
    assert (registration.state, registration.active) == (S.DRAFT, False)
    assert seat_numbers(event) == (0, 0, 1)
    assert seats.audit(event=event) == []


# --- sync_from_partner -----------------------------------------------------------------------


@pytest.mark.django_db
def test_sync_from_partner_touches_only_partner_rows_in_draft_or_open(actor):
    event = factories.EventFactory(country="BE")
    partner = {"partner_ref": "P7", "contact_source": ContactSource.PARTNER, "event": event}
    draft = factories.RegistrationFactory(state=S.DRAFT, name="Old", **partner)
    open_ = factories.RegistrationFactory(state=S.OPEN, name="Old", **partner)
    done = factories.RegistrationFactory(state=S.DONE, name="Old", **partner)
    cancelled = factories.RegistrationFactory(state=S.CANCEL, name="Old", **partner)
    typed = factories.RegistrationFactory(
        event=event, partner_ref="P7", contact_source=ContactSource.ATTENDEE, name="Typed"
    )
    other = factories.RegistrationFactory(
        event=event, partner_ref="P8", contact_source=ContactSource.PARTNER, name="Other"
    )
    ledger_before = snapshot(event)["ledger"]

    count = registrations.sync_from_partner(
        partner_ref="P7",
        name="New Name",
        email="new@example.org",
        phone="0470 12 34 56",
        company_name="ACME",
        actor=actor,
    )

    assert count == 2
    contact = dict(Registration.objects.values_list("pk", "name"))
    assert contact == {
        draft.pk: "New Name",
        open_.pk: "New Name",
        done.pk: "Old",
        cancelled.pk: "Old",
        typed.pk: "Typed",
        other.pk: "Other",
    }
    assert list(
        Registration.objects.filter(pk__in=[draft.pk, open_.pk])
        .values_list("email", "phone", "company_name", "state")
        .order_by("pk")
    ) == [
        ("new@example.org", "+32470123456", "ACME", S.DRAFT),
        ("new@example.org", "+32470123456", "ACME", S.OPEN),
    ]
    rows = EventAuditLog.objects.filter(verb="registration.partner_synced").order_by(
        "registration_id"
    )
    assert [r.registration_id for r in rows] == [draft.pk, open_.pk]
    assert rows[0].data["name"] == ["Old", "New Name"]
    assert snapshot(event)["ledger"] == ledger_before

    # the same details again change nothing and write nothing
    audit_rows = EventAuditLog.objects.count()
    assert (
        registrations.sync_from_partner(
            partner_ref="P7",
            name="New Name",
            email="new@example.org",
            phone="0470 12 34 56",
            company_name="ACME",
            actor=actor,
        )
        == 0
    )
    assert EventAuditLog.objects.count() == audit_rows


# --- barcodes ----------------------------------------------------------------------------------


def _collide_once(monkeypatch, taken: str) -> list[str]:
    given = iter([taken, "123456789012"])
    handed: list[str] = []

    def barcode():
        handed.append(next(given))
        return handed[-1]

    monkeypatch.setattr(registrations.booking, "new_barcode", barcode)
    return handed


def _assert_collision_retried(event, existing, handed, rows):
    assert handed == [existing.barcode, "123456789012"]
    assert [r.barcode for r in rows] == ["123456789012"]
    assert Registration.objects.filter(event=event).count() == 2
    assert seat_numbers(event) == (2, 0, 3)  # the failed attempt's seat was rolled back
    assert EventAuditLog.objects.filter(verb="registration.created").count() == 1
    assert seats.audit(event=event) == []


@pytest.mark.django_db
def test_a_barcode_collision_is_retried_inside_an_outer_transaction(actor, monkeypatch):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    existing = factories.RegistrationFactory(event=event)
    handed = _collide_once(monkeypatch, existing.barcode)

    rows = registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)

    _assert_collision_retried(event, existing, handed, rows)


@pytest.mark.django_db(transaction=True)
def test_a_barcode_collision_is_retried_as_a_whole_transaction(actor, monkeypatch):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    existing = factories.RegistrationFactory(event=event)
    handed = _collide_once(monkeypatch, existing.barcode)

    rows = registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)

    _assert_collision_retried(event, existing, handed, rows)


@pytest.mark.django_db
def test_without_a_savepoint_a_collision_in_a_callers_transaction_is_raised(actor, monkeypatch):
    """No savepoint to go back to: only the caller can roll back (and its sender retry)."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    existing = factories.RegistrationFactory(event=event)
    handed = _collide_once(monkeypatch, existing.barcode)

    with pytest.raises(IntegrityError), transaction.atomic():
        registrations.register(event=event, attendees=[{"name": "A"}], actor=actor, savepoint=False)
    assert handed == [existing.barcode]  # not retried
    assert Registration.objects.filter(event=event).count() == 1
    assert seats.audit(event=event) == []


@pytest.mark.django_db(transaction=True)
def test_without_a_savepoint_outside_a_transaction_a_collision_is_still_retried(actor, monkeypatch):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    existing = factories.RegistrationFactory(event=event)
    handed = _collide_once(monkeypatch, existing.barcode)

    rows = registrations.register(
        event=event, attendees=[{"name": "A"}], actor=actor, savepoint=False
    )

    _assert_collision_retried(event, existing, handed, rows)


@pytest.mark.django_db(transaction=True)
def test_without_a_savepoint_with_autocommit_off_by_hand_a_collision_is_raised(actor, monkeypatch):
    """The caller manages the transaction by hand (autocommit off): the collision aborted the
    caller's transaction, which only the caller can roll back (a retry in it would fail on
    the aborted transaction). The collision is raised, once; the caller's rollback takes its
    earlier write with it, for the caller to run again."""
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    existing = factories.RegistrationFactory(event=event)
    handed = _collide_once(monkeypatch, existing.barcode)

    transaction.set_autocommit(False)
    try:
        Event.objects.filter(pk=event.pk).update(name="The caller's write")
        with pytest.raises(IntegrityError):
            registrations.register(
                event=event, attendees=[{"name": "A"}], actor=actor, savepoint=False
            )
    finally:
        transaction.rollback()
        transaction.set_autocommit(True)
    assert handed == [existing.barcode]  # not retried
    assert Registration.objects.filter(event=event).count() == 1
    assert Event.objects.get(pk=event.pk).name != "The caller's write"
    assert seats.audit(event=event) == []


@pytest.mark.django_db
def test_sync_from_partner_leaves_archived_registrations_alone(actor):
    """An archived draft is a closed record: the partner's new details do not reach it (and
    write no audit row for it); the live draft of the same partner is synced."""
    event = factories.EventFactory(country="BE")
    partner = {"partner_ref": "P9", "contact_source": ContactSource.PARTNER, "event": event}
    live = factories.RegistrationFactory(state=S.DRAFT, name="Old", **partner)
    archived = factories.RegistrationFactory(state=S.DRAFT, name="Old", **partner)
    registrations.archive(registration=archived, actor=actor)
    archived_before = Registration.objects.filter(pk=archived.pk).values().get()

    count = registrations.sync_from_partner(
        partner_ref="P9", name="New", email="", phone="", company_name="", actor=actor
    )

    assert count == 1
    assert Registration.objects.get(pk=live.pk).name == "New"
    assert Registration.objects.filter(pk=archived.pk).values().get() == archived_before
    assert not EventAuditLog.objects.filter(
        verb="registration.partner_synced", registration_id=archived.pk
    ).exists()


@pytest.mark.django_db(transaction=True)
def test_a_booking_draws_its_ids_once_it_holds_the_event_lock(actor):
    """Per event, registration ids grow in commit order, because a booking draws them under the
    Event lock and commits before releasing it. The scheduler's walks rely on it: they keep a
    cursor on registration ids (Mail.last_registration_id, passes._walk) and never look below
    it again. So a booking that waited for the lock must get an id above one drawn elsewhere
    while it waited; ids drawn before the lock (a per-process pool, say) would fail this."""
    event, elsewhere = factories.EventFactory(), factories.EventFactory()
    locked, release = threading.Event(), threading.Event()
    late: list[int] = []
    booker_pid: list[int] = []
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                locks.lock_event(event.pk)
                locked.set()
                release.wait(30)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()

    def booker() -> None:
        try:
            connection.ensure_connection()
            booker_pid.append(connection.connection.info.backend_pid)
            (row,) = registrations.register(event=event, attendees=[{"name": "Late"}], actor=actor)
            late.append(row.pk)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert locked.wait(30)
    threads.append(threading.Thread(target=booker))
    threads[1].start()
    try:
        deadline = time.monotonic() + 30
        while not (booker_pid and _waits_for_a_lock(booker_pid[0])):
            assert time.monotonic() < deadline, "the booking never waited for the Event lock"
            time.sleep(0.01)
        (meanwhile,) = registrations.register(
            event=elsewhere, attendees=[{"name": "Meanwhile"}], actor=actor
        )
    finally:
        release.set()
        for thread in threads:
            thread.join(30)
    assert errors == [] and len(late) == 1
    assert late[0] > meanwhile.pk


def _waits_for_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)", [pid]
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_transition_whose_update_changes_no_row_commits_nothing(actor, monkeypatch):
    """The transition's COMMIT travels right behind its writes: its row statement checks
    itself that the UPDATE changed the registration (events_rows_guard), so an UPDATE that
    found no row (here: made to miss it) fails the statement before that COMMIT runs, and the
    ledger change, the audit row and the leads request sent with it are rolled back."""
    event = factories.EventFactory(seats_limited=True, seats_max=3)
    (reg,) = registrations.register(event=event, attendees=[{"name": "A"}], actor=actor)
    LeadRequest.objects.filter(event=event).delete()  # the leads trigger would write it again
    before = snapshot(event)
    missing = registrations.transitions._transition_sql().replace("WHERE id = %s", "WHERE id = -%s")
    monkeypatch.setattr(registrations.transitions, "_transition_sql", lambda: missing)

    with pytest.raises(RuntimeError, match=f"registration {reg.pk} was not updated"):
        registrations.mark_attended(registration=reg, actor=actor)

    assert snapshot(event) == before
    assert seats.event_summary(event=event).used == 0
    assert seats.audit(event=event) == []
    assert not LeadRequest.objects.filter(event=event).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("deletion", ["scheduler", "template"])
def test_a_scheduler_deleted_during_a_booking_makes_it_read_again_under_the_lock(actor, deletion):
    """A booking decides on its inputs as read (or kept) before its statement takes the Event
    lock; the lock's check finds them changed when an after_sub scheduler was deleted (the
    verb, or the template cascade) in between. The booking then reads again under the lock and
    decides once more: it books without the scheduler, writes no row for it (which would fail
    the commit on the row's foreign key), and the second decision runs while its own
    transaction holds the Event row."""
    event = factories.EventFactory()
    mail = factories.MailFactory(
        event=event,
        interval_type=IntervalType.AFTER_SUB,
        interval_unit=IntervalUnit.HOURS,
        scheduled_date=None,
    )
    errors: list[BaseException] = []
    decided: list[tuple[bool, bool]] = []  # (schedulers in the inputs, Event row held by us)

    def delete() -> None:
        try:
            if deletion == "scheduler":
                scheduler.delete_scheduler(scheduler=mail, actor=actor)
            else:
                scheduler.on_template_deleted(template_ref=mail.template_ref, actor=actor)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()

    def row_held_elsewhere() -> bool:
        with psycopg.connect(database_url(), autocommit=True) as other:
            try:
                other.execute(
                    "SELECT 1 FROM events_event WHERE id = %s FOR UPDATE NOWAIT", [event.pk]
                )
            except psycopg.errors.LockNotAvailable:
                return True
            return False

    def recheck(locked_event, ticket) -> None:
        held = row_held_elsewhere()
        decided.append((Mail.objects.filter(pk=mail.pk).exists(), held))
        if len(decided) == 1:
            # Between the booking's read and its statement: the deletion takes the Event lock,
            # which nobody holds yet, and commits.
            thread = threading.Thread(target=delete)
            thread.start()
            thread.join(30)

    (row,) = registrations.register(
        event=event, attendees=[{"name": "A"}], actor=actor, recheck=recheck
    )
    assert errors == []
    assert decided == [(True, False), (False, True)]
    assert Registration.objects.filter(pk=row.pk, state="open").exists()
    assert not Mail.objects.filter(pk=mail.pk).exists()
    assert not MailRegistration.objects.filter(registration=row).exists()
