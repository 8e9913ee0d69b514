"""The desk verbs (spec-overlay.md §5.1): exact match, the summary, date_closed, the manual
confirmation, seats through the seat module, the desk actor, and constant queries per scan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from desk.services import confirm_attendance, register_attendee
from events import rules as core_rules
from events.errors import NotFound, ValidationFailed
from events.models import Event, EventAuditLog, Registration, SeatLedger
from events.services import seats
from events.services.audit import Actor
from tests.events import factories
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db

DESK = Actor("desk", label="door 1")


def ongoing_event(**kw):
    begin = timezone.now() - timedelta(hours=1)
    return factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8), **kw)


@pytest.fixture
def reg():
    return factories.RegistrationFactory(event=ongoing_event(), barcode="AbC12345xY", state="open")


@pytest.mark.parametrize(
    "scanned",
    ["xAbC12345xY", "AbC12345xYz", "abc12345xy", "ABC12345XY", "AbC12 345xY", "AbC12345x"],
)
def test_anything_but_the_exact_barcode_is_invalid_ticket(reg, scanned):
    assert register_attendee(barcode=scanned, actor=DESK) == {"status": "invalid_ticket"}
    reg.refresh_from_db()
    assert reg.state == "open"


@pytest.mark.parametrize("scanned", ["AbC12345xY\n", "  AbC12345xY  ", "\tAbC12345xY\r\n"])
def test_surrounding_whitespace_and_a_trailing_newline_are_accepted(reg, scanned):
    answer = register_attendee(barcode=scanned, event_id=reg.event_id, actor=DESK)
    assert answer["status"] == "confirmed_registration"
    assert answer["id"] == reg.pk


@pytest.mark.parametrize(
    "scanned", ["", "   \n", "1" * 200, "12\x0034", "\ud800", "12\udfff34", "١٢٣٤٥"]
)
def test_empty_overlong_nul_or_unstorable_input_is_invalid_ticket_and_audited(scanned):
    """NUL and lone surrogates cannot reach PostgreSQL (the lookup would raise); other scripts'
    digits are just text that matches no barcode."""
    assert register_attendee(barcode=scanned, event_id=None, actor=DESK) == {
        "status": "invalid_ticket"
    }
    row = EventAuditLog.objects.get(verb="registration.scanned")
    assert (row.actor_type, row.data["status"]) == ("desk", "invalid_ticket")
    assert "\x00" not in row.data["barcode"] and len(row.data["barcode"]) <= 64
    row.data["barcode"].encode("utf-8")  # storable: a lone surrogate kept as its escape
    if "\udfff" in scanned:
        assert row.data["barcode"] == "12\\udfff34"


def test_the_summary_has_exactly_the_pinned_fields():
    event = ongoing_event(name="Summit", date_tz="Europe/Brussels")
    ticket = factories.TicketFactory(event=event, name="Standard")
    shirt = factories.QuestionFactory(
        event=event, title="T-shirt", question_type="simple_choice", sequence=1
    )
    m = factories.QuestionChoiceFactory(question=shirt, name="M")
    diet = factories.QuestionFactory(event=event, title="Diet", question_type="text_box")
    reg = factories.RegistrationFactory(
        event=event,
        ticket=ticket,
        name="Ada Lovelace",
        company_name="Engines Ltd",
        partner_ref="P-7",
        sale_status="to_pay",
    )
    factories.RegistrationAnswerFactory(registration=reg, question=shirt, choice=m, text_value=None)
    factories.RegistrationAnswerFactory(registration=reg, question=diet, text_value="vegan")
    now = timezone.now()

    answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK, now=now)

    assert answer == {
        "status": "confirmed_registration",
        "id": reg.pk,
        "name": "Ada Lovelace",
        "partner_ref": "P-7",
        "event_id": event.pk,
        "event_name": "Summit",
        "ticket_name": "Standard",
        "slot_name": None,
        "company_name": "Engines Ltd",
        "registration_answers": ["T-shirt: M"],  # choice answers only
        "sale_status": "to_pay",
        "is_paid": False,
        "has_to_pay": True,
        "date_closed": now.isoformat(),
        "is_date_closed_today": True,
    }


def test_the_summary_names_the_slot_and_a_paid_ticket_does_not_have_to_pay():
    slot = factories.SlotFactory(event=ongoing_event(is_multi_slots=True))
    reg = factories.RegistrationFactory(
        event=slot.event, slot=slot, sale_status="sold", is_paid=True
    )
    answer = register_attendee(barcode=reg.barcode, actor=DESK)
    assert answer["slot_name"] == str(slot)
    assert (answer["sale_status"], answer["is_paid"], answer["has_to_pay"]) == ("sold", True, False)
    assert answer["ticket_name"] is None


# Written out here, not imported: a ticket sold through an order, or marked to pay, that the
# host has not reported paid has to pay at the door; a free one never does.
HAS_TO_PAY = {
    ("free", False): False,
    ("free", True): False,
    ("sold", False): True,
    ("sold", True): False,
    ("to_pay", False): True,
    ("to_pay", True): False,
}


@pytest.mark.parametrize(("sale_status", "is_paid"), sorted(HAS_TO_PAY))
def test_has_to_pay_follows_the_sale_status_and_the_payment(sale_status, is_paid):

    reg = factories.RegistrationFactory(
        event=ongoing_event(), sale_status=sale_status, is_paid=is_paid
    )
    expected = HAS_TO_PAY[(sale_status, is_paid)]
    assert core_rules.has_to_pay(reg) is expected
    for answer in (
        register_attendee(barcode=reg.barcode, event_id=reg.event_id, actor=DESK),  # admitted
        register_attendee(barcode=reg.barcode, event_id=reg.event_id, actor=DESK),  # again
    ):
        assert (answer["sale_status"], answer["is_paid"], answer["has_to_pay"]) == (
            sale_status,
            is_paid,
            expected,
        )


def test_a_ticket_of_a_confirmed_order_is_to_pay_until_the_order_is_paid():
    """What the sale seam mints for a confirmed, priced order: `sold`, not paid. The door
    collects (or sends to the cash desk) until the host reports the payment."""
    from events.services import orders, registrations

    event = ongoing_event()
    (reg,) = registrations.register(
        event=event,
        attendees=[{"name": "Ada"}],
        sale_order_ref="SO-7",
        sale_order_line_ref="SO-7/1",
        sale_status="sold",
        actor=DESK,
    )
    assert register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)["has_to_pay"]
    orders.set_paid(order_ref="SO-7", actor=DESK)  # what the seam's order.paid runs
    answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)
    assert (answer["status"], answer["has_to_pay"]) == ("already_registered", False)


def test_date_closed_is_set_once_and_never_cleared():
    event = ongoing_event(date_tz="Europe/Brussels")
    reg = factories.RegistrationFactory(event=event)
    first = timezone.now()
    answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK, now=first)
    assert answer["date_closed"] == first.isoformat()

    later = first + timedelta(minutes=5)
    again = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK, now=later)
    assert again["status"] == "already_registered"
    assert again["date_closed"] == first.isoformat()
    reg.refresh_from_db()
    assert reg.date_closed == first

    # the manual path does not touch it either
    assert confirm_attendance(registration_id=reg.pk, actor=DESK)["date_closed"] == (
        first.isoformat()
    )
    reg.refresh_from_db()
    assert reg.date_closed == first


def test_is_date_closed_today_is_read_in_the_event_timezone():
    event = factories.EventFactory(
        date_begin=datetime(2026, 1, 1, tzinfo=UTC),
        date_end=datetime(2028, 1, 1, tzinfo=UTC),
        date_tz="Europe/Brussels",
    )
    # 23:30 UTC on 1 March is 00:30 on 2 March in Brussels
    closed = datetime(2027, 3, 1, 23, 30, tzinfo=UTC)
    reg = factories.RegistrationFactory(event=event, state="done", date_closed=closed)
    same_day_brussels = datetime(2027, 3, 2, 10, 0, tzinfo=UTC)
    answer = register_attendee(barcode=reg.barcode, actor=DESK, now=same_day_brussels)
    assert answer["status"] == "already_registered"
    assert answer["is_date_closed_today"] is True
    same_day_utc = datetime(2027, 3, 1, 23, 45, tzinfo=UTC)  # 00:45 on 2 March in Brussels
    assert register_attendee(barcode=reg.barcode, actor=DESK, now=same_day_utc)[
        "is_date_closed_today"
    ]
    day_before_brussels = datetime(2027, 3, 1, 22, 0, tzinfo=UTC)  # 23:00 on 1 March, Brussels
    assert not register_attendee(barcode=reg.barcode, actor=DESK, now=day_before_brussels)[
        "is_date_closed_today"
    ]


def test_a_confirmed_scan_moves_the_seat_from_reserved_to_used_through_the_seat_module():
    event = ongoing_event(seats_limited=True, seats_max=5)
    reg = factories.RegistrationFactory(event=event)
    factories.RegistrationFactory(event=event)
    assert seats.event_summary(event=event).reserved == 2
    register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)
    summary = seats.event_summary(event=event)
    assert (summary.reserved, summary.used, summary.taken) == (1, 1, 2)
    assert seats.audit(event=event) == []


def test_every_scan_is_audited_with_the_desk_actor_and_a_user_becomes_the_desk_actor():
    user = factories.UserFactory(username="doorkeeper")
    reg = factories.RegistrationFactory(event=ongoing_event())
    register_attendee(barcode=reg.barcode, event_id=reg.event_id, actor=user)
    register_attendee(barcode=reg.barcode, event_id=reg.event_id, actor=user)
    rows = list(
        EventAuditLog.objects.filter(registration=reg)
        .order_by("pk")
        .values_list("verb", "actor_type", "actor_id", "actor_label")
    )
    desk = ("desk", str(user.pk), "doorkeeper")
    assert rows == [
        ("registration.attended", *desk),
        ("registration.scanned", *desk),
        ("registration.scanned", *desk),
    ]
    statuses = EventAuditLog.objects.filter(verb="registration.scanned").order_by("pk")
    assert [r.data["status"] for r in statuses] == [
        "confirmed_registration",
        "already_registered",
    ]


# --- multi-slot events: a desk admits for one slot -----------------------------------------


def two_slot_event(**kw):
    event = ongoing_event(is_multi_slots=True, **kw)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(
        event=event,
        start_hour=13.0,
        end_hour=16.0,
        start_datetime=event.date_begin + timedelta(hours=4),
        end_datetime=event.date_begin + timedelta(hours=7),
    )
    return event, morning, afternoon


def test_a_ticket_of_the_desk_s_slot_is_admitted():
    event, morning, _ = two_slot_event()
    reg = factories.RegistrationFactory(event=event, slot=morning)
    answer = register_attendee(
        barcode=reg.barcode, event_id=event.pk, slot_id=morning.pk, actor=DESK
    )
    assert (answer["status"], answer["slot_name"]) == ("confirmed_registration", str(morning))
    assert Registration.objects.get(pk=reg.pk).state == "done"


def test_a_ticket_of_another_slot_needs_manual_confirmation_and_nothing_is_written():
    event, morning, afternoon = two_slot_event()
    reg = factories.RegistrationFactory(event=event, slot=afternoon)
    before = snapshot(event)

    answer = register_attendee(
        barcode=reg.barcode, event_id=event.pk, slot_id=morning.pk, actor=DESK
    )

    assert answer["status"] == "need_manual_confirmation"
    assert (answer["event_id"], answer["slot_name"]) == (event.pk, str(afternoon))
    after = snapshot(event)
    new_rows = after.pop("audit")[len(before.pop("audit")) :]
    assert after == before
    (row,) = EventAuditLog.objects.filter(pk__in=new_rows)  # the scan's own row only
    assert (row.verb, row.data) == (
        "registration.scanned",
        {
            "status": "need_manual_confirmation",
            "desk_event_id": event.pk,
            "desk_slot_id": morning.pk,
        },
    )
    # the door worker checks the ticket and confirms by hand
    assert confirm_attendance(registration_id=reg.pk, actor=DESK)["status"] == (
        "confirmed_registration"
    )


def test_without_a_chosen_slot_the_desk_admits_every_slot_of_its_event():
    event, morning, afternoon = two_slot_event()
    for slot in (morning, afternoon):
        reg = factories.RegistrationFactory(event=event, slot=slot)
        answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)
        assert answer["status"] == "confirmed_registration"


def test_a_slot_without_an_event_id_names_the_desk_s_event():
    event, morning, _ = two_slot_event()
    reg = factories.RegistrationFactory(event=ongoing_event())
    answer = register_attendee(barcode=reg.barcode, slot_id=morning.pk, actor=DESK)
    assert answer["status"] == "need_manual_confirmation"
    assert EventAuditLog.objects.get(verb="registration.scanned").data["desk_event_id"] == event.pk


@pytest.mark.parametrize("which", ["unknown", "of another event"])
def test_a_slot_that_is_not_one_of_the_desk_event_s_is_invalid_slot_and_nothing_is_written(which):
    event, morning, _ = two_slot_event()
    reg = factories.RegistrationFactory(event=event, slot=morning)
    slot_id = 987654321 if which == "unknown" else factories.SlotFactory().pk
    before = snapshot(event)
    with pytest.raises(ValidationFailed) as refused:
        register_attendee(barcode=reg.barcode, event_id=event.pk, slot_id=slot_id, actor=DESK)
    assert refused.value.code == "invalid_slot"
    assert snapshot(event) == before
    assert not EventAuditLog.objects.filter(verb="registration.scanned").exists()


def test_expected_counts_the_attendees_not_the_seats_waiting_list_offers_hold(monkeypatch):
    """An offer holds its seat (seat `held`, inside `taken`) until it is accepted, but nobody
    comes to the door with an offer: the desk expects the registrations holding a seat. Per
    slot when the desk admits for one."""
    from desk import selectors
    from events.services import capability, nudge, registrations, waitlist

    monkeypatch.setattr(nudge, "publish", lambda *args, **kwargs: None)  # no Celery here
    event, morning, afternoon = two_slot_event(seats_limited=True, seats_max=1)
    booked = {
        slot.pk: registrations.register(
            event=event, slot=slot, attendees=[{"name": f"In {slot.pk}"}], actor=DESK
        )[0]
        for slot in (morning, afternoon)
    }
    registrations.mark_attended(registration=booked[morning.pk], actor=DESK)
    waitlist.join(event=event, slot=afternoon, name="Wanda", email="w@example.org", actor=DESK)
    registrations.cancel(registration=booked[afternoon.pk], actor=DESK)
    (offered,) = waitlist.offer_freed_seats(event=event)
    summary = seats.event_summary(event=event)
    assert (summary.used, summary.reserved, summary.held, summary.taken) == (1, 0, 1, 2)

    assert selectors.counters(event=event) == {"attended": 1, "expected": 1}
    assert selectors.counters(event=event, slot_id=morning.pk) == {"attended": 1, "expected": 1}
    assert selectors.counters(event=event, slot_id=afternoon.pk) == {"attended": 0, "expected": 0}
    (row,) = [r for r in selectors.desk_events(now=timezone.now()) if r["event"].pk == event.pk]
    assert (row["attended"], row["expected"]) == (1, 1)

    offered.refresh_from_db()
    waitlist.accept(token=capability.mint(purpose="offer", subject=offered))
    assert selectors.counters(event=event, slot_id=afternoon.pk) == {"attended": 0, "expected": 1}
    assert selectors.counters(event=event) == {"attended": 1, "expected": 2}


# --- confirm_attendance -------------------------------------------------------------------


def test_the_manual_confirmation_admits_a_ticket_of_another_event():
    event, desk_event = ongoing_event(), ongoing_event()
    reg = factories.RegistrationFactory(event=event)
    asked = register_attendee(barcode=reg.barcode, event_id=desk_event.pk, actor=DESK)
    assert asked["status"] == "need_manual_confirmation"

    answer = confirm_attendance(registration_id=asked["id"], actor=DESK)

    assert answer["status"] == "confirmed_registration"
    reg.refresh_from_db()
    assert reg.state == "done"
    assert EventAuditLog.objects.filter(
        registration=reg, verb="registration.attendance_confirmed", actor_type="desk"
    ).exists()
    assert confirm_attendance(registration_id=reg.pk, actor=DESK)["status"] == (
        "already_registered"
    )


@pytest.mark.parametrize(
    ("state", "status"),
    [("cancel", "canceled_registration"), ("draft", "unconfirmed_registration")],
)
def test_the_manual_confirmation_keeps_the_refusals(state, status):
    reg = factories.RegistrationFactory(event=ongoing_event(), state=state)
    assert confirm_attendance(registration_id=reg.pk, actor=DESK)["status"] == status
    reg.refresh_from_db()
    assert reg.state == state


def test_the_manual_confirmation_refuses_a_cancelled_event():
    reg = factories.RegistrationFactory(event=ongoing_event(kanban_state="cancel"))
    assert confirm_attendance(registration_id=reg.pk, actor=DESK)["status"] == ("not_ongoing_event")
    reg.refresh_from_db()
    assert reg.state == "open"


def test_the_manual_confirmation_of_an_unknown_id_is_not_found():
    with pytest.raises(NotFound) as raised:
        confirm_attendance(registration_id=987654, actor=DESK)
    assert raised.value.code == "not_found"
    assert not EventAuditLog.objects.exists()


# --- queries per scan ---------------------------------------------------------------------


def crowd(event, n: int) -> None:
    """n open registrations on the event, booked in the ledger in one go."""
    rows = Registration.objects.bulk_create(
        Registration(event=event, state="open", barcode=f"55{event.pk:04d}{i:07d}", name=f"A {i}")
        for i in range(n)
    )
    seats.apply(event=event, holds=[seats.hold_for(rows[0], reserved=n)])


def scan_queries(n: int) -> tuple[int, int]:
    """(statements of an admission, of a re-scan) on an event with n registrations."""
    event = ongoing_event(seats_limited=True, seats_max=5_000)
    crowd(event, n)
    ticket = Registration.objects.filter(event=event).order_by("pk").last()
    with CaptureQueriesContext(connection) as admitted:
        answer = register_attendee(barcode=ticket.barcode, event_id=event.pk, actor=DESK)
    assert answer["status"] == "confirmed_registration"
    with CaptureQueriesContext(connection) as answered:
        answer = register_attendee(barcode=ticket.barcode, event_id=event.pk, actor=DESK)
    assert answer["status"] == "already_registered"
    assert SeatLedger.objects.get(event=event, slot=None, ticket=None).used == 1
    return len(admitted), len(answered)


def test_queries_per_scan_do_not_grow_with_the_registrations(django_assert_num_queries):
    small, large = scan_queries(10), scan_queries(1_000)
    assert small == large
    # The admission's count includes core's registrations_changed hooks (the leads overlay's
    # adds statements): bounded here, exact for the answer, which runs no core verb.
    assert small[0] <= QUERIES_CONFIRMED_MAX
    assert small[1] == QUERIES_ANSWERED
    event = ongoing_event()
    ticket = factories.RegistrationFactory(event=event, state="done")
    with django_assert_num_queries(QUERIES_ANSWERED):
        register_attendee(barcode=ticket.barcode, event_id=event.pk, actor=DESK)


def test_counting_queries_sees_the_scan():
    """Control for the test above: the capture does see the scan's statements."""
    reg = factories.RegistrationFactory(event=ongoing_event())
    with CaptureQueriesContext(connection) as ctx:
        register_attendee(barcode=reg.barcode, actor=DESK)
    assert any("events_lock_as_seen" in q["sql"] for q in ctx.captured_queries)


# Admission: the lookup; mark_attended (in a test its transaction is a savepoint: SAVEPOINT,
# the two locks, ledger, row, one audit INSERT of the transition's row and the scan's, RELEASE:
# 7 without hooks; core's registrations_changed hooks add theirs). The lookup reads the choice
# answers too. Answer (no lock needed, no transaction: one write): lookup, audit.
QUERIES_CONFIRMED_MAX = 11
QUERIES_ANSWERED = 2


@pytest.mark.parametrize("meanwhile", ["attended", "event_cancelled"])
def test_an_admission_is_decided_again_on_the_locked_rows_and_a_changed_answer_writes_only_the_scan(
    monkeypatch, meanwhile
):
    """The lookup saw an open registration of an ongoing event; before the desk's lock, another
    desk admitted it (or staff cancelled the event). The answer is the locked rows' and the
    scan's audit row records it; the transition writes nothing (no second seat moved, no
    second `registration.attended`)."""
    from desk import selectors
    from desk.services import attendance
    from events.services import events as event_services
    from events.services import registrations

    event = ongoing_event(seats_limited=True, seats_max=5)
    reg = factories.RegistrationFactory(event=event)
    stale = selectors.scanned_registration(barcode=reg.barcode)
    assert stale.registration.state == "open"
    if meanwhile == "attended":
        registrations.mark_attended(registration=reg, actor=DESK)
        expected = "already_registered"
    else:
        event_services.cancel_event(event=event, actor=DESK)
        expected = "not_ongoing_event"
    ledger_before = seats.event_summary(event=event)
    audit_before = EventAuditLog.objects.count()
    monkeypatch.setattr(attendance.selectors, "scanned_registration", lambda barcode: stale)

    answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)

    assert answer["status"] == expected
    assert seats.event_summary(event=event) == ledger_before
    new = list(EventAuditLog.objects.order_by("pk")[audit_before:])
    assert [(row.verb, row.data["status"]) for row in new] == [("registration.scanned", expected)]
    assert Registration.objects.filter(pk=reg.pk, state="done").count() == (
        1 if meanwhile == "attended" else 0
    )


def test_an_admission_writes_the_scan_row_in_the_transition_s_statement_and_transaction():
    """The transition's audit row and the scan's travel in one INSERT (in the statement of the
    registration's UPDATE), inside mark_attended's transaction (between its locks and its
    end)."""
    reg = factories.RegistrationFactory(event=ongoing_event())
    with CaptureQueriesContext(connection) as ctx:
        register_attendee(barcode=reg.barcode, event_id=reg.event_id, actor=DESK)
    sql = [q["sql"] for q in ctx.captured_queries]
    inserts = [i for i, q in enumerate(sql) if 'INSERT INTO "events_eventauditlog"' in q]
    assert len(inserts) == 1
    locks = [i for i, q in enumerate(sql) if "events_lock_as_seen" in q]
    release = [i for i, q in enumerate(sql) if q.startswith("RELEASE SAVEPOINT")]
    assert locks and release and locks[-1] < inserts[0] < release[-1]
    rows = EventAuditLog.objects.filter(registration=reg).order_by("pk")
    assert [row.verb for row in rows] == ["registration.attended", "registration.scanned"]


@pytest.mark.parametrize("changed", ["event", "registration"])
def test_an_admission_whose_rows_changed_since_the_lookup_is_decided_on_the_locked_rows(
    monkeypatch, caplog, changed
):
    """The lookup read the rows at some versions; before the admission, staff edited the event
    (its name) or the registration (its name): the rows are no longer as seen, so the one-round
    -trip admission writes nothing and the transition runs again on the locked rows, where the
    ticket still admits: one attendance, one seat moved, the transition's and the scan's audit
    rows once each."""
    from desk import selectors
    from desk.services import attendance

    event = ongoing_event(seats_limited=True, seats_max=5)
    reg = factories.RegistrationFactory(event=event)
    stale = selectors.scanned_registration(barcode=reg.barcode)
    if changed == "event":
        Event.objects.filter(pk=event.pk).update(name="Renamed at the door")
    else:
        Registration.objects.filter(pk=reg.pk).update(name="Renamed attendee")
    assert selectors.scanned_registration(barcode=reg.barcode).seen != stale.seen
    monkeypatch.setattr(attendance.selectors, "scanned_registration", lambda barcode: stale)
    audit_before = EventAuditLog.objects.count()

    with caplog.at_level("DEBUG", logger="events.transitions"):
        answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)

    assert [r.getMessage() for r in caplog.records if r.name == "events.transitions"] == [
        f"registration {reg.pk}: rows_as_seen: 0 of 1 rows changed; deciding on the locked rows"
    ]
    assert answer["status"] == "confirmed_registration"
    # the answer is the locked row's: its current name
    assert answer["name"] == ("Renamed attendee" if changed == "registration" else reg.name)
    assert stale.registration.state == "open"  # the caller's instance is left as it was read
    assert seats.event_summary(event=event).used == 1
    new = list(EventAuditLog.objects.order_by("pk")[audit_before:])
    assert sorted(row.verb for row in new) == ["registration.attended", "registration.scanned"]
    assert Registration.objects.get(pk=reg.pk).state == "done"


def test_an_admission_on_unchanged_rows_checks_them_in_its_one_round_trip():
    """Control for the test above: unchanged rows pass the check, and the admission is sent
    with it (its locks, the check, the writes), not after a lock round trip of its own."""
    reg = factories.RegistrationFactory(event=ongoing_event())
    with CaptureQueriesContext(connection) as ctx:
        answer = register_attendee(barcode=reg.barcode, event_id=reg.event_id, actor=DESK)
    assert answer["status"] == "confirmed_registration"
    sql = [q["sql"] for q in ctx.captured_queries]
    # one attempt: the locks and the check (events_lock_as_seen) sent once, no other lock
    assert sum("events_lock_as_seen" in q for q in sql) == 1
    assert not [q for q in sql if "FOR UPDATE" in q or "FOR SHARE" in q]
