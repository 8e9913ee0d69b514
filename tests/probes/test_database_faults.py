"""Database faults on the real PostgreSQL: a dropped connection costs a 503 and a retry,
never a 500, a half-stored request or a double effect.

Backends are terminated with `pg_terminate_backend` from a separate connection, only on this
run's own test database (its name is checked to start with `test_`):

- killed inside a request (at a chosen statement: the first one, the registration insert, the
  audit insert, the order lock, …): the JSON APIs — intake, the sale seam, the desk scan and
  the catalog read — answer 503 `service_unavailable` with Retry-After, never a 500 or HTML;
  nothing of the request is stored; the retry (same Idempotency-Key, same webhook-id, same
  barcode) counts once — except the intake's and the seam's first statement, which test the
  kept connection themselves, reconnect and register (as /ics reads) once;
- killed between requests, as a failover drops every connection: the next request succeeds
  (CONN_MAX_AGE keeps one connection per thread, CONN_HEALTH_CHECKS tests it before its first
  query); without the health check one request answers 503 and the next succeeds;
- killed again and again under load (gunicorn as the Procfile runs it, client threads that
  retry on 503): every answer is JSON 200/201/503, every retried request counts once, the seat
  ledger equals a recount, every inbox row has its effect, every registration its audit row;
- killed mid-pass: the scheduler batch rolls back, the pass parks that scheduler and goes on,
  the next pass resumes from its cursor; every mail is queued once.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import psycopg
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.db import close_old_connections, connection
from django.test import Client
from django.utils import timezone
from django.utils.crypto import get_random_string

from events.models import (
    EventAuditLog,
    IntakeIdempotency,
    Mail,
    MailOutbox,
    Registration,
    RegistrationState,
)
from events.services import audit, nudge, registrations, scheduler, seats
from seams.models import InboxStatus, SeamInbox, SeamOrder
from tests import parallel
from tests.events import factories
from tests.events.config.test_ports import wire_ports
from tests.helpers import ROOT, database_url, snapshot
from tests.seams.host import URL as SEAM_URL
from tests.seams.host import new_secret, order_message, signed_headers, ticket_line

JSON = "application/json"
RETRY_AFTER = "5"
SCAN = "/desk/api/scan"
LIFTED_LIMITS = {"intake": (1_000_000_000, 60), "token": (1_000_000_000, 60)}


# --- killing backends -------------------------------------------------------------------------


def own_database() -> str:
    """This run's own database: the only one whose backends these tests terminate."""
    name = connection.settings_dict["NAME"]
    assert name.startswith("test_"), name
    return name


def side_connection() -> psycopg.Connection:
    """A connection of its own (not Django's): the one that terminates the others."""
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=own_database(),
        autocommit=True,
    )


TERMINATE_ALL = """
    SELECT pg_terminate_backend(pid, 5000)
      FROM pg_stat_activity
     WHERE datname = %s AND pid <> pg_backend_pid() AND backend_type = 'client backend'
"""
TERMINATE_ONE = """
    SELECT pg_terminate_backend(pid, 5000)
      FROM pg_stat_activity
     WHERE datname = %s AND pid = %s
"""


def terminate_all(side: psycopg.Connection | None = None) -> int:
    """Terminate every other backend of the test database (waiting until each is gone);
    returns how many were terminated."""
    own = side is None
    side = side or side_connection()
    try:
        rows = side.execute(TERMINATE_ALL, [own_database()]).fetchall()
    finally:
        if own:
            side.close()
    return sum(1 for (done,) in rows if done)


def terminate(pid: int) -> None:
    with side_connection() as side:
        rows = side.execute(TERMINATE_ONE, [own_database(), pid]).fetchall()
    assert rows == [(True,)], f"backend {pid} was not terminated: {rows}"


@contextmanager
def backend_killed_before(pattern: str, *, nth: int = 1) -> Iterator[list[str]]:
    """Terminate this thread's backend, from another connection, just before the `nth`
    statement matching `pattern` (a regex) runs: that statement meets a dead connection."""
    seen = 0
    fired: list[str] = []

    def wrapper(execute, sql, params, many, context):
        nonlocal seen
        if not fired and re.search(pattern, sql):
            seen += 1
            if seen == nth:
                fired.append(sql)
                terminate(context["connection"].connection.info.backend_pid)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield fired
    assert fired, f"no statement matched {pattern!r} (the fault was never injected)"


def request_finished() -> None:
    """What the WSGI handler does at the end of every request (the test client skips it): a
    connection that met an error and no longer answers is closed, the next query reconnects."""
    close_old_connections()


def assert_unavailable(response) -> None:
    assert response.status_code == 503, (response.status_code, response.content[:400])
    assert response["Content-Type"] == JSON
    assert response.json()["error"]["code"] == "service_unavailable"
    assert response["Retry-After"] == RETRY_AFTER


def audited(rows) -> bool:
    """Every registration of `rows` has at least one audit row (written in its transaction)."""
    ids = {r.pk for r in rows}
    with_rows = set(
        EventAuditLog.objects.filter(registration_id__in=ids).values_list(
            "registration_id", flat=True
        )
    )
    return ids == with_rows


@pytest.fixture
def seam_secret(settings) -> str:
    settings.EVENT_SEAM_SECRET = new_secret()
    return settings.EVENT_SEAM_SECRET


@pytest.fixture
def lifted_limits(settings) -> None:
    settings.EVENT_RATE_LIMITS = LIFTED_LIMITS


def ongoing_event(**fields):
    begin = timezone.now() - timedelta(hours=1)
    return factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8), **fields)


def desk_user():
    user = factories.UserFactory(username="door")
    user.groups.add(Group.objects.get(name="Event desk"))
    return user


# --- (a) + (c): a backend killed inside one request, then the retry -----------------------------

# The intake's first statement is not among them: it tests the kept connection itself and
# recovers (test_intake_whose_first_statement_meets_a_killed_backend_reconnects_once); the
# booking's inputs are read in it.
INTAKE_POINTS = {
    "booking-call": r"FROM events_book\(",
    "idempotency-insert": r'INSERT INTO "events_intakeidempotency"',
}


def post_intake(client: Client, event, body: dict, key: str):
    return client.post(
        f"/api/v1/events/{event.pk}/registrations",
        data=json.dumps(body),
        content_type=JSON,
        headers={"Idempotency-Key": key},
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", list(INTAKE_POINTS))
def test_intake_killed_mid_request_answers_503_writes_nothing_and_the_keyed_retry_counts_once(
    point, lifted_limits
):
    ticket = factories.TicketFactory(event=factories.EventFactory(seats_limited=True, seats_max=3))
    event = ticket.event
    client = Client(raise_request_exception=False)
    body = {"ticket_id": ticket.pk, "attendees": [{"name": "Ada", "email": "ada@example.org"}]}
    before = snapshot(event)

    with backend_killed_before(INTAKE_POINTS[point]):
        killed = post_intake(client, event, body, key="order-1")
    request_finished()

    assert_unavailable(killed)
    assert snapshot(event) == before
    assert not IntakeIdempotency.objects.filter(event=event).exists()

    retried = post_intake(client, event, body, key="order-1")
    assert retried.status_code == 201, retried.content
    assert "Idempotent-Replayed" not in retried
    again = post_intake(client, event, body, key="order-1")
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == retried.json()

    rows = list(Registration.objects.filter(event=event))
    assert [r.pk for r in rows] == [retried.json()["registrations"][0]["id"]]
    assert seats.audit(event=event) == []
    assert audited(rows)


@pytest.mark.django_db(transaction=True)
def test_intake_whose_first_statement_meets_a_killed_backend_reconnects_once(lifted_limits):
    """The backend dies just before the request's first statement, as when a failover dropped
    the kept connection between requests: the intake's first read finds the connection dead,
    replaces it and reads again (the check CONN_HEALTH_CHECKS' SELECT 1 did before), so the
    request registers once instead of answering 503; its keyed retry replays."""
    ticket = factories.TicketFactory(event=factories.EventFactory(seats_limited=True, seats_max=3))
    event = ticket.event
    client = Client(raise_request_exception=False)
    body = {"ticket_id": ticket.pk, "attendees": [{"name": "Ada", "email": "ada@example.org"}]}

    with backend_killed_before(r".") as fired:
        first = post_intake(client, event, body, key="order-1")
    request_finished()

    assert "events_event" in fired[0]  # the intake's read before the lock met the dead backend
    assert first.status_code == 201, first.content
    again = post_intake(client, event, body, key="order-1")
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    rows = list(Registration.objects.filter(event=event))
    assert [r.pk for r in rows] == [first.json()["registrations"][0]["id"]]
    assert seats.audit(event=event) == []
    assert audited(rows)


SEAM_POINTS = {
    # The message's first statement, after Django's health check found the connection alive.
    "inbox-insert": r"INSERT INTO seams_seaminbox",
    "order-lock": r"INSERT INTO seams_seamorder",
    "inputs-read": r"events_booking_inputs\(",
    "booking-call": r"FROM events_book\(",
}


def post_seam(client: Client, body: bytes, headers: dict[str, str]):
    return client.post(SEAM_URL, data=body, content_type=JSON, headers=headers)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", list(SEAM_POINTS))
def test_seam_killed_mid_message_answers_503_stores_nothing_and_the_host_retry_applies_once(
    point, seam_secret
):
    ticket = factories.TicketFactory(event=factories.EventFactory(seats_limited=True, seats_max=5))
    event = ticket.event
    client = Client(raise_request_exception=False)
    body = json.dumps(order_message(ref="SO7", lines=[ticket_line(ticket, 2, ref="SO7/1")]))
    signed = (body.encode(), signed_headers(body.encode(), secret=seam_secret, msg_id="msg_7"))
    before = snapshot(event)

    with backend_killed_before(SEAM_POINTS[point]):
        killed = post_seam(client, *signed)
    request_finished()

    assert_unavailable(killed)
    assert snapshot(event) == before
    assert not SeamInbox.objects.exists()
    assert not SeamOrder.objects.exists()

    # The host re-sends the same signed message (byte for byte), then once more.
    retried = post_seam(client, *signed)
    assert (retried.status_code, retried.json()["status"]) == (200, "applied")
    again = post_seam(client, *signed)
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")

    inbox = SeamInbox.objects.get()
    assert (inbox.message_id, inbox.status) == ("msg_7", InboxStatus.APPLIED)
    rows = list(Registration.objects.filter(sale_order_ref="SO7"))
    assert len(rows) == 2
    assert seats.audit(event=event) == []
    assert audited(rows)


def dropped_between_requests() -> None:
    """A failover between two requests: this thread's kept connection is terminated while no
    request runs, and the next request starts as the WSGI handler starts one (request_started:
    close_old_connections, which leaves Django's health check due)."""
    connection.ensure_connection()
    terminate(connection.connection.info.backend_pid)
    close_old_connections()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("health_checks", [True, False], ids=["health-checks", "no-health-checks"])
def test_seam_message_after_its_kept_connection_was_dropped(
    seam_secret, monkeypatch, health_checks
):
    """The kept connection was dropped between requests (a failover): with CONN_HEALTH_CHECKS
    Django tests it when the message's transaction opens, replaces it, and the message is
    recorded and applied once on the new one. Without health checks it answers 503 and stores
    nothing; the host's retry applies it."""
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", health_checks)
    connection.ensure_connection()  # Django reads the setting when it connects: the kept one
    monkeypatch.setattr(connection, "health_check_enabled", health_checks)
    ticket = factories.TicketFactory(event=factories.EventFactory(seats_limited=True, seats_max=5))
    client = Client(raise_request_exception=False)
    body = json.dumps(order_message(ref="SO8", lines=[ticket_line(ticket, 2, ref="SO8/1")]))
    signed = (body.encode(), signed_headers(body.encode(), secret=seam_secret, msg_id="msg_8"))

    dropped_between_requests()
    first = post_seam(client, *signed)
    request_finished()

    if health_checks:
        assert (first.status_code, first.json()["status"]) == (200, "applied"), first.content
    else:
        assert_unavailable(first)
        assert not SeamInbox.objects.exists()
        retried = post_seam(client, *signed)
        assert (retried.status_code, retried.json()["status"]) == (200, "applied")
    again = post_seam(client, *signed)
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    inbox = SeamInbox.objects.get()
    assert (inbox.message_id, inbox.status) == ("msg_8", InboxStatus.APPLIED)
    rows = list(Registration.objects.filter(sale_order_ref="SO8"))
    assert len(rows) == 2
    assert seats.audit(event=ticket.event) == []
    assert audited(rows)


@pytest.mark.django_db(transaction=True)
def test_catalog_read_killed_answers_503_and_the_next_read_answers(seam_secret):
    ticket = factories.TicketFactory(
        event=factories.EventFactory(seats_limited=True, seats_max=5), product_ref="P-1"
    )
    client = Client(raise_request_exception=False)
    url = f"/api/v1/catalog/linked-products?event={ticket.event_id}"
    with backend_killed_before(r"."):
        killed = client.get(url)
    request_finished()
    assert_unavailable(killed)
    assert client.get(url).status_code == 200


DESK_POINTS = {
    # The session read, with the user, is the request's first statement: a backend gone before
    # it is a kept connection dropped between requests, replaced (the next test). The lookup
    # comes second, in the view.
    "lookup": r'FROM "events_registration"',
    "state-update": r'UPDATE "events_registration"',
    "audit-insert": r'INSERT INTO "events_eventauditlog"',
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", list(DESK_POINTS))
def test_desk_scan_killed_answers_503_admits_nobody_and_the_rescan_admits_once(point):
    reg = factories.RegistrationFactory(event=ongoing_event())
    client = Client(raise_request_exception=False)
    client.force_login(desk_user())
    scan = json.dumps({"barcode": reg.barcode, "event_id": reg.event_id})
    before = snapshot(reg.event)

    with backend_killed_before(DESK_POINTS[point]):
        killed = client.post(SCAN, data=scan, content_type=JSON)
    request_finished()

    assert_unavailable(killed)
    assert snapshot(reg.event) == before  # still open, no audit row, the ledger unchanged

    first = client.post(SCAN, data=scan, content_type=JSON)
    assert (first.status_code, first.json()["status"]) == (200, "confirmed_registration")
    second = client.post(SCAN, data=scan, content_type=JSON)
    assert (second.status_code, second.json()["status"]) == (200, "already_registered")

    reg.refresh_from_db()
    assert reg.state == RegistrationState.DONE
    admissions = EventAuditLog.objects.filter(
        registration=reg, verb="registration.scanned", data__status="confirmed_registration"
    )
    assert admissions.count() == 1
    assert seats.audit(event=reg.event) == []


@pytest.mark.django_db(transaction=True)
def test_desk_scan_after_its_kept_connection_was_dropped_admits_once():
    """The kept connection was dropped between requests (a failover): the request's first
    statement, the session read, tests it in place of Django's health check (CONN_HEALTH_CHECKS;
    `statements.first_rows`) and replaces it, so the scan admits once instead of answering 503;
    the rescan finds the ticket used. The same when the backend goes just before that read."""
    reg = factories.RegistrationFactory(event=ongoing_event())
    client = Client(raise_request_exception=False)
    client.force_login(desk_user())
    scan = json.dumps({"barcode": reg.barcode, "event_id": reg.event_id})

    dropped_between_requests()
    first = client.post(SCAN, data=scan, content_type=JSON)
    request_finished()
    assert (first.status_code, first.json()["status"]) == (200, "confirmed_registration")

    other = factories.RegistrationFactory(event=reg.event)
    with backend_killed_before(r'FROM "events_staff_session"'):
        answer = client.post(SCAN, data=json.dumps({"barcode": other.barcode}), content_type=JSON)
    request_finished()
    assert (answer.status_code, answer.json()["status"]) == (200, "confirmed_registration")

    second = client.post(SCAN, data=scan, content_type=JSON)
    assert (second.status_code, second.json()["status"]) == (200, "already_registered")
    admissions = EventAuditLog.objects.filter(
        registration=reg, verb="registration.scanned", data__status="confirmed_registration"
    )
    assert admissions.count() == 1
    assert seats.audit(event=reg.event) == []


# --- (d): the scheduler pass killed mid-batch ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_scheduler_pass_killed_mid_batch_resumes_and_queues_every_mail_once(settings):
    wire_ports(settings, batch=10)
    factories.MessageTemplateFactory(ref="event-reminder")
    begin = timezone.now() + timedelta(days=10)

    def reminder(days_before: int) -> Mail:
        event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8))
        return factories.MailFactory(
            event=event, scheduled_date=begin - timedelta(days=days_before)
        )

    killed, other = reminder(2), reminder(1)  # `killed` is due first: the pass meets it first
    attendees = [factories.RegistrationFactory(event=killed.event) for _ in range(25)]
    others = [factories.RegistrationFactory(event=other.event) for _ in range(5)]
    now = begin - timedelta(hours=12)

    def outbox(mail: Mail) -> Counter:
        return Counter(
            MailOutbox.objects.filter(scheduler=mail).values_list("registration_id", flat=True)
        )

    with mock.patch.object(nudge, "publish"):  # no Celery task leaves this test
        # Batch 2 of `killed` has written its 10 outbox rows when its audit insert meets a
        # terminated backend.
        with backend_killed_before(r'INSERT INTO "events_eventauditlog"', nth=2):
            first = scheduler.run_pass(now=now)
        request_finished()

        assert (first.errors, first.messages_queued) == (1, 10 + 5)
        killed.refresh_from_db()
        assert killed.error_message.startswith("[OperationalError]"), killed.error_message
        assert (killed.mail_count_done, killed.mail_done) == (10, False)
        assert outbox(killed) == Counter(r.pk for r in attendees[:10])  # batch 2 rolled back
        assert outbox(other) == Counter(r.pk for r in others)  # the pass went on

        second = scheduler.run_pass(now=now)
        assert (second.errors, second.messages_queued) == (0, 15)
        third = scheduler.run_pass(now=now)
        assert third.messages_queued == 0

    killed.refresh_from_db()
    assert (killed.mail_count_done, killed.mail_done, killed.error_message) == (25, True, "")
    assert outbox(killed) == Counter(r.pk for r in attendees)  # each attendee once
    assert outbox(other) == Counter(r.pk for r in others)
    verbs = Counter(
        EventAuditLog.objects.filter(event=killed.event, verb__startswith="scheduler.").values_list(
            "verb", flat=True
        )
    )
    assert verbs["scheduler.error"] == 1
    assert verbs["scheduler.recovered"] == 1


# --- the real server ----------------------------------------------------------------------------


def _free_port() -> int:
    return parallel.free_port()  # this xdist worker's own band (tests/parallel.py)


class Server:
    """gunicorn as the Procfile runs it (`--config config/gunicorn.py`), on the test database,
    with a settings module that lifts the per-client rate limits (every client is 127.0.0.1)."""

    def __init__(self, tmp: Path, *, secret: str, extra_settings: str = "", args=()) -> None:
        self.port = _free_port()
        (tmp / "faults_settings.py").write_text(
            "from config.settings import *  # noqa: F403\n"
            f"EVENT_RATE_LIMITS = {LIFTED_LIMITS!r}\n{extra_settings}"
        )
        self.log = tmp / "gunicorn.log"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "faults_settings",
            "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
            "DATABASE_URL": database_url(),
            "EVENT_SEAM_SECRET": secret,
            "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
        }
        env.pop("TEST_DB_SUFFIX", None)
        gunicorn = Path(sys.executable).with_name("gunicorn")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(gunicorn),
                    "config.wsgi:application",
                    "--config",
                    "config/gunicorn.py",
                    "--bind",
                    f"127.0.0.1:{self.port}",
                    *args,
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{self.log.read_text()[-3000:]}")
            try:
                self.call("GET", "/healthz")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # a server booting, not a race under test

    def call(self, method: str, path: str, body: bytes | None = None, headers=None):
        """One request on a fresh connection: (status, lower-cased headers, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return (
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def serve(tmp_path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(**kwargs: Any) -> Server:
        server = Server(tmp_path, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
    connection.close()  # this thread's backend was terminated too: reconnect for the teardown


def intake_call(server: Server, event, ticket, key: str, name: str):
    body = {"ticket_id": ticket.pk, "attendees": [{"name": name, "email": "a@example.org"}]}
    return server.call(
        "POST",
        f"/api/v1/events/{event.pk}/registrations",
        json.dumps(body).encode(),
        {"Content-Type": JSON, "Idempotency-Key": key},
    )


# --- (b): a failover-like restart of the connections -------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("health_checks", [True, False], ids=["health-checks", "no-health-checks"])
def test_the_request_after_every_connection_was_terminated(serve, seam_secret, health_checks):
    ticket = factories.TicketFactory(event=factories.EventFactory(seats_limited=True, seats_max=9))
    event = ticket.event
    extra = "" if health_checks else 'DATABASES["default"]["CONN_HEALTH_CHECKS"] = False\n'
    # One thread: the request after the kill is served on the connection the kill dropped.
    server = serve(secret=seam_secret, extra_settings=extra, args=("--workers=1", "--threads=1"))

    assert intake_call(server, event, ticket, "k1", "Ada")[0] == 201
    assert terminate_all() >= 1  # the server's kept connection (CONN_MAX_AGE), and this one
    status, headers, raw = intake_call(server, event, ticket, "k2", "Bob")
    if health_checks:
        assert status == 201, raw  # the kept connection was tested first and replaced
    else:
        # Its first query met the dead connection: a clean 503, and the connection is dropped
        # at the end of that request, so the retry gets a new one.
        assert (status, headers["content-type"], headers["retry-after"]) == (503, JSON, "5")
        assert json.loads(raw)["error"]["code"] == "service_unavailable"
        status, headers, raw = intake_call(server, event, ticket, "k2", "Bob")
        assert status == 201, raw
        assert "idempotent-replayed" not in headers  # the 503 had stored nothing
    assert intake_call(server, event, ticket, "k3", "Cy")[0] == 201

    connection.close()
    assert sorted(Registration.objects.filter(event=event).values_list("name", flat=True)) == [
        "Ada",
        "Bob",
        "Cy",
    ]
    assert seats.audit(event=event) == []


# --- (a) + (c) under load -----------------------------------------------------------------------

LOAD_DEADLINE = 30.0  # seconds of load at most
MIN_UNAVAILABLE = 2  # 503s each route must have answered (kills landed inside its requests)
MIN_DONE = 8  # logical requests each route must have completed
MAX_ATTEMPTS = 60
DESK_ATTENDEES = 400  # more than the desk clients can scan before the others are done
KILL_EVERY = 0.01  # seconds between two rounds of terminations


class Load:
    """Client threads sending logical requests, each retried on 503 until it is answered."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.attempts: list[tuple[str, str, int, dict, bytes]] = []
        self.finals: dict[str, dict[str, tuple[int, dict, bytes]]] = defaultdict(dict)
        self.retried: dict[str, set[str]] = defaultdict(set)  # items that met a 503 first
        self.failures: list[str] = []
        self.stop = threading.Event()

    def send(self, kind: str, item: str, attempt: Callable[[], tuple[int, dict, bytes]]) -> None:
        for _ in range(MAX_ATTEMPTS):
            try:
                status, headers, raw = attempt()
            except OSError as exc:
                with self.lock:
                    self.failures.append(f"{kind} {item}: {exc!r}")
                return
            with self.lock:
                self.attempts.append((kind, item, status, headers, raw))
                if status != 503:
                    self.finals[kind][item] = (status, headers, raw)
                    return
                self.retried[kind].add(item)
            time.sleep(0.01)  # a client would honour Retry-After; the test only needs a retry
        with self.lock:
            self.failures.append(f"{kind} {item}: still 503 after {MAX_ATTEMPTS} attempts")

    def unavailable(self, kind: str) -> int:
        with self.lock:
            return sum(1 for a in self.attempts if a[0] == kind and a[2] == 503)

    def done(self, kind: str) -> int:
        with self.lock:
            return len(self.finals[kind])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_backends_terminated_under_load_fail_cleanly_and_every_retry_counts_once(
    serve, seam_secret
):
    # The world: an intake event, a seam ticket, an ongoing desk event with attendees.
    intake_ticket = factories.TicketFactory(
        event=factories.EventFactory(seats_limited=True, seats_max=10_000)
    )
    intake_event = intake_ticket.event
    seam_ticket = factories.TicketFactory(
        event=factories.EventFactory(seats_limited=True, seats_max=10_000)
    )
    desk_event = ongoing_event(seats_limited=True, seats_max=10_000)
    attendees = registrations.register(
        event=desk_event,
        attendees=[{"name": f"Guest {n}"} for n in range(DESK_ATTENDEES)],
        actor=audit.SYSTEM,
    )
    barcodes = [r.barcode for r in attendees]
    login = Client()
    login.force_login(desk_user())
    session = login.cookies[django_settings.SESSION_COOKIE_NAME].value
    csrf = get_random_string(32)
    desk_headers = {
        "Content-Type": JSON,
        "Cookie": f"{django_settings.SESSION_COOKIE_NAME}={session}; csrftoken={csrf}",
        "X-CSRFToken": csrf,
    }

    server = serve(secret=seam_secret)
    load = Load()
    kills = [0]

    def killer() -> None:
        with side_connection() as side:
            while not load.stop.is_set():
                kills[0] += terminate_all(side)
                time.sleep(KILL_EVERY)

    def intake_client(index: int) -> None:
        n = 0
        while not load.stop.is_set():
            key = f"load-{index}-{n}"
            load.send(
                "intake",
                key,
                lambda key=key: intake_call(server, intake_event, intake_ticket, key, key),
            )
            n += 1

    def seam_client(index: int) -> None:
        n = 0
        while not load.stop.is_set():
            ref = f"SO-{index}-{n}"
            body = json.dumps(
                order_message(ref=ref, lines=[ticket_line(seam_ticket, 2, ref=f"{ref}/1")])
            ).encode()

            def attempt(body=body, msg_id=f"msg-{ref}"):
                # The host's retry: the same message id and body, signed at this attempt.
                headers = {
                    "Content-Type": JSON,
                    **signed_headers(body, secret=seam_secret, msg_id=msg_id),
                }
                return server.call("POST", SEAM_URL, body, headers)

            load.send("seam", ref, attempt)
            n += 1

    queue = list(barcodes)
    queue_lock = threading.Lock()

    def desk_client() -> None:
        while not load.stop.is_set():
            with queue_lock:
                if not queue:
                    return
                barcode = queue.pop()
            body = json.dumps({"barcode": barcode, "event_id": desk_event.pk}).encode()
            load.send(
                "desk", barcode, lambda body=body: server.call("POST", SCAN, body, desk_headers)
            )

    clients = [
        *(threading.Thread(target=intake_client, args=(i,)) for i in range(2)),
        *(threading.Thread(target=seam_client, args=(i,)) for i in range(2)),
        *(threading.Thread(target=desk_client) for _ in range(2)),
    ]
    kill_thread = threading.Thread(target=killer)
    kinds = ("intake", "seam", "desk")
    kill_thread.start()
    for thread in clients:
        thread.start()
    deadline = time.monotonic() + LOAD_DEADLINE
    while time.monotonic() < deadline and not all(
        load.unavailable(k) >= MIN_UNAVAILABLE and load.done(k) >= MIN_DONE for k in kinds
    ):
        time.sleep(0.1)  # polling the counters of a load that runs for seconds
    load.stop.set()
    for thread in [*clients, kill_thread]:
        thread.join(120)
    assert not any(t.is_alive() for t in [*clients, kill_thread]), "a client is stuck"
    connection.close()  # this thread's backend was terminated too

    # Every answer, first tries and retries alike: JSON, and only 200/201 or a clean 503.
    assert load.failures == []
    assert kills[0] > 0
    statuses = Counter((kind, status) for kind, _, status, _, _ in load.attempts)
    for kind, _, status, headers, raw in load.attempts:
        assert headers.get("content-type") == JSON, (kind, status, raw[:300])
        assert status in ({201, 503} if kind == "intake" else {200, 503}), (kind, status, raw)
        if status == 503:
            assert json.loads(raw)["error"]["code"] == "service_unavailable", raw
            assert headers.get("retry-after") == RETRY_AFTER
    for kind in kinds:
        # Kills landed inside requests of every route (else this test proved nothing).
        assert statuses[(kind, 503)] >= 1, (statuses, kills[0])
        assert load.done(kind) >= 1, statuses

    # Intake: one booking per Idempotency-Key, whatever the number of attempts.
    finals = load.finals["intake"]
    answered = {json.loads(raw)["registrations"][0]["id"] for _, _, raw in finals.values()}
    rows = list(Registration.objects.filter(event=intake_event))
    assert {r.pk for r in rows} == answered
    assert len(rows) == len(finals)
    assert IntakeIdempotency.objects.filter(event=intake_event).count() == len(finals)
    replayed = {item for item, (_, h, _) in finals.items() if "idempotent-replayed" in h}
    assert replayed <= load.retried["intake"]  # only a request that met a 503 is replayed
    assert seats.audit(event=intake_event) == []
    assert audited(rows)

    # Seam: one inbox row per message id, each with its effect (2 registrations per order).
    finals = load.finals["seam"]
    outcome = {ref: json.loads(raw)["status"] for ref, (_, _, raw) in finals.items()}
    assert set(outcome.values()) <= {"applied", "duplicate"}, outcome
    assert {ref for ref, s in outcome.items() if s == "duplicate"} <= load.retried["seam"]
    inbox = SeamInbox.objects.filter(message_id__in=[f"msg-{ref}" for ref in finals])
    assert Counter(inbox.values_list("message_id", flat=True)) == Counter(
        f"msg-{ref}" for ref in finals
    )
    assert set(inbox.values_list("status", flat=True)) == {InboxStatus.APPLIED}
    assert SeamInbox.objects.count() == len(finals)
    per_order = Counter(
        Registration.objects.filter(event=seam_ticket.event).values_list(
            "sale_order_ref", flat=True
        )
    )
    assert per_order == Counter(dict.fromkeys(finals, 2))
    assert SeamOrder.objects.filter(order_ref__in=list(finals)).count() == len(finals)
    assert seats.audit(event=seam_ticket.event) == []
    assert audited(Registration.objects.filter(event=seam_ticket.event))

    # Desk: every scanned attendee admitted once; the others untouched.
    finals = load.finals["desk"]
    outcome = {code: json.loads(raw)["status"] for code, (_, _, raw) in finals.items()}
    assert set(outcome.values()) <= {"confirmed_registration", "already_registered"}, outcome
    assert {c for c, s in outcome.items() if s == "already_registered"} <= load.retried["desk"]
    states = dict(Registration.objects.filter(event=desk_event).values_list("barcode", "state"))
    assert {c for c, s in states.items() if s == RegistrationState.DONE} == set(finals)
    admissions = Counter(
        EventAuditLog.objects.filter(
            event=desk_event, verb="registration.scanned", data__status="confirmed_registration"
        ).values_list("registration__barcode", flat=True)
    )
    assert admissions == Counter(dict.fromkeys(finals, 1))
    assert seats.audit(event=desk_event) == []
