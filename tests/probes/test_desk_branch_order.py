"""Probe: the desk's frozen branch order (spec-overlay.md §5.1) and its race.

One test per branch, each built so that a later branch would also match (a cancelled ticket of
a finished event, a draft of a finished event, …): the answer shows which branch comes first.
Refusals leave everything but the one scan audit row untouched. Two desks scanning one ticket at
the same instant: exactly one `confirmed_registration` and one `already_registered`.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from itertools import product

import pytest
from django.db import connection
from django.utils import timezone

from desk.services import ScanStatus, decide, register_attendee
from events.models import EventAuditLog, KanbanState, Registration
from events.services import reference
from events.services.audit import Actor
from tests.events import factories
from tests.helpers import snapshot

DESK = Actor("desk", label="door 1")
JOIN_TIMEOUT = 30
ROUNDS = 20


def past_event(**kw):
    begin = timezone.now() - timedelta(days=3)
    return factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8), **kw)


def ongoing_event(**kw):
    begin = timezone.now() - timedelta(hours=1)
    return factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8), **kw)


def scan_writes_only_its_audit_row(event, barcode, *, event_id=None, slot=None) -> dict:
    """Scan and assert that nothing but one `registration.scanned` row was written."""
    before = snapshot(event)
    audit_before = EventAuditLog.objects.count()
    slot_id = slot.pk if slot is not None else None
    answer = register_attendee(barcode=barcode, event_id=event_id, slot_id=slot_id, actor=DESK)
    after = snapshot(event)
    new = list(EventAuditLog.objects.order_by("pk")[audit_before:])
    assert [(row.verb, row.actor_type) for row in new] == [("registration.scanned", "desk")]
    assert new[0].data["status"] == answer["status"]
    before.pop("audit"), after.pop("audit")
    assert after == before
    return answer


@pytest.mark.django_db
def test_1_no_registration_is_invalid_ticket():
    event = ongoing_event()
    factories.RegistrationFactory(event=event, barcode="1000000001")
    answer = scan_writes_only_its_audit_row(event, "1000000002")
    assert answer == {"status": "invalid_ticket"}


@pytest.mark.django_db
def test_2_a_cancelled_registration_of_a_finished_event_is_canceled_registration():
    event = past_event()
    reg = factories.RegistrationFactory(event=event, state="cancel")
    answer = scan_writes_only_its_audit_row(event, reg.barcode)
    assert answer["status"] == "canceled_registration"
    assert answer["id"] == reg.pk


@pytest.mark.django_db
def test_3_a_draft_of_a_finished_event_is_unconfirmed_registration():
    event = past_event()
    reg = factories.RegistrationFactory(event=event, state="draft")
    answer = scan_writes_only_its_audit_row(event, reg.barcode)
    assert answer["status"] == "unconfirmed_registration"


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["open", "done"])
def test_4_a_finished_event_is_not_ongoing_event_even_from_another_desk(state):
    event = past_event()
    other = ongoing_event()
    reg = factories.RegistrationFactory(event=event, state=state)
    # event_id of another event: step 4 answers before step 5's manual confirmation
    answer = scan_writes_only_its_audit_row(event, reg.barcode, event_id=other.pk)
    assert answer["status"] == "not_ongoing_event"


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["kanban", "stage", "renamed stage", "ended stage"])
def test_4_an_open_registration_of_a_cancelled_event_is_not_ongoing_nothing_written(how):
    """Cancelled by its kanban state or by its stage's flag — whatever the stage is called —
    or moved to an ending stage before its end (core's one decision of "closed")."""
    if how == "kanban":
        event = ongoing_event(kanban_state=KanbanState.CANCEL)
    elif how == "ended stage":
        event = ongoing_event(stage=factories.stage("Ended"))
    else:
        stage = factories.stage("Cancelled")
        if how == "renamed stage":
            reference.update_stage(stage=stage, actor=DESK, name="Called off")
            stage.refresh_from_db()
            assert (stage.name, stage.is_cancelled) == ("Called off", True)
        event = ongoing_event(stage=stage)
    reg = factories.RegistrationFactory(event=event, state="open")
    answer = scan_writes_only_its_audit_row(event, reg.barcode, event_id=event.pk)
    assert answer["status"] == "not_ongoing_event"
    reg.refresh_from_db()
    assert (reg.state, reg.date_closed) == ("open", None)


@pytest.mark.django_db
def test_5_an_open_registration_of_another_event_needs_manual_confirmation_nothing_written():
    event = ongoing_event()
    desk_event = ongoing_event()
    reg = factories.RegistrationFactory(event=event, state="open")
    answer = scan_writes_only_its_audit_row(event, reg.barcode, event_id=desk_event.pk)
    assert answer["status"] == "need_manual_confirmation"
    assert (answer["event_id"], answer["event_name"]) == (event.pk, event.name)
    reg.refresh_from_db()
    assert reg.state == "open"


@pytest.mark.django_db
def test_5_an_open_registration_of_another_slot_needs_manual_confirmation_nothing_written():
    event = ongoing_event(is_multi_slots=True)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    reg = factories.RegistrationFactory(event=event, slot=afternoon, state="open")
    answer = scan_writes_only_its_audit_row(event, reg.barcode, event_id=event.pk, slot=morning)
    assert answer["status"] == "need_manual_confirmation"
    reg.refresh_from_db()
    assert reg.state == "open"


@pytest.mark.django_db
def test_4_a_finished_event_is_not_ongoing_even_from_another_slot_s_desk():
    event = past_event(is_multi_slots=True)
    morning = factories.SlotFactory(event=event)
    afternoon = factories.SlotFactory(event=event, start_hour=13.0, end_hour=15.0)
    reg = factories.RegistrationFactory(event=event, slot=afternoon, state="open")
    answer = scan_writes_only_its_audit_row(event, reg.barcode, event_id=event.pk, slot=morning)
    assert answer["status"] == "not_ongoing_event"


@pytest.mark.django_db
@pytest.mark.parametrize("desk_event", ["same", "none"])
def test_5_an_open_registration_is_confirmed_and_marked_attended(desk_event):
    event = ongoing_event()
    reg = factories.RegistrationFactory(event=event, state="open")
    event_id = event.pk if desk_event == "same" else None
    answer = register_attendee(barcode=reg.barcode, event_id=event_id, actor=DESK)
    assert answer["status"] == "confirmed_registration"
    reg.refresh_from_db()
    assert reg.state == "done"
    assert reg.date_closed is not None


@pytest.mark.django_db
def test_5_early_entrance_before_the_start_is_confirmed():
    begin = timezone.now() + timedelta(days=1)
    event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=4))
    reg = factories.RegistrationFactory(event=event, state="open")
    answer = register_attendee(barcode=reg.barcode, event_id=event.pk, actor=DESK)
    assert answer["status"] == "confirmed_registration"


@pytest.mark.django_db
def test_6_an_attended_registration_is_already_registered_even_from_another_desk():
    event = ongoing_event()
    other = ongoing_event()
    reg = factories.RegistrationFactory(event=event, state="done", date_closed=timezone.now())
    answer = scan_writes_only_its_audit_row(event, reg.barcode, event_id=other.pk)
    assert answer["status"] == "already_registered"


def reference_order(state: str, not_ongoing: bool, other_event: bool, other_slot: bool) -> str:
    """§5.1 written out as a list of (condition, answer), first match wins; step 5's "another
    event" includes another slot of the desk's event."""
    branches = [
        (state == "cancel", "canceled_registration"),
        (state == "draft", "unconfirmed_registration"),
        (not_ongoing, "not_ongoing_event"),
        (state == "open" and (other_event or other_slot), "need_manual_confirmation"),
        (state == "open", "confirmed_registration"),
        (True, "already_registered"),
    ]
    return next(answer for matched, answer in branches if matched)


@pytest.mark.parametrize(
    ("state", "not_ongoing", "other_event", "other_slot"),
    list(product(["draft", "open", "done", "cancel"], [False, True], [False, True], [False, True])),
)
def test_the_order_itself_over_every_combination(state, not_ongoing, other_event, other_slot):
    got = decide(
        state=state, not_ongoing=not_ongoing, other_event=other_event, other_slot=other_slot
    )
    assert got == reference_order(state, not_ongoing, other_event, other_slot)
    assert got in set(ScanStatus)


# --- the race ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_desks_scanning_one_ticket_at_once_admit_it_once():
    event = ongoing_event()
    regs = [factories.RegistrationFactory(event=event, state="open") for _ in range(ROUNDS)]
    barrier = threading.Barrier(2)
    outcomes: list[list[object]] = [[None, None] for _ in range(ROUNDS)]

    def worker(index: int) -> None:
        try:
            for r, reg in enumerate(regs):
                barrier.wait(timeout=JOIN_TIMEOUT)
                try:
                    actor = Actor("desk", label=f"door {index}")
                    outcomes[r][index] = register_attendee(
                        barcode=reg.barcode, event_id=event.pk, actor=actor
                    )["status"]
                except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                    outcomes[r][index] = repr(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a desk is stuck (deadlock?)"

    expected = Counter({"confirmed_registration": 1, "already_registered": 1})
    assert [Counter(o) for o in outcomes] == [expected] * ROUNDS
    assert set(Registration.objects.filter(event=event).values_list("state", flat=True)) == {"done"}
    # one mark_attended per ticket, two scans per ticket, all by the desk
    rows = EventAuditLog.objects.filter(event=event, actor_type="desk")
    assert rows.filter(verb="registration.attended").count() == ROUNDS
    assert rows.filter(verb="registration.scanned").count() == 2 * ROUNDS
