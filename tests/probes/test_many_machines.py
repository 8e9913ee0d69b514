"""Probe: more than one machine, simulated here (every promise must hold when web, worker
and beat processes run side by side, beat included twice by mistake).

Three web processes (gunicorn as the Procfile runs it, one worker each, each on its own port),
three Celery workers and two `celery beat` processes — the misconfiguration of two hosts that
both run beat — on the test database and a Redis of the test's own (broker and cache), with a
local SMTP server and the local SMS gateway. The beats' intervals are shortened to a couple of
seconds (the project's 60 s would not tick inside the test) and every process has the same
configuration, as machines deployed from one image would.

Client threads in the test spread mixed traffic over the three web ports for TRAFFIC seconds:
- intake registrations (one or two attendees, each with a phone) on a limited event close to
  sold out and on a large one; every fourth request is sent to two ports at once under the
  same Idempotency-Key (a client retrying against another machine);
- signed sale-seam webhooks, each message posted to two ports at once (sometimes a third time
  later) under its webhook-id; some orders take a contested booth; some applied orders are
  cancelled by a later version;
- desk scans of an ongoing event's attendees, each barcode scanned at two ports at once.
Both events have an after_sub mail and an after_sub SMS (the confirmation) and the near sold
out one an SMS reminder; a lead rule applies to every event. The workers queue and deliver
what the web processes' registrations and the beats' ticks ask for.

Then everything is drained and stopped, and the test checks the invariants of
tests/probes/test_model_checked.py and the messaging promises: no oversell (`seats.audit()` clean,
taken ≤ max); one effect per seam message id, orders converged, a booth confirmed for one order at
most; one booking per Idempotency-Key; an attendee admitted once; one lead per (rule, registration);
every outbox row sent and received exactly once (Message-ID at the SMTP server, reference at the
gateway); nothing lost (every registration that got a 201 has its confirmation mail and SMS
delivered). What the second beat costs is counted from the processes' logs: each beat publishes
every safety-net task at each tick, so the workers run twice the beat-driven passes; the extra runs
find nothing to do (no duplicate effect, checked above).
"""

from __future__ import annotations

import ast
import json
import random
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone
from django.utils.crypto import get_random_string

from booths.models import BookingState, BoothBooking
from events.db import locks
from events.models import (
    EventAuditLog,
    IntakeIdempotency,
    Mail,
    MailOutbox,
    MailRegistration,
    OutboxState,
    Registration,
    RegistrationState,
)
from events.services import audit, nudge, registrations, scheduler, seats
from leads import services as lead_services
from leads.adapters import LocalLeadSink
from leads.models import Lead, LeadProvenance, LeadProvenanceRegistration, LeadRequest
from leads.services import passes as lead_passes
from seams.models import InboxStatus, SeamInbox
from sms.models import SmsOutbox, SmsState
from tests.booths import factories as booth_factories
from tests.events import factories
from tests.events.mail.test_delivery import SmtpServer
from tests.events.redis_server import own_redis  # noqa: F401 — a fixture: the test's own Redis
from tests.helpers import run_concurrently, start_celery_worker
from tests.seams.host import URL as SEAM_URL
from tests.seams.host import new_secret, order_message, signed_headers, ticket_line
from tests.sms.gateway import TOKEN
from tests.stack import RecordingGateway, Web, free_port, start_beat, stop

pytestmark = pytest.mark.django_db(transaction=True)

WEBS, WORKERS, BEATS = 3, 3, 2
TRAFFIC = 10.0  # seconds of mixed traffic
BEAT_EVERY = 2.0  # seconds between a beat's ticks (the project's: 60 s)
START_DEADLINE = 60.0
DRAIN_DEADLINE = 45.0
JSON = "application/json"

NEAR_MAX, NEAR_TAKEN = 80, 50  # the limited event: 30 seats left when the traffic starts
LARGE_MAX = 5_000
DESK_ATTENDEES = 150
BOOTHS = 3

# What a run of each safety-net task did, read from its report: a run whose numbers are all 0
# found nothing to do.
EFFECT = {
    "events.run_pass": ("messages_queued", "skipped", "schedulers_skipped", "errors"),
    "events.deliver_outbox": ("sent", "retried", "failed"),
    "sms.deliver_outbox": ("sent", "retried", "failed"),
    "leads.run_pass": ("registrations_walked", "leads_created", "leads_updated", "parked"),
    "events.build_exports": ("built", "failed"),
}
SUCCEEDED = re.compile(
    r"^\[(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): \w+/MainProcess\] "
    r"Task (?P<task>[\w.]+)\[[^\]]+\] succeeded in (?P<took>[\d.e-]+)s: (?P<report>\{.*\})$",
    re.MULTILINE,
)
BEAT_SENT = re.compile(r"Scheduler: Sending due task \S+ \((?P<task>[\w.]+)\)")


# --- the world ---------------------------------------------------------------------------------


def phone(n: int) -> str:
    return f"0470 {n % 1_000_000:06d}"


def world(actor) -> dict:
    for ref, channel in (("confirm-mail", "mail"), ("confirm-sms", "sms"), ("remind", "sms")):
        factories.MessageTemplateFactory(
            ref=ref,
            channel=channel,
            subject="" if channel == "sms" else "You're in: {{ event.name }}",
            body="{{ registration.name }}: see you at {{ event.name }}.",
        )
    # One rule for every event: each registration gets a lead.
    rule = lead_services.create_rule(
        name="Every attendee",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        actor=actor,
    )
    near = factories.EventFactory(
        name="Near sold out", seats_limited=True, seats_max=NEAR_MAX, date_tz="UTC"
    )
    large = factories.EventFactory(
        name="Large", seats_limited=True, seats_max=LARGE_MAX, date_tz="UTC"
    )
    begin = timezone.now() - timedelta(hours=1)
    desk_event = factories.EventFactory(
        name="At the door",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        seats_limited=True,
        seats_max=10_000,
    )
    tickets = {e.pk: factories.TicketFactory(event=e) for e in (near, large)}
    registrations.register(
        event=near,
        ticket=tickets[near.pk],
        attendees=[
            {"name": f"Early {i}", "email": f"early{i}@example.org", "phone": phone(900_000 + i)}
            for i in range(NEAR_TAKEN)
        ],
        actor=audit.SYSTEM,
    )
    at_door = registrations.register(
        event=desk_event,
        attendees=[{"name": f"Guest {i}"} for i in range(DESK_ATTENDEES)],
        actor=audit.SYSTEM,
    )
    # After the early registrations: the confirmations go to the traffic's registrations only.
    for event in (near, large):
        for ref, channel in (("confirm-mail", "mail"), ("confirm-sms", "sms")):
            scheduler.add_scheduler(
                event=event,
                interval_type="after_sub",
                interval_nbr=0,
                interval_unit="now",
                template_ref=ref,
                notification_type=channel,
                actor=actor,
            )
    scheduler.add_scheduler(
        event=near,
        interval_type="before_event",
        interval_nbr=30,
        interval_unit="days",
        template_ref="remind",
        notification_type="sms",
        actor=actor,
    )
    booths = booth_factories.BoothFactory.create_batch(BOOTHS, event=large)
    door = factories.UserFactory(username="door")
    door.groups.add(Group.objects.get(name="Event desk"))
    login = Client()
    login.force_login(door)
    csrf = get_random_string(32)
    cookie = django_settings.SESSION_COOKIE_NAME
    return {
        "rule": rule,
        "near": near,
        "large": large,
        "desk_event": desk_event,
        "tickets": tickets,
        "booths": booths,
        "barcodes": [r.barcode for r in at_door],
        "desk_headers": {
            "Content-Type": JSON,
            "Cookie": f"{cookie}={login.cookies[cookie].value}; csrftoken={csrf}",
            "X-CSRFToken": csrf,
        },
    }


# --- the traffic -------------------------------------------------------------------------------


class Traffic:
    """Client threads spreading requests over the web processes; every answer recorded."""

    def __init__(self, webs: list[Web], w: dict, secret: str) -> None:
        self.webs, self.w, self.secret = webs, w, secret
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers: dict[str, list[tuple[str, int, int, dict, bytes]]] = defaultdict(list)
        self.failures: list[str] = []
        self.barcodes = list(w["barcodes"])
        random.Random(3).shuffle(self.barcodes)
        self.documents: dict[str, dict] = {}  # seam message id → the document sent

    def call(self, kind: str, item: str, web: Web, method: str, path: str, body, headers) -> int:
        try:
            status, head, raw = web.call(method, path, body, headers)
        except OSError as exc:
            with self.lock:
                self.failures.append(f"{kind} {item} at {web.name}: {exc!r}")
            return 0
        with self.lock:
            self.answers[kind].append((item, web.port, status, head, raw))
        return status

    def both(self, request: Callable[[Web], object], one: Web, two: Web) -> None:
        """The same request to two machines at once."""
        other = threading.Thread(target=request, args=(two,))
        other.start()
        request(one)
        other.join(60)

    def pair(self, n: int) -> tuple[Web, Web]:
        return self.webs[n % WEBS], self.webs[(n + 1) % WEBS]

    def intake(self, k: int) -> None:
        rng = random.Random(100 + k)
        n = 0
        while not self.stop.is_set():
            event = self.w["near"] if rng.random() < 0.5 else self.w["large"]
            key = f"k{k}-{n}"
            body = json.dumps(
                {
                    "ticket_id": self.w["tickets"][event.pk].pk,
                    "attendees": [
                        {
                            "name": f"Walk-in {k}-{n}-{j}",
                            "email": f"in{k}.{n}.{j}@example.org",
                            "phone": phone(k * 100_000 + n * 10 + j),
                        }
                        for j in range(rng.choice((1, 1, 2)))
                    ],
                }
            ).encode()
            path = f"/api/v1/events/{event.pk}/registrations"
            headers = {"Content-Type": JSON, "Idempotency-Key": key}
            one, two = self.pair(n + k)

            def post(web: Web, key=key, path=path, body=body, headers=headers) -> None:
                self.call("intake", key, web, "POST", path, body, headers)

            if n % 4 == 0:
                self.both(post, one, two)
            else:
                post(one)
            n += 1

    def seam(self, k: int) -> None:
        rng = random.Random(200 + k)
        n = 0
        while not self.stop.is_set():
            event = self.w["near"] if rng.random() < 0.5 else self.w["large"]
            ref = f"SO-{k}-{n}"
            lines = [ticket_line(self.w["tickets"][event.pk], rng.choice((1, 2)), ref=f"{ref}/1")]
            if rng.random() < 0.3:
                booth = rng.choice(self.w["booths"])
                lines.append(
                    {
                        "ref": f"{ref}/2",
                        "kind": "booth",
                        "booth_ids": [booth.pk],
                        "price_total": "1",
                    }
                )
            partner = {
                "ref": f"P-{ref}",
                "name": f"Buyer {ref}",
                "email": f"buyer.{k}.{n}@example.org",
                "phone": phone(500_000 + k * 10_000 + n),
            }
            confirmed = order_message(ref=ref, lines=lines, partner=partner)
            outcome = self.send(f"m-{ref}-1", confirmed, n, third=rng.random() < 0.3)
            if outcome == "applied" and rng.random() < 0.25:
                cancel = order_message("order.cancelled", ref=ref, version=2, partner=partner)
                self.send(f"m-{ref}-2", cancel, n + 1, third=False)
            n += 1

    def send(self, msg_id: str, document: dict, n: int, *, third: bool) -> str | None:
        """The host's delivery of one message: two copies at once to two machines (its retry
        after a timeout crossing the first attempt), maybe a third one later. Returns the
        outcome that is not `duplicate`."""
        body = json.dumps(document).encode()
        with self.lock:
            self.documents[msg_id] = document

        def post(web: Web) -> None:
            # Each attempt signed anew under the stable webhook-id, as the host retries.
            headers = {
                "Content-Type": JSON,
                **signed_headers(body, secret=self.secret, msg_id=msg_id),
            }
            self.call("seam", msg_id, web, "POST", SEAM_URL, body, headers)

        one, two = self.pair(n)
        self.both(post, one, two)
        if third:
            post(self.webs[(n + 2) % WEBS])
        with self.lock:
            outcomes = [
                json.loads(raw).get("status")
                for item, _, status, _, raw in self.answers["seam"]
                if item == msg_id and status in (200, 409)
            ]
        return next((o for o in outcomes if o != "duplicate"), None)

    def desk(self, k: int) -> None:
        n = k
        while not self.stop.is_set():
            with self.lock:
                if not self.barcodes:
                    return
                barcode = self.barcodes.pop()
            body = json.dumps({"barcode": barcode, "event_id": self.w["desk_event"].pk}).encode()
            one, two = self.pair(n)

            def scan(web: Web, barcode=barcode, body=body) -> None:
                self.call(
                    "desk", barcode, web, "POST", "/desk/api/scan", body, self.w["desk_headers"]
                )

            self.both(scan, one, two)
            n += 1

    def run(self, seconds: float) -> None:
        clients = [
            *(threading.Thread(target=self.intake, args=(k,)) for k in range(3)),
            *(threading.Thread(target=self.seam, args=(k,)) for k in range(2)),
            *(threading.Thread(target=self.desk, args=(k,)) for k in range(2)),
        ]
        for thread in clients:
            thread.start()
        self.stop.wait(seconds)
        self.stop.set()
        for thread in clients:
            thread.join(90)
        assert not any(t.is_alive() for t in clients), "a client thread is stuck"

    def by_item(self, kind: str) -> dict[str, list[tuple[int, dict]]]:
        """Every answer to each item: [(status, parsed body)]."""
        found: dict[str, list[tuple[int, dict]]] = defaultdict(list)
        for item, _, status, _, raw in self.answers[kind]:
            found[item].append((status, json.loads(raw)))
        return found


# --- the processes -----------------------------------------------------------------------------


def _assert_only_celery_s_own_stop(text: str) -> None:
    """What a beat logs once the test sent it SIGTERM holds no error, unless that signal landed
    in the middle of a tick: celery beat's SIGTERM handler raises SystemExit wherever beat is
    (celery/apps/beat.py `_sync`), and one caught inside a task's publish, or the schedule's
    shelf closed under a tick, is logged as an error with its traceback. Such a log is allowed
    only with that SystemExit in it; any other error after the stop still fails."""
    if any(word in text for word in ("Traceback", "ERROR", "CRITICAL")):
        assert "raise SystemExit()" in text and "in _sync" in text, text[:3000]


class Stack:
    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.webs: list[Web] = []
        self.workers: list[tuple[object, Path]] = []
        self.beats: list[tuple[object, Path]] = []

    def start(self) -> None:
        for i in range(WEBS):
            # One gunicorn worker per "machine" (the Procfile's gthread pool, 16 threads).
            self.webs.append(Web(self.tmp, f"web-{i}", self.env, args=("--workers=1",)))
        for i in range(WORKERS):
            log = self.tmp / f"worker-{i}.log"
            with log.open("wb") as out:
                self.workers.append(
                    (start_celery_worker(out, name=f"machine-{i}", env=self.env), log)
                )
        for i in range(BEATS):
            self.beats.append(start_beat(self.tmp, f"beat-{i}", self.env, every=BEAT_EVERY))
        deadline = time.monotonic() + START_DEADLINE
        for web in self.webs:
            web.wait_ready(deadline)
        for proc, log in [*self.workers, *self.beats]:
            while not re.search(r" ready\.$|beat: Starting", log.read_text(), re.MULTILINE):
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)  # a process booting

    def logs(self, group: list) -> list[str]:
        return [log.read_text(errors="replace") for _, log in group]

    def stop_all(self) -> None:
        for proc, _ in [*self.beats, *self.workers]:
            stop(proc)
        for web in self.webs:
            web.stop()
        procs = [p for p, _ in [*self.beats, *self.workers]] + [w.process for w in self.webs]
        assert all(p.poll() is not None for p in procs), "a process outlived the test"


def wait(done: Callable[[], bool], deadline: float, what: str) -> None:
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within the deadline"
        time.sleep(0.25)  # polling other processes, with a deadline


def drained() -> bool:
    """Nothing left for the workers: no queued mail or SMS, no unsent after_sub row, no lead
    work."""
    connection.close()  # a fresh snapshot each time
    return not (
        MailOutbox.objects.filter(state=OutboxState.QUEUED).exists()
        or SmsOutbox.objects.filter(state=SmsState.QUEUED).exists()
        or MailRegistration.objects.filter(mail_sent=False).exists()
        or LeadRequest.objects.exists()
    )


def task_runs(worker_logs: list[str]) -> dict[str, list[tuple[int, float, float, bool]]]:
    """Per task: (worker, start, end, had an effect) of every run the workers finished."""
    runs: dict[str, list[tuple[int, float, float, bool]]] = defaultdict(list)
    for index, text in enumerate(worker_logs):
        for m in SUCCEEDED.finditer(text):
            end = datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            report = ast.literal_eval(m["report"])
            effect = any(report.get(name) for name in EFFECT.get(m["task"], ()))
            stamp = end.timestamp()
            runs[m["task"]].append((index, stamp - float(m["took"]), stamp, effect))
    return runs


def overlapping(runs: list[tuple[int, float, float, bool]]) -> int:
    """Pairs of runs of one task on two different workers at the same time."""
    return sum(
        1
        for i, a in enumerate(runs)
        for b in runs[i + 1 :]
        if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]
    )


# --- the test ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("own_redis")
def test_three_webs_three_workers_and_two_beats_keep_every_promise(tmp_path, own_redis, actor):  # noqa: F811
    began = time.monotonic()
    w = world(actor)
    secret = new_secret()
    smtp = SmtpServer(free_port()).start()
    gateway = RecordingGateway(TOKEN)
    env = {
        "CACHE_URL": own_redis.url.replace("redis://", "rediscache://") + "/1",
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp.port}",
        "DEFAULT_FROM_EMAIL": "events@example.org",
        "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
        "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
        "EVENT_SMS_QUEUE": "sms.adapters.GatewaySmsQueue",
        "EVENT_SMS_GATEWAY_URL": gateway.url,
        "EVENT_SMS_GATEWAY_TOKEN": TOKEN,
        "EVENT_LEAD_SINK": "leads.adapters.LocalLeadSink",
        "EVENT_SEAM_SECRET": secret,
        "EVENT_PUBLIC_URL": "http://127.0.0.1:8000",
        # Small batches: more transactions, so the workers' passes interleave.
        "EVENT_MAIL_BATCH": "20",
        "EVENT_LEAD_BATCH": "20",
    }
    stack = Stack(tmp_path, env)
    broker = redis.Redis.from_url(f"{own_redis.url}/0")
    try:
        stack.start()
        started = time.monotonic()
        traffic = Traffic(stack.webs, w, secret)
        traffic.run(TRAFFIC)
        served = time.monotonic()
        wait(drained, time.monotonic() + DRAIN_DEADLINE, "every message sent, every lead made")
        running = [log.stat().st_size for _, log in stack.beats]  # what each beat logged at work
        for proc, _ in stack.beats:
            stop(proc)
        # Every published task consumed and acknowledged before the workers stop.
        wait(
            lambda: broker.llen("celery") == 0 and broker.hlen("unacked") == 0,
            time.monotonic() + DRAIN_DEADLINE,
            "the broker's queue empty",
        )
        drained_at = time.monotonic()
        stack.stop_all()
    finally:
        stack.stop_all()
        broker.close()
        smtp.stop()
        gateway.stop()
    connection.close()

    worker_logs, beat_logs = stack.logs(stack.workers), stack.logs(stack.beats)
    web_logs = [web.log.read_text(errors="replace") for web in stack.webs]
    print(
        f"\nstart {started - began:.1f} s, traffic {served - started:.1f} s, "
        f"drain {drained_at - served:.1f} s, total {time.monotonic() - began:.1f} s"
    )

    # --- every answer was an intended one, on every machine ---------------------------------
    assert traffic.failures == []
    per_port = Counter(
        port for kind in traffic.answers for _, port, _, _, _ in traffic.answers[kind]
    )
    statuses = Counter(
        (kind, status) for kind in traffic.answers for _, _, status, _, _ in traffic.answers[kind]
    )
    print("answers:", dict(sorted(statuses.items())), "per web:", dict(per_port))
    assert set(per_port) == {web.port for web in stack.webs}
    assert set(statuses) <= {
        ("intake", 201),
        ("intake", 409),
        ("seam", 200),
        ("seam", 409),
        ("desk", 200),
    }, statuses
    at_work = [
        log.read_bytes()[:size].decode(errors="replace")
        for (_, log), size in zip(stack.beats, running, strict=True)
    ]
    for text in [*web_logs, *worker_logs, *at_work]:
        for word in ("Traceback", "ERROR", "CRITICAL"):
            assert word not in text, text[max(0, text.index(word) - 1000) :][:3000]
    for (_, log), size in zip(stack.beats, running, strict=True):
        _assert_only_celery_s_own_stop(log.read_bytes()[size:].decode(errors="replace"))

    # --- seats: no oversell, the ledger equals a recount ------------------------------------
    near, large, desk_event = w["near"], w["large"], w["desk_event"]
    for event in (near, large, desk_event):
        assert seats.audit(event=event) == [], event.name
    summary = seats.event_summary(event=near)
    print(f"near sold out: taken {summary.taken} of {NEAR_MAX}")
    assert summary.taken <= NEAR_MAX
    refusals = [
        json.loads(raw)["error"]["code"]
        for _, _, status, _, raw in traffic.answers["intake"]
        if status == 409
    ]
    assert set(refusals) <= {"sold_out"}
    assert summary.taken == NEAR_MAX and refusals, "the limited event never sold out"

    # --- intake: one booking per Idempotency-Key, whatever machine answered ------------------
    booked: dict[str, set[int]] = {}
    for key, answers in traffic.by_item("intake").items():
        ids = {
            tuple(sorted(r["id"] for r in body["registrations"]))
            for status, body in answers
            if status == 201
        }
        assert len(ids) <= 1, (key, answers)  # both machines answered the same booking
        if ids:
            booked[key] = set(ids.pop())
    walk_ins = Registration.objects.filter(name__startswith="Walk-in")
    assert set(walk_ins.values_list("pk", flat=True)) == set().union(*booked.values())
    assert IntakeIdempotency.objects.count() == len(booked)
    twice = [key for key, answers in traffic.by_item("intake").items() if len(answers) == 2]
    assert twice, "no Idempotency-Key was sent to two machines"

    # --- seam: one effect per message id; orders converged; a booth for one order at most -----
    outcome: dict[str, str] = {}
    for msg_id, answers in traffic.by_item("seam").items():
        firsts = [body["status"] for _, body in answers if body["status"] != "duplicate"]
        assert len(firsts) == 1, (msg_id, answers)  # one copy decided, the others: duplicate
        outcome[msg_id] = firsts[0]
        assert set(firsts) <= {"applied", "parked"}, answers
        assert len(answers) >= 2
    inbox = dict(SeamInbox.objects.values_list("message_id", "status"))
    assert inbox == {
        m: InboxStatus.APPLIED if o == "applied" else InboxStatus.PARKED for m, o in outcome.items()
    }
    seam_regs = Counter(
        Registration.objects.exclude(sale_order_ref="").values_list("sale_order_ref", "state")
    )
    for msg_id, status in outcome.items():
        if not msg_id.endswith("-1"):
            continue
        ref = msg_id.removeprefix("m-").removesuffix("-1")
        quantity = next(
            line["quantity"]
            for line in traffic.documents[msg_id]["data"]["order"]["lines"]
            if line["kind"] == "ticket"
        )
        cancelled = outcome.get(f"m-{ref}-2") == "applied"
        expected = {}
        if status == "applied":
            expected = {RegistrationState.CANCEL if cancelled else RegistrationState.OPEN: quantity}
        got = {state: c for (r, state), c in seam_regs.items() if r == ref}
        assert got == expected, (ref, status, cancelled)
    parked = Counter(
        SeamInbox.objects.filter(status=InboxStatus.PARKED).values_list("error_code", flat=True)
    )
    print("seam outcomes:", Counter(outcome.values()), "parked:", dict(parked))
    assert set(parked) <= {"sold_out", "booth_unavailable"}
    held = Counter(
        BoothBooking.objects.filter(state=BookingState.CONFIRMED).values_list("booth_id", flat=True)
    )
    assert max(held.values(), default=0) <= 1
    live_orders = {
        m.removeprefix("m-").removesuffix("-1")
        for m, o in outcome.items()
        if m.endswith("-1") and o == "applied" and outcome.get(m[:-1] + "2") != "applied"
    }
    holders = set(
        BoothBooking.objects.filter(state=BookingState.CONFIRMED).values_list(
            "order_ref", flat=True
        )
    )
    assert holders <= live_orders

    # --- desk: each attendee admitted once, both machines answering -------------------------
    admitted = set()
    for barcode, answers in traffic.by_item("desk").items():
        got = sorted(body["status"] for _, body in answers)
        assert got == ["already_registered", "confirmed_registration"], (barcode, got)
        admitted.add(barcode)
    states = dict(Registration.objects.filter(event=desk_event).values_list("barcode", "state"))
    assert {c for c, s in states.items() if s == RegistrationState.DONE} == admitted
    attended = Counter(
        EventAuditLog.objects.filter(verb="registration.attended").values_list(
            "registration__barcode", flat=True
        )
    )
    assert attended == Counter(dict.fromkeys(admitted, 1))
    print(f"desk: {len(admitted)} of {DESK_ATTENDEES} attendees admitted")

    # --- leads: one per (rule, registration) -------------------------------------------------
    pairs = Counter(LeadProvenanceRegistration.objects.values_list("rule_id", "registration_id"))
    assert max(pairs.values()) == 1
    # One local lead per provenance record, none left behind by a rolled-back batch.
    refs = Counter(LeadProvenance.objects.values_list("lead_ref", flat=True))
    assert refs == Counter(f"local:{pk}" for pk in Lead.objects.values_list("pk", flat=True))
    holding = Registration.objects.filter(
        state__in=(RegistrationState.OPEN, RegistrationState.DONE)
    )
    assert {r for _, r in pairs} >= set(holding.values_list("pk", flat=True))

    # --- messages: each sent exactly once, nothing lost -------------------------------------
    assert not Mail.objects.exclude(error_message="").exists()
    assert not MailOutbox.objects.exclude(state=OutboxState.SENT).exists()
    assert not SmsOutbox.objects.exclude(state=SmsState.SENT).exists()
    mails = Counter(smtp.inbox.message_ids())
    assert mails == Counter(MailOutbox.objects.values_list("message_id", flat=True))
    texts = gateway.received()
    assert texts == Counter(SmsOutbox.objects.values_list("reference", flat=True))
    assert max(mails.values()) == 1 and max(texts.values()) == 1
    confirmations = {
        channel: set(
            (MailOutbox if channel == "mail" else SmsOutbox)
            .objects.filter(scheduler__interval_type="after_sub")
            .values_list("registration_id", flat=True)
        )
        for channel in ("mail", "sms")
    }
    answered = set().union(*booked.values())  # every registration that got a 201
    assert answered <= confirmations["mail"] and answered <= confirmations["sms"]
    still_open = set(
        Registration.objects.filter(event__in=(near, large), state=RegistrationState.OPEN)
        .exclude(name__startswith="Early")
        .values_list("pk", flat=True)
    )
    assert still_open <= confirmations["mail"] and still_open <= confirmations["sms"]
    reminder = Mail.objects.get(event=near, interval_type="before_event")
    reminded = SmsOutbox.objects.filter(scheduler=reminder).count()
    print(
        f"delivered: {sum(mails.values())} mails, {sum(texts.values())} SMS "
        f"({reminded} reminders), each once; {len(answered)} walk-ins confirmed by mail and SMS"
    )

    # --- what the second beat costs ----------------------------------------------------------
    sends = [Counter(m["task"] for m in BEAT_SENT.finditer(text)) for text in beat_logs]
    runs = task_runs(worker_logs)
    print(f"{'task':24} {'beat-0':>6} {'beat-1':>6} {'runs':>5} {'no effect':>9} {'overlap':>7}")
    for task in EFFECT:
        done = runs[task]
        idle = sum(1 for run in done if not run[3])
        print(
            f"{task:24} {sends[0][task]:>6} {sends[1][task]:>6} {len(done):>5} {idle:>9} "
            f"{overlapping(done):>7}"
        )
        for beat in sends:
            assert beat[task] >= 3, (task, sends)  # both beats ticked, each publishing it
        # Every published run was consumed: the beats' duplicates ran, none was dropped.
        assert len(done) >= sends[0][task] + sends[1][task], (task, len(done), sends)
    total_sends = sum(sum(s.values()) for s in sends)
    total_runs = sum(len(r) for r in runs.values())
    print(
        f"beats published {total_sends} runs ({sum(sends[1].values())} by the second beat); "
        f"workers ran {total_runs}, {total_runs - total_sends} of them nudged by the writes"
    )


# --- the deadlock this probe found -------------------------------------------------------------


class PausingSink(LocalLeadSink):
    """The local sink, holding the lead batch (its transaction open) after the sink call until
    `go` is set; records the batch's database backend."""

    def __init__(self) -> None:
        self.in_batch, self.go = threading.Event(), threading.Event()
        self.backend: list[int] = []

    def upsert_leads(self, *, items):
        refs = super().upsert_leads(items=items)
        if not self.in_batch.is_set():
            self.backend.append(connection.connection.info.backend_pid)
            self.in_batch.set()
            assert self.go.wait(20)
        return refs


def waiting_on_a_lock(pid: int) -> bool:
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        dbname=db["NAME"],
        autocommit=True,
    ) as side:
        row = side.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_lead_batch_and_a_booking_on_its_event_do_not_deadlock(actor, settings, monkeypatch):
    """Found by the probe above (three web processes, three workers): a lead batch inserts
    leads, provenance and audit rows referencing the event (foreign keys checked at COMMIT:
    Django's constraints are deferred), then updates its lead request; a booking holds the
    Event row lock and upserts the same request from the registration hook. Without a lock
    order the batch holds the request and waits at COMMIT for the Event row, the booking holds
    the Event row and waits for the request: PostgreSQL kills one of them (the intake answered
    503, the seam 503). Here the batch is held inside its transaction while the booking takes
    the Event lock; the booking registers only once the batch waits on a lock."""
    settings.EVENT_LEAD_BATCH = 50
    settings.EVENT_LEAD_CRON_LIMIT = 1000
    monkeypatch.setattr(nudge, "publish", lambda task: None)
    event = factories.EventFactory(seats_limited=True, seats_max=10)
    lead_services.create_rule(
        name="Everyone",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        event=event,
        actor=actor,
    )
    registrations.register(event=event, attendees=[{"name": "First"}], actor=audit.SYSTEM)
    sink = PausingSink()

    def lead_pass():
        return lead_passes.run_pass(sink=sink)

    def booking():
        assert sink.in_batch.wait(20)
        with transaction.atomic():
            locks.lock_event(event.pk)
            sink.go.set()
            deadline = time.monotonic() + 20
            while not waiting_on_a_lock(sink.backend[0]):
                assert time.monotonic() < deadline, "the lead batch never waited"
                time.sleep(0.01)  # polling another backend's state, with a deadline
            return registrations.register(
                event=event, attendees=[{"name": "Second"}], actor=audit.SYSTEM
            )

    report, _ = run_concurrently([lead_pass, booking])
    assert (report.parked, report.fenced) == (0, 0), report
    lead_passes.run_pass()  # whatever the booking queued that the first pass did not walk
    assert Counter(
        LeadProvenanceRegistration.objects.values_list("registration__name", flat=True)
    ) == {"First": 1, "Second": 1}
    assert seats.audit(event=event) == []
