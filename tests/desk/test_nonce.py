"""Idempotent scans: a `nonce` on /desk/api/scan and /desk/api/confirm replays the first answer
(same status, same bytes) and writes nothing more; concurrent duplicates produce one effect; a
nonce sent with another request is `nonce_reused`; a refusal writes nothing; the sweep keeps
RETENTION."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from desk.errors import NonceReused
from desk.models import ScanNonce
from desk.services import confirm_attendance, register_attendee
from desk.services.nonces import RETENTION, sweep_nonces
from events.models import EventAuditLog, Registration, SeatLedger
from tests.desk.test_views import CONFIRM, SCAN, csrf_client, ongoing_event, post, user_in
from tests.events import factories
from tests.helpers import run_concurrently


def written() -> tuple[int, int, int]:
    """(audit rows, attended registrations, stored nonces)."""
    return (
        EventAuditLog.objects.count(),
        Registration.objects.filter(state="done").count(),
        ScanNonce.objects.count(),
    )


@pytest.fixture
def desk_user(db):
    return user_in("Event desk", username="door")


@pytest.fixture
def reg(db):
    return factories.RegistrationFactory(event=ongoing_event(), state="open")


# --- the same nonce again --------------------------------------------------------------------


@pytest.mark.django_db
def test_a_retried_admission_answers_the_first_answer_and_writes_nothing_more(desk_user, reg):
    """The desk sent the scan, the answer was lost (a client timeout), the desk sends it again:
    the ticket is admitted once, one scan row, and the retry reads `confirmed_registration`, not
    `already_registered`."""
    first = register_attendee(
        barcode=reg.barcode, event_id=reg.event_id, actor=desk_user, nonce="n-1"
    )
    before = written()
    again = register_attendee(
        barcode=reg.barcode, event_id=reg.event_id, actor=desk_user, nonce="n-1"
    )
    assert first["status"] == "confirmed_registration"
    assert again == first
    assert written() == before == (2, 1, 1)  # registration.attended + one scan row
    assert SeatLedger.objects.get(event=reg.event, slot=None, ticket=None).used == 1


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["done", "cancel", "draft"])
def test_a_retried_answer_that_admits_nobody_is_replayed_too(desk_user, state):
    reg = factories.RegistrationFactory(event=ongoing_event(), state=state)
    first = register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-2")
    before = written()
    assert register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-2") == first
    assert written() == before
    assert EventAuditLog.objects.filter(verb="registration.scanned").count() == 1


@pytest.mark.django_db
def test_a_retried_unknown_code_is_replayed(desk_user):
    first = register_attendee(barcode="nobody", actor=desk_user, nonce="n-3")
    assert first == {"status": "invalid_ticket"}
    assert register_attendee(barcode="nobody", actor=desk_user, nonce="n-3") == first
    assert written() == (1, 0, 1)


@pytest.mark.django_db
def test_the_replay_keeps_the_first_answer_after_the_ticket_changed(desk_user, reg):
    """The stored answer is the answer: the state the ticket reached since is not consulted."""
    from events.services import registrations

    first = register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-4")
    registrations.undo_attendance(registration=Registration.objects.get(pk=reg.pk), actor="system")
    assert register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-4") == first
    assert Registration.objects.get(pk=reg.pk).state == "open"


@pytest.mark.django_db
def test_another_nonce_for_an_admitted_ticket_is_already_registered(desk_user, reg):
    register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-5")
    again = register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-6")
    assert again["status"] == "already_registered"
    assert written() == (3, 1, 2)


@pytest.mark.django_db
def test_a_nonce_is_kept_per_desk_user(desk_user, reg):
    other = user_in("Event desk", username="door-2")
    register_attendee(barcode=reg.barcode, actor=desk_user, nonce="same")
    assert register_attendee(barcode=reg.barcode, actor=other, nonce="same")["status"] == (
        "already_registered"
    )


@pytest.mark.django_db
def test_the_manual_confirmation_replays_its_first_answer(desk_user):
    reg = factories.RegistrationFactory(event=ongoing_event(), state="open")
    first = confirm_attendance(registration_id=reg.pk, actor=desk_user, nonce="c-1")
    before = written()
    assert confirm_attendance(registration_id=reg.pk, actor=desk_user, nonce="c-1") == first
    assert first["status"] == "confirmed_registration"
    assert written() == before == (2, 1, 1)


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("second", ["another barcode", "another event", "a confirmation"])
def test_a_nonce_sent_with_another_request_is_nonce_reused_and_writes_nothing(
    desk_user, reg, second
):
    other = factories.RegistrationFactory(event=ongoing_event(), state="open")
    register_attendee(barcode=reg.barcode, actor=desk_user, nonce="n-7")
    before = written()
    with pytest.raises(NonceReused) as refused:
        if second == "another barcode":
            register_attendee(barcode=other.barcode, actor=desk_user, nonce="n-7")
        elif second == "another event":
            register_attendee(
                barcode=reg.barcode, event_id=other.event_id, actor=desk_user, nonce="n-7"
            )
        else:
            confirm_attendance(registration_id=other.pk, actor=desk_user, nonce="n-7")
    assert refused.value.code == "nonce_reused"
    assert written() == before
    assert Registration.objects.get(pk=other.pk).state == "open"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "nonce",
    [None, 7, True, ["n"], {"n": 1}, "", "x" * 65, "a\x00b", "\ud800", "a\nb", "\tn", "a\u2028b"],
)
@pytest.mark.parametrize("url", [SCAN, CONFIRM])
def test_an_invalid_nonce_is_400_invalid_value_naming_it_and_writes_nothing(
    desk_user, reg, nonce, url
):
    client, token = csrf_client(desk_user)
    body = {"barcode": reg.barcode} if url == SCAN else {"registration_id": reg.pk}
    response = post(client, url, {**body, "nonce": nonce}, token)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_value", "nonce")
    assert written() == (0, 0, 0)


@pytest.mark.django_db
def test_a_nonce_of_64_characters_is_accepted(desk_user, reg):
    client, token = csrf_client(desk_user)
    response = post(client, SCAN, {"barcode": reg.barcode, "nonce": "é" * 64}, token)
    assert response.status_code == 200
    assert ScanNonce.objects.get().nonce == "é" * 64


@pytest.mark.django_db
def test_an_invalid_slot_with_a_nonce_writes_nothing_and_stores_no_answer(desk_user, reg):
    client, token = csrf_client(desk_user)
    body = {"barcode": reg.barcode, "slot_id": 10**9, "nonce": "s-1"}
    assert post(client, SCAN, body, token).json()["error"]["code"] == "invalid_slot"
    assert written() == (0, 0, 0)


# --- over HTTP -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("url", [SCAN, CONFIRM])
def test_over_http_the_retry_is_the_same_status_and_the_same_bytes(desk_user, reg, url):
    client, token = csrf_client(desk_user)
    body = {"barcode": reg.barcode} if url == SCAN else {"registration_id": reg.pk}
    first = post(client, url, {**body, "nonce": "h-1"}, token)
    again = post(client, url, {**body, "nonce": "h-1"}, token)
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert first.json()["status"] == "confirmed_registration"
    assert written() == (2, 1, 1)


@pytest.mark.django_db
def test_over_http_a_reused_nonce_is_409_nonce_reused(desk_user, reg):
    client, token = csrf_client(desk_user)
    post(client, SCAN, {"barcode": reg.barcode, "nonce": "h-2"}, token)
    response = post(client, SCAN, {"barcode": "other", "nonce": "h-2"}, token)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "nonce_reused"
    assert written() == (2, 1, 1)


@pytest.mark.django_db
def test_without_a_nonce_nothing_is_stored_and_a_rescan_is_already_registered(desk_user, reg):
    client, token = csrf_client(desk_user)
    assert post(client, SCAN, {"barcode": reg.barcode}, token).json()["status"] == (
        "confirmed_registration"
    )
    assert post(client, SCAN, {"barcode": reg.barcode}, token).json()["status"] == (
        "already_registered"
    )
    assert written() == (3, 1, 0)


# --- statements --------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["open", "done"])
def test_the_nonce_adds_no_statement_to_a_scan(desk_user, state):
    """The answer to a nonce travels in the statement that writes the scan's audit row (an
    admission: the transition's): a scan with a nonce runs as many statements as one without."""
    counts = []
    for nonce in (None, "q-1"):
        reg = factories.RegistrationFactory(event=ongoing_event(), state=state)
        with CaptureQueriesContext(connection) as ctx:
            register_attendee(barcode=reg.barcode, actor=desk_user, nonce=nonce)
        # In a test the scan runs inside the test's transaction: with a nonce, a savepoint
        # keeps it readable after a lost write (two statements). Outside one there is none.
        counts.append(len([q for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"]]))
        if nonce is not None:
            stored = [q["sql"] for q in ctx.captured_queries if "desk_scannonce" in q["sql"]]
            assert len(stored) == 1 and 'INSERT INTO "events_eventauditlog"' in stored[0]
    assert counts[0] == counts[1]


# --- concurrency (real threads, one connection each) ------------------------------------------


def scan_from_threads(desk_user, barcodes_and_nonces, **kw):
    def scan(barcode, nonce):
        return lambda: register_attendee(barcode=barcode, actor=desk_user, nonce=nonce, **kw)

    return run_concurrently([scan(b, n) for b, n in barcodes_and_nonces])


@pytest.mark.django_db(transaction=True)
def test_two_desks_retrying_one_nonce_at_once_admit_once_and_read_the_same_answer(desk_user):
    reg = factories.RegistrationFactory(event=ongoing_event(), state="open")
    answers = scan_from_threads(desk_user, [(reg.barcode, "t-1"), (reg.barcode, "t-1")])
    assert answers[0] == answers[1]
    assert answers[0]["status"] == "confirmed_registration"
    assert written() == (2, 1, 1)
    assert SeatLedger.objects.get(event=reg.event, slot=None, ticket=None).used == 1


@pytest.mark.django_db(transaction=True)
def test_control_two_nonces_at_once_are_two_scans(desk_user):
    """Control for the test above: the threads do race to the ticket; with two nonces one is
    admitted and the other is `already_registered`, two scan rows."""
    reg = factories.RegistrationFactory(event=ongoing_event(), state="open")
    answers = scan_from_threads(desk_user, [(reg.barcode, "t-2"), (reg.barcode, "t-3")])
    assert sorted(a["status"] for a in answers) == ["already_registered", "confirmed_registration"]
    assert written() == (3, 1, 2)


@pytest.mark.django_db(transaction=True)
def test_one_nonce_at_once_on_an_admitted_ticket_writes_one_scan_row(desk_user):
    reg = factories.RegistrationFactory(event=ongoing_event(), state="done")
    answers = scan_from_threads(desk_user, [(reg.barcode, "t-4")] * 3)
    assert answers == [answers[0]] * 3
    assert answers[0]["status"] == "already_registered"
    assert written() == (1, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_one_nonce_at_once_with_two_barcodes_admits_one_and_refuses_the_other(desk_user):
    regs = [factories.RegistrationFactory(event=ongoing_event(), state="open") for _ in range(2)]

    def scan(barcode):
        def run():
            try:
                return register_attendee(barcode=barcode, actor=desk_user, nonce="t-5")["status"]
            except NonceReused as refused:
                return refused.code

        return run

    answers = run_concurrently([scan(r.barcode) for r in regs])
    assert sorted(answers) == ["confirmed_registration", "nonce_reused"]
    assert written() == (2, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_a_retry_sent_while_the_first_scan_still_runs_waits_for_it_and_replays_it(
    desk_user, monkeypatch
):
    """The desk gave up waiting (a client timeout) while the server still admitted the ticket;
    the retry runs on another connection while the first scan holds its transaction open: it
    waits on the nonce (or the ticket's lock) and answers the first answer."""
    import threading

    from desk.services import attendance

    reg = factories.RegistrationFactory(event=ongoing_event(), state="open")
    retry_started = threading.Event()
    answer = attendance._answer
    held = []

    def slow_answer(*args, **kw):
        if not held:  # the first scan, inside its transaction after the locks
            held.append(True)
            retry_started.wait(10)
            threading.Event().wait(0.3)  # let the retry reach the lock it waits on
        return answer(*args, **kw)

    monkeypatch.setattr(attendance, "_answer", slow_answer)

    def first():
        return register_attendee(barcode=reg.barcode, actor=desk_user, nonce="t-6")

    def retry():
        retry_started.set()
        return register_attendee(barcode=reg.barcode, actor=desk_user, nonce="t-6")

    answers = run_concurrently([first, retry])
    assert answers[0] == answers[1]
    assert answers[0]["status"] == "confirmed_registration"
    assert written() == (2, 1, 1)


# --- retention -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_sweep_deletes_the_nonces_older_than_the_retention_only(desk_user, reg):
    now = timezone.now()
    register_attendee(barcode=reg.barcode, actor=desk_user, nonce="old")
    register_attendee(barcode=reg.barcode, actor=desk_user, nonce="new")
    ScanNonce.objects.filter(nonce="old").update(created_at=now - RETENTION - timedelta(seconds=1))
    ScanNonce.objects.filter(nonce="new").update(created_at=now - RETENTION + timedelta(minutes=1))
    assert sweep_nonces(now=now) == 1
    assert list(ScanNonce.objects.values_list("nonce", flat=True)) == ["new"]
    assert sweep_nonces(now=now) == 0


def test_beat_runs_the_sweep_daily():
    from config.celery import app, merge_periodic_tasks

    merge_periodic_tasks()
    entries = [e for e in app.conf.beat_schedule.values() if e["task"] == "desk.sweep_nonces"]
    assert len(entries) == 1
