"""Probe: the waiting list under real concurrency (freed seats, accepts, expiry) and a real
SIGKILLed worker. Real threads (one database connection each) released by one barrier, under
`django_db(transaction=True)`; a real Celery worker (solo pool) on the test database and a Redis
of the test's own.

- Freed seats: ten seats freed at once (ten cancellations in ten threads, each followed by an offer
  pass, with five more threads running offer passes from the start) while fifty people wait, twenty
  times: exactly ten offers, to the first ten entries in joining order, each seat held once (ledger
  `held` = offers, `seats.audit` empty), one mail per offer, and the public intake answers
  `sold_out` during the offer window. Control: a pass that reads the free seats without the Event
  lock and holds without the ledger's check offers one seat twice.
- Accepts: an offer accepted twice at once registers once (both answers name the same
  registration); an accept racing the expiry pass either registers or expires, never both.
- A killed worker: a worker SIGKILLed between holding a seat and queuing the offer mail (it is
  parked on the outbox insert: the test holds an uncommitted row with the same idempotency key)
  leaves nothing behind; the next pass (beat's task, on a new worker) offers and mails exactly once.
"""

from __future__ import annotations

import functools
import subprocess
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from unittest import mock

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from events.errors import DomainError
from events.models import (
    EventAuditLog,
    MailOutbox,
    OutboxState,
    Registration,
    SeatLedger,
    WaitlistEntry,
    WaitlistState,
)
from events.services import (
    capability,
    intake,
    nudge,
    registrations,
    seats,
    waitlist,
    waitlist_nudge,
)
from tests.events import factories
from tests.events.mail.test_delivery import SmtpServer
from tests.events.redis_server import own_redis  # noqa: F401 — a fixture: the test's own Redis
from tests.helpers import database_url, run_concurrently, start_celery_worker

pytestmark = pytest.mark.django_db(transaction=True)

W = WaitlistState
REPEATS = 20
FREED = 10
WAITING = 50
EXTRA_PASSES = 5


@pytest.fixture(autouse=True)
def _no_celery(request):
    """Nudges stay in the test: the passes run in the test's threads (the killed-worker probe
    publishes its tasks itself)."""
    if "own_redis" in request.fixturenames:
        yield
        return
    with mock.patch.object(nudge, "publish"):
        yield


def held(event) -> int:
    row = SeatLedger.objects.filter(event=event, slot=None, ticket=None).first()
    return row.held if row else 0


def sold_out_with_list(actor, *, seats_max: int, waiting: int):
    event = factories.EventFactory(seats_limited=True, seats_max=seats_max)
    regs = [
        registrations.register(
            event=event,
            attendees=[{"name": f"Holder {i}", "email": f"holder{i}@example.org"}],
            actor=actor,
        )[0]
        for i in range(seats_max)
    ]
    entries = [
        waitlist.join(
            event=event, name=f"Waiting {i}", email=f"waiting{i}@example.org", actor="public"
        ).entry
        for i in range(waiting)
    ]
    return event, regs, entries


def intake_answer(event) -> str:
    try:
        intake.submit(
            event_id=event.pk,
            payload={"attendees": [{"name": "Late Comer", "email": "late@example.org"}]},
            client="198.51.100.9",
        )
    except DomainError as error:
        return error.code
    return "registered"


# --- ten seats freed at once, fifty waiting ----------------------------------------------------


def test_ten_seats_freed_at_once_go_to_the_first_ten_entries_exactly_once(actor):
    for round_ in range(REPEATS):
        _ten_freed_seats(actor, round_)


def _ten_freed_seats(actor, round_: int) -> None:
    event, regs, entries = sold_out_with_list(actor, seats_max=FREED + 5, waiting=WAITING)

    def offer_pass():
        return [e.pk for e in waitlist.offer_freed_seats(event=event)]

    def cancel_then_pass(reg):
        registrations.cancel(registration=reg, actor=actor)
        return offer_pass()

    workers = [functools.partial(cancel_then_pass, reg) for reg in regs[:FREED]]
    workers += [offer_pass] * EXTRA_PASSES
    results = run_concurrently(workers)

    first = [e.pk for e in entries[:FREED]]
    offered_by_passes = Counter(pk for result in results for pk in result)
    assert offered_by_passes == Counter(first), (round_, offered_by_passes)  # each once
    offered = list(
        WaitlistEntry.objects.filter(event=event, state=W.OFFERED)
        .order_by("pk")
        .values_list("pk", "offer_version")
    )
    assert offered == [(pk, 1) for pk in first], round_
    assert WaitlistEntry.objects.filter(event=event, state=W.WAITING).count() == WAITING - FREED
    # no seat held twice: the ledger holds one seat per offer and equals a recount
    assert held(event) == FREED
    assert seats.audit(event=event) == [], round_
    assert seats.event_summary(event=event).available == 0
    # one mail per offer, one audit row per offer
    assert sorted(
        MailOutbox.objects.filter(idempotency_key__startswith="waitlist-offer-").values_list(
            "idempotency_key", flat=True
        )
    ) == sorted(f"waitlist-offer-w{pk}-v1" for pk in first)
    assert EventAuditLog.objects.filter(event=event, verb="waitlist.offered").count() == FREED
    # during the offer window the public intake answers sold_out
    assert intake_answer(event) == "sold_out"
    MailOutbox.objects.all().delete()  # the next round counts its own


def test_control_a_pass_without_the_lock_offers_one_seat_twice(actor):
    """Why the pass takes the Event lock and holds through the ledger's check: two naive passes
    that read the free seats unlocked, then hold and offer, give one free seat twice."""
    event, regs, entries = sold_out_with_list(actor, seats_max=2, waiting=3)
    registrations.cancel(registration=regs[0], actor=actor)
    between = threading.Barrier(2)

    def naive_pass():
        free = seats.availability(event=event)
        nxt = WaitlistEntry.objects.filter(event=event, state=W.WAITING).order_by("pk").first()
        between.wait(timeout=30)  # both read before either writes
        if free and free > 0:
            seats.apply(event=event, holds=[seats.Hold(None, None, held=1)])
            WaitlistEntry.objects.filter(pk=nxt.pk).update(
                state=W.OFFERED, offered_at=timezone.now(), expires_at=timezone.now()
            )

    run_concurrently([naive_pass, naive_pass])

    assert held(event) == 2  # one free seat, held twice
    assert seats.event_summary(event=event).available == -1
    assert seats.audit(event=event) != []  # two holds, one offered entry


# --- an offer accepted twice; an accept racing the expiry --------------------------------------


def offered_entry(actor):
    event, regs, entries = sold_out_with_list(actor, seats_max=2, waiting=2)
    registrations.cancel(registration=regs[0], actor=actor)
    (entry,) = waitlist.offer_freed_seats(event=event)
    return event, entry, entries


def test_an_offer_accepted_twice_at_once_registers_once(actor):
    for _ in range(REPEATS):
        _accept_twice(actor)


def _accept_twice(actor) -> None:
    event, entry, _ = offered_entry(actor)
    token = capability.mint(purpose="offer", subject=entry)
    before = Registration.objects.filter(event=event).count()

    results = run_concurrently([functools.partial(waitlist.accept, token=token)] * 2)

    assert sorted(r.created for r in results) == [False, True]
    assert results[0].registration.pk == results[1].registration.pk
    assert Registration.objects.filter(event=event).count() == before + 1
    entry.refresh_from_db()
    assert (entry.state, entry.registration_id) == (W.ACCEPTED, results[0].registration.pk)
    assert held(event) == 0 and seats.audit(event=event) == []
    assert EventAuditLog.objects.filter(event=event, verb="waitlist.accepted").count() == 1


def test_an_accept_racing_the_expiry_registers_or_expires_never_both(actor):
    outcomes = Counter(_accept_or_expire(actor) for _ in range(REPEATS))
    print(f"accept vs expiry over {REPEATS} rounds: {dict(outcomes)}")


def _accept_or_expire(actor) -> str:
    event, entry, entries = offered_entry(actor)
    token = capability.mint(purpose="offer", subject=entry)
    # the accept's clock is a moment before the window ends, the pass's at its end
    just_before = entry.expires_at - timedelta(microseconds=1)

    def accept():
        try:
            return waitlist.accept(token=token, now=just_before).created
        except DomainError as error:
            return error.code

    results = run_concurrently(
        [accept, functools.partial(waitlist.expire_offers, now=entry.expires_at)]
    )

    entry.refresh_from_db()
    nxt = WaitlistEntry.objects.get(pk=entries[1].pk)
    if results[0] is True:
        assert (entry.state, results[1], nxt.state, held(event)) == (W.ACCEPTED, 0, W.WAITING, 0)
    else:
        assert (entry.state, results[0], results[1]) == (W.EXPIRED, "capability_refused", 1)
        assert (nxt.state, held(event)) == (W.OFFERED, 1)  # the seat went to the next
    assert seats.audit(event=event) == []
    assert Registration.objects.filter(event=event, state="open").count() == (
        1 + (entry.state == W.ACCEPTED)
    )
    return entry.state


# --- a worker killed between the hold and the mail ---------------------------------------------

DEADLINE = 40.0  # seconds for any wait on another process: a stuck worker fails the test


def _wait(done, what: str, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, (
            f"{what}: not within {DEADLINE}s; sessions: {_sessions()}\n{log.read_text()}"
        )
        time.sleep(0.02)  # polling another process, with a deadline


def _sessions() -> list:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, wait_event_type, wait_event, left(query, 120)"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        return cursor.fetchall()


def _parked_on_the_outbox() -> int | None:
    """The backend pid of a session waiting for a lock on its outbox INSERT, if any."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            " AND query LIKE 'INSERT INTO \"events_mailoutbox\"%%'"
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0] > 0


@pytest.mark.slow
def test_a_worker_killed_between_the_hold_and_the_mail_loses_nothing(
    actor,
    own_redis,  # noqa: F811 — the imported fixture, by name
    free_port,
    tmp_path,
):
    with mock.patch.object(nudge, "publish"):  # the setup's own nudges stay here
        event, regs, entries = sold_out_with_list(actor, seats_max=2, waiting=2)
        registrations.cancel(registration=regs[0], actor=actor)
    first = entries[0]
    key = f"waitlist-offer-w{first.pk}-v1"  # the key of the mail its offer will queue
    smtp = SmtpServer(free_port).start()
    env = {
        "CACHE_URL": own_redis.url.replace("redis://", "rediscache://") + "/1",
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp.port}",
        "DEFAULT_FROM_EMAIL": "events@example.org",
        "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
        "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
        "EVENT_PUBLIC_URL": "http://127.0.0.1:8000",
    }
    procs: list[subprocess.Popen] = []
    # Another session inserts the outbox row of that key and keeps its transaction open: the
    # worker's own INSERT (ON CONFLICT on that unique key) waits for it, after the hold.
    blocker = psycopg.connect(database_url())
    try:
        blocker.execute(
            "INSERT INTO events_mailoutbox (idempotency_key, message_id, recipient, subject,"
            " body_text, body_html, state, attempts, next_attempt_at, last_error, created_at)"
            " VALUES (%s, %s, 'x@example.org', 'blocker', '', '', 'queued', 0, now(), '', now())",
            [key, f"<blocker-{first.pk}@test>"],
        )
        celery_app.control.purge()
        log = tmp_path / "worker-0.log"
        with log.open("wb") as out:
            procs.append(start_celery_worker(out, name="waitlist-killed", env=env))
        celery_app.send_task(waitlist_nudge.OFFER_TASK, args=[event.pk])
        _wait(lambda: _parked_on_the_outbox() is not None, "the pass parks on its mail", log)
        pid = _parked_on_the_outbox()
        # the hold is made in the pass's open transaction: nothing of it is visible yet
        assert held(event) == 0

        procs[0].kill()  # SIGKILL between the hold and the mail
        procs[0].wait(timeout=20)
    finally:
        # A backend waiting for a lock does not read its socket: once the blocker is gone its
        # INSERT ends, it finds its client dead and rolls back (no COMMIT can come any more).
        blocker.rollback()
        blocker.close()
    _wait(lambda: not _alive(pid), "PostgreSQL ends the dead worker's session", log)

    # nothing of the killed pass survived: no hold, no offer, no mail, no audit row
    assert held(event) == 0 and seats.audit(event=event) == []
    assert list(WaitlistEntry.objects.order_by("pk").values_list("state", flat=True)) == [
        W.WAITING,
        W.WAITING,
    ]
    assert not MailOutbox.objects.exists()
    assert not EventAuditLog.objects.filter(verb="waitlist.offered").exists()

    try:
        log = tmp_path / "worker-1.log"
        with log.open("wb") as out:
            procs.append(start_celery_worker(out, name="waitlist-next", env=env))
        celery_app.send_task(waitlist.PASS_TASK)  # beat's next pass

        def delivered() -> bool:
            return MailOutbox.objects.filter(state=OutboxState.SENT).exists()

        _wait(delivered, "the next pass offers and the mail is delivered", log)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=20)
        smtp.stop()

    first.refresh_from_db()
    assert (first.state, first.offer_version) == (W.OFFERED, 1)
    assert WaitlistEntry.objects.get(pk=entries[1].pk).state == W.WAITING
    assert held(event) == 1 and seats.audit(event=event) == []
    (mail,) = MailOutbox.objects.all()
    assert (mail.idempotency_key, mail.recipient) == (key, first.email)
    assert len(smtp.inbox.messages) == 1  # mailed exactly once
    assert smtp.inbox.message_ids() == [mail.message_id]
    assert EventAuditLog.objects.filter(verb="waitlist.offered").count() == 1
    # a further pass finds nothing to do
    with mock.patch.object(nudge, "publish"):
        assert waitlist.offer_freed_seats(event=event) == []
