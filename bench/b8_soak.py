"""B8 — the soak: the served stack under mixed traffic for 5 minutes (30 s with --quick).

The stack is the Procfile's: gunicorn with `config/gunicorn.py` (2 gthread workers × 16
threads), a Celery worker (`--concurrency 2`) and Celery beat, on the bench database and a
redis-server of the soak's own (broker and cache: no other process takes its tasks). Mail goes to
a local SMTP sink and SMS to a local gateway, both in this process, recording every Message-ID
and reference they receive. A settings module of the run only lifts the per-client rate limits
(every client is 127.0.0.1), as B2 does.

The world: one ongoing event (seat-limited, a free ticket with a mandatory question, a priced
ticket sold by the host), an after_sub mail and an after_sub sms scheduler and an attendee lead
rule on it; small events of 10 seats each, the next one opened when one sells out; two desk
users and one event manager, who log in through the admin login form.

Client threads, closed loop (each sends its next request when the answer came):
- intake ×3: POST /api/v1/events/<id>/registrations with an Idempotency-Key. 65% the big event
  (201), 25% the current small event (201, or 409 `sold_out`), 5% without the mandatory answer
  (400 `question_required`), 5% a replay of an earlier request, key and body (201,
  `Idempotent-Replayed`, the same registrations);
- attendee ×2: GET /my-tickets/<token>/ (200 with the barcode) and /ics/<token>.ics (200
  VCALENDAR) from the intake answers' links, 3% with a tampered token (404);
- desk ×2: POST /desk/api/scan on the big event: a ticket never scanned (200
  `confirmed_registration`), one scanned before (`already_registered`), a small event's ticket
  (`need_manual_confirmation`), an unknown code (`invalid_ticket`);
- seam ×2: signed POST /seams/v1/sale: new orders (`applied`; one in ten sent as two copies at
  the same instant: one `applied`, one `duplicate`), re-deliveries of a message sent before
  (`duplicate`), cancellations version 2 (`applied`), a late version 1 of a cancelled order
  under a new webhook-id (`stale`);
- dashboard ×1: GET /admin/events/event/<id>/dashboard/ of the big event, one load a second.

Each answer is checked against what that request must get; anything else (another status or
code, a connection error, a timeout) is an error. After the traffic the soak waits until the
worker has sent everything (the drain), then checks: errors 0 and no ERROR / Traceback line in
the three processes' output; oversell 0 and `seats.audit()` clean on every soak event; one mail
outbox row per (scheduler, registration), every open registration mailed, every Message-ID
received once by the SMTP sink; the same for SMS (with a phone) and the gateway's references;
one lead per registration; the seam's effects equal to the answers (registrations minted and
cancelled). Memory: the RSS of every process of the stack, sampled through the run: start
(traffic begins), end (traffic ends) and the slope of a least-squares line (MiB/min) over the
whole traffic and over its second half.
"""

from __future__ import annotations

import base64
import email
import hmac
import http.client
import json
import logging
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from datetime import UTC, datetime, timedelta
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock
from urllib.parse import urlencode, urlsplit

from bench import common
from bench.b2_intake import _percentiles

SECONDS = {True: 30, False: 300}
SAMPLE_EVERY = {True: 2.0, False: 5.0}
DRAIN_DEADLINE = 180.0
CLIENTS = {"intake": 3, "attendee": 2, "desk": 2, "seam": 2, "dashboard": 1}
SMALL_SEATS = 10
DASHBOARD_PAUSE = 1.0
MEMORY_SLOPE_TARGET = 1.0  # MiB/min over the second half of the traffic
TOKEN_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SETTINGS = """\
from config.settings import *  # noqa: F403

# The soak's clients all come from 127.0.0.1: lift the per-client limits for this run only.
EVENT_RATE_LIMITS = {"intake": (1_000_000_000, 60), "token": (1_000_000_000, 60)}
"""

SUCCESS = {"201", "201 replay", "200", "200 applied", "200 confirmed_registration"}
ROUTES = {
    "intake": "POST /api/v1/events/<id>/registrations",
    "tickets": "GET /my-tickets/<token>/",
    "ics": "GET /ics/<token>.ics",
    "scan": "POST /desk/api/scan",
    "seam": "POST /seams/v1/sale",
    "dashboard": "GET /admin/events/event/<id>/dashboard/",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port: int, method: str, path: str, body: bytes | None = None, headers=None):
    """One request on a fresh connection: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def _code(status: int, body: bytes) -> str:
    """`201`, `409 sold_out`, `200 applied`: the status and the answer's code or status."""
    try:
        answer = json.loads(body)
    except ValueError:
        return str(status)
    if not isinstance(answer, dict):
        return str(status)
    code = answer.get("status") or (answer.get("error") or {}).get("code")
    return f"{status} {code}" if code else str(status)


# --- receivers: SMTP and the SMS gateway --------------------------------------------------------


class SmtpSink:
    """An aiosmtpd server on a free port counting the Message-IDs it accepted."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        logging.getLogger("mail.log").setLevel(logging.WARNING)  # a line per SMTP command

        self.received: Counter[str] = Counter()
        self.lock = threading.Lock()
        sink = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 — aiosmtpd
                message = email.message_from_bytes(envelope.content)
                with sink.lock:
                    sink.received[message["Message-ID"] or "(none)"] += 1
                return "250 Message accepted for delivery"

        self.port = _free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(self.received)

    def stop(self) -> None:
        self.controller.stop()


class GatewaySink:
    """An HTTP SMS gateway on a free port: checks the bearer, counts every reference it is
    posted (duplicates included), answers 200."""

    def __init__(self, token: str) -> None:
        self.received: Counter[str] = Counter()
        self.refused = 0
        self.lock = threading.Lock()
        expected = f"Bearer {token}".encode()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 — the http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                given = self.headers.get("Authorization", "").encode()
                status = 200
                try:
                    reference = json.loads(raw)["reference"]
                except (ValueError, KeyError, TypeError):
                    reference, status = None, 400
                if not hmac.compare_digest(given, expected):
                    status = 401
                with sink.lock:
                    if status == 200:
                        sink.received[reference] += 1
                    else:
                        sink.refused += 1
                data = b'{"status": "accepted"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args) -> None:  # noqa: A002
                """Quiet."""

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(self.received)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the stack ---------------------------------------------------------------------------------


class Stack:
    """redis-server, gunicorn (web), a Celery worker and beat: the Procfile's processes, each in
    its own process group with its output in a file; stopped on exit."""

    def __init__(self, *, seam_secret: str, sms_token: str, smtp: SmtpSink, gateway: GatewaySink):
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-soak-"))
        (self.tmp / "bench_soak_settings.py").write_text(SETTINGS)
        self.port = _free_port()
        self.redis_port = _free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench_soak_settings",
            "PYTHONPATH": os.pathsep.join([str(self.tmp), str(common.ROOT)]),
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "CACHE_URL": f"rediscache://127.0.0.1:{self.redis_port}/1",
            "EMAIL_URL": f"smtp://127.0.0.1:{smtp.port}",
            "DEFAULT_FROM_EMAIL": "events@example.org",
            "EVENT_SEAM_SECRET": seam_secret,
            "EVENT_SMS_QUEUE": "sms.adapters.GatewaySmsQueue",
            "EVENT_SMS_GATEWAY_URL": f"http://127.0.0.1:{gateway.port}/sms",
            "EVENT_SMS_GATEWAY_TOKEN": sms_token,
            "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
            "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
            "EVENT_LEAD_SINK": "leads.adapters.LocalLeadSink",
            "EVENT_PUBLIC_URL": f"http://127.0.0.1:{self.port}",
        }
        self.env.pop("TEST_DB_SUFFIX", None)
        bin_dir = Path(sys.executable).parent
        try:
            self._start(
                "redis",
                [
                    "redis-server",
                    "--port",
                    str(self.redis_port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
            )
            self._wait_port(self.redis_port, "redis")
            self._start(
                "web",
                [
                    str(bin_dir / "gunicorn"),
                    "config.wsgi:application",
                    "--config",
                    "config/gunicorn.py",
                    "--bind",
                    f"127.0.0.1:{self.port}",
                ],
            )
            self._start(
                "worker",
                [
                    str(bin_dir / "celery"),
                    "-A",
                    "config",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    "2",
                ],
            )
            self._start(
                "beat",
                [
                    str(bin_dir / "celery"),
                    "-A",
                    "config",
                    "beat",
                    "--loglevel",
                    "INFO",
                    "--schedule",
                    str(self.tmp / "celerybeat-schedule"),
                ],
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, argv: list[str]) -> None:
        self.logs[name] = self.tmp / f"{name}.log"
        with self.logs[name].open("wb") as log:
            self.procs[name] = subprocess.Popen(
                argv,
                cwd=common.ROOT,
                # Each process's PostgreSQL sessions carry its name (pg_stat_activity, logs).
                env={**self.env, "PGAPPNAME": f"soak-{name}"},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _wait_port(self, port: int, name: str) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.procs[name].poll() is not None:
                    raise RuntimeError(f"{name} did not listen") from None
                time.sleep(0.1)  # a process starting up, not a race under test

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        marks = {"worker": re.compile(r"celery@\S+ ready\."), "beat": re.compile(r"beat: Starting")}
        web = False
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited at start:\n{self.log(name)[-3000:]}")
            if not web:
                try:
                    web = call(self.port, "GET", "/healthz")[0] == 200
                except OSError:
                    web = False
            if web and all(mark.search(self.log(name)) for name, mark in marks.items()):
                for _ in range(20):  # warm both web workers
                    call(self.port, "GET", "/healthz")
                return
            time.sleep(0.3)  # processes starting up
        raise RuntimeError(
            "the stack did not come up:\n"
            + "\n".join(f"--- {n}\n{self.log(n)[-1500:]}" for n in self.procs)
        )

    def roles(self) -> dict[int, str]:
        """pid → role for every process of web, worker and beat (children included)."""
        tree: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            tree.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
        out = {}
        for name, main, child in (
            ("web", "web master", "web worker"),
            ("worker", "worker main", "worker child"),
            ("beat", "beat", "beat child"),
        ):
            pid = self.procs[name].pid
            out[pid] = main
            for kid in sorted(tree.get(pid, [])):
                out[kid] = child
        return out

    def stop(self) -> None:
        """SIGTERM to each main process, as a container runtime stops one: the Celery worker's
        warm shutdown lets its pool finish the task in hand (SIGTERM to the whole group killed
        the pool's children mid-task, logged as ERROR / WorkerLostError), gunicorn's master
        stops its workers. A process still running 30 s later is killed with its whole group."""
        for name in ("beat", "worker", "web", "redis"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=30)  # the main process waits for its children
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the group: the main is still its leader
                proc.wait()

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- memory ------------------------------------------------------------------------------------


def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Sampler:
    """Samples the RSS of every process of the stack every `every` seconds in a thread."""

    def __init__(self, stack: Stack, every: float) -> None:
        self.stack = stack
        self.every = every
        self.samples: list[tuple[float, int, str, int]] = []  # (t, pid, role, kib)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        now = time.monotonic()
        for pid, role in self.stack.roles().items():
            kib = _rss_kib(pid)
            if kib is not None:
                self.samples.append((now, pid, role, kib))

    def _loop(self) -> None:
        while not self.stopping.wait(self.every):
            self.sample()

    def start(self) -> Sampler:
        self.sample()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (minutes, MiB)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / var


def _memory(samples, start: float, end: float, every: float) -> list[dict]:
    """Per process: start / end RSS (MiB), slope over the traffic and over its second half."""
    per_pid: dict[int, list[tuple[float, str, int]]] = {}
    for t, pid, role, kib in samples:
        per_pid.setdefault(pid, []).append((t, role, kib))
    out = []
    numbers: Counter[str] = Counter()
    middle = (start + end) / 2
    for pid in sorted(per_pid, key=lambda p: (per_pid[p][0][1], per_pid[p][0][0], p)):
        rows = per_pid[pid]
        role = rows[0][1]
        during = [(t, kib) for t, _, kib in rows if start - 0.5 <= t <= end + 0.5]
        if not during:
            continue
        numbers[role] += 1
        points = [((t - start) / 60, kib / 1024) for t, kib in during]
        second = [((t - start) / 60, kib / 1024) for t, kib in during if t >= middle]
        out.append(
            {
                "process": f"{role} {numbers[role]}"
                if role.endswith(("worker", "child"))
                else role,
                "pid": pid,
                "start_mib": round(during[0][1] / 1024, 1),
                "end_mib": round(during[-1][1] / 1024, 1),
                "samples": len(during),
                "slope_mib_per_min": round(_slope(points), 2),
                "second_half_slope_mib_per_min": round(_slope(second), 2),
                "whole_run": during[0][0] <= start + every and during[-1][0] >= end - every,
            }
        )
    return out


# --- the world ---------------------------------------------------------------------------------


def _small_event(label: str):
    from django.utils import timezone

    from events.models import Ticket
    from events.services import audit
    from events.services import events as event_services

    begin = timezone.now() - timedelta(hours=1)
    event = event_services.create_event(
        name=f"B8 soak small {label}",
        date_begin=begin,
        date_end=begin + timedelta(hours=11),
        date_tz="Europe/Brussels",
        seats_limited=True,
        seats_max=SMALL_SEATS,
        is_published=True,
        actor=audit.SYSTEM,
    )
    ticket = Ticket.objects.create(event=event, name="Free")
    return event.pk, ticket.pk


def _world(password: str) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from events.models import MessageTemplate, Question, QuestionType, Ticket
    from events.services import audit, nudge, scheduler
    from events.services import events as event_services
    from leads import services as lead_services

    run_id = secrets.token_hex(3)
    MessageTemplate.objects.get_or_create(
        ref="b8-welcome",
        defaults={
            "name": "B8 welcome",
            "channel": "mail",
            "subject": "Welcome to {{ event.name }}",
            "body": (
                "<p>Hello {{ registration.name }},</p><p>your tickets: "
                '<a href="{{ tickets_url }}">{{ tickets_url }}</a></p>'
            ),
        },
    )
    MessageTemplate.objects.get_or_create(
        ref="b8-welcome-sms",
        defaults={
            "name": "B8 welcome SMS",
            "channel": "sms",
            "subject": "",
            "body": "{{ registration.name }}: see you at {{ event.name }}, {{ event_begin }}.",
        },
    )
    begin = timezone.now() - timedelta(hours=1)
    with mock.patch.object(nudge, "after_commit"):  # nothing to nudge yet: no worker runs
        event = event_services.create_event(
            name=f"B8 soak {run_id}",
            date_begin=begin,
            date_end=begin + timedelta(hours=11),
            date_tz="Europe/Brussels",
            seats_limited=True,
            seats_max=1_000_000,
            is_published=True,
            country="BE",
            ticket_instructions="Bring the QR code.",
            actor=audit.SYSTEM,
        )
        free = Ticket.objects.create(event=event, name="Free")
        host = Ticket.objects.create(event=event, name="Sold by the host", price=60)
        question = Question.objects.create(
            event=event,
            title="Diet",
            question_type=QuestionType.TEXT_BOX,
            is_mandatory_answer=True,
        )
        schedulers = [
            scheduler.add_scheduler(
                event=event,
                interval_nbr=0,
                interval_unit="now",
                interval_type="after_sub",
                template_ref=ref,
                notification_type=channel,
                actor=audit.SYSTEM,
            )
            for ref, channel in (("b8-welcome", "mail"), ("b8-welcome-sms", "sms"))
        ]
        rule = lead_services.create_rule(
            name=f"B8 soak {run_id}",
            lead_creation_basis="attendee",
            lead_creation_trigger="create",
            lead_type="lead",
            event=event,
            actor=audit.SYSTEM,
        )
    users = {}
    for username, group in (
        ("b8-desk-0", "Event desk"),
        ("b8-desk-1", "Event desk"),
        ("b8-manager", "Event manager"),
    ):
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = True
        user.is_active = True
        user.set_password(password)
        user.save()
        user.groups.set([Group.objects.get(name=group)])
        users[username] = user.username
    return {
        "run_id": run_id,
        "event": event,
        "free": free,
        "host": host,
        "question": question,
        "mail": schedulers[0],
        "sms": schedulers[1],
        "rule": rule,
        "users": users,
    }


# --- traffic -----------------------------------------------------------------------------------


class Route:
    """Latencies, answers and errors of one route (thread-safe)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.latencies: list[float] = []
        self.answers: Counter[str] = Counter()
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def record(self, seconds: float, answer: str, expected: set[str] | None, detail: str = ""):
        with self.lock:
            self.latencies.append(seconds)
            self.answers[answer] += 1
            if expected is not None and answer not in expected:
                self.errors.append(f"{answer} (expected {sorted(expected)}) {detail}"[:300])

    def error(self, exc: BaseException, detail: str = "") -> None:
        """A request that got no answer (connection error, timeout): an error, not served."""
        with self.lock:
            self.answers[type(exc).__name__] += 1
            self.errors.append(f"{type(exc).__name__}: {exc} {detail}"[:300])


class Session:
    """A staff browser: cookies, logged in through the admin login form."""

    def __init__(self, port: int, username: str, password: str, next_url: str) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}
        _, _, body = self.call("GET", f"/admin/login/?next={next_url}")
        token = TOKEN_INPUT.search(body.decode()).group(1)
        form = urlencode(
            {
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": token,
                "next": next_url,
            }
        ).encode()
        status, _, _ = self.call(
            "POST", "/admin/login/", form, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"login of {username} failed: HTTP {status}")

    def call(self, method: str, path: str, body: bytes | None = None, headers=None):
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        status, answer_headers, data = call(self.port, method, path, body, sent)
        for header in answer_headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return status, answer_headers, data


class Traffic:
    """The shared state of the client threads and the threads themselves."""

    def __init__(self, port: int, world: dict, password: str, seam_secret: str, seconds: float):
        from standardwebhooks.webhooks import Webhook

        self.port = port
        self.world = world
        self.password = password
        self.hook = Webhook(seam_secret)
        self.seconds = seconds
        self.routes = {key: Route(name) for key, name in ROUTES.items()}
        self.lock = threading.Lock()
        # intake's answers: links for the attendee clients, barcodes for the desks
        self.links: list[tuple[str, str, str]] = []  # (tickets path, ics path, barcode)
        self.fresh: deque[str] = deque()  # big-event barcodes never scanned
        self.scanned: list[str] = []  # big-event barcodes admitted
        self.small_barcodes: list[str] = []
        self.created: dict[str, set[int]] = {"big": set(), "small": set()}
        self.admitted = 0
        # the current small event and every small event opened
        self.small = [_small_event(f"{world['run_id']}-0")]
        self.small_lock = threading.Lock()
        # the seam's effects as answered
        self.seam_minted = 0
        self.seam_cancelled = 0
        self.seam_messages: set[str] = set()
        self.deadline = 0.0
        self.thread_errors: list[str] = []

    # -- intake ------------------------------------------------------------------------------

    def _next_small(self, seen: tuple[int, int]) -> tuple[int, int]:
        from django.db import connection

        with self.small_lock:
            if self.small[-1] == seen:
                try:
                    self.small.append(_small_event(f"{self.world['run_id']}-{len(self.small)}"))
                finally:
                    connection.close()
            return self.small[-1]

    def _attendee(self, index: int, n: int, answer: bool) -> dict:
        person = {"name": f"Soak {index}-{n}", "email": f"soak{index}.{n}@example.org"}
        if n % 2 == 0:
            person["phone"] = f"0470 {index:02d} {n % 10_000:04d}"
        if answer:
            person["answers"] = {str(self.world["question"].pk): "none"}
        return person

    def intake(self, index: int) -> None:
        rng = random.Random(index)
        route = self.routes["intake"]
        done: list[tuple[str, bytes, str, list[int]]] = []
        n = 0
        while time.monotonic() < self.deadline:
            n += 1
            roll = rng.random()
            small = None
            if roll < 0.05 and done:
                key, body, path, ids = rng.choice(done)
                kind = "replay"
            else:
                key = f"b8-{self.world['run_id']}-{index}-{n}"
                if roll < 0.10:
                    kind, event_id, ticket_id = "invalid", self.world["event"].pk, None
                elif roll < 0.35:
                    small = self.small[-1]
                    kind, (event_id, ticket_id) = "small", small
                else:
                    kind, event_id, ticket_id = "big", self.world["event"].pk, None
                if ticket_id is None:
                    ticket_id = self.world["free"].pk
                person = self._attendee(index, n, answer=kind != "invalid" and kind != "small")
                body = json.dumps({"ticket_id": ticket_id, "attendees": [person]}).encode()
                path = f"/api/v1/events/{event_id}/registrations"
            expected = {
                "big": {"201"},
                "replay": {"201 replay"},
                "small": {"201", "409 sold_out"},
                "invalid": {"400 question_required"},
            }[kind]
            start = time.perf_counter()
            try:
                status, headers, answer = call(
                    self.port,
                    "POST",
                    path,
                    body,
                    {"Content-Type": "application/json", "Idempotency-Key": key},
                )
            except Exception as exc:  # noqa: BLE001 — counted as an error of the route
                route.error(exc, f"{kind} {path}")
                continue
            seconds = time.perf_counter() - start
            outcome = _code(status, answer)
            registrations = []
            if status == 201:
                registrations = json.loads(answer)["registrations"]
                outcome = "201 replay" if headers.get("Idempotent-Replayed") == "true" else "201"
                got = [r["id"] for r in registrations]
                if kind == "replay" and got != ids:
                    outcome = "201 replay with other registrations"
            route.record(seconds, outcome, expected, f"{kind} {path} {answer[:160]!r}")
            if kind == "small" and outcome == "409 sold_out":
                self._next_small(small)
            if outcome != "201":
                continue
            ids = [r["id"] for r in registrations]
            done.append((key, body, path, ids))
            with self.lock:
                self.created[kind].update(ids)
                for r in registrations:
                    self.links.append(
                        (urlsplit(r["tickets_url"]).path, urlsplit(r["ics_url"]).path, r["barcode"])
                    )
                    if kind == "big":
                        self.fresh.append(r["barcode"])
                    else:
                        self.small_barcodes.append(r["barcode"])

    # -- attendee pages ----------------------------------------------------------------------

    def attendee(self, index: int) -> None:
        rng = random.Random(100 + index)
        while time.monotonic() < self.deadline:
            with self.lock:
                pick = rng.choice(self.links) if self.links else None
            if pick is None:
                time.sleep(0.05)  # nothing registered yet
                continue
            tickets, ics, barcode = pick
            is_ics = rng.random() < 0.5
            path = ics if is_ics else tickets
            route = self.routes["ics" if is_ics else "tickets"]
            tampered = rng.random() < 0.03
            if tampered:
                head, _, token = path.rstrip("/").rpartition("/")
                token = token.removesuffix(".ics")
                bad = token[:-1] + ("A" if token[-1] != "A" else "B")
                path = f"{head}/{bad}.ics" if is_ics else f"{head}/{bad}/"
            start = time.perf_counter()
            try:
                status, _, body = call(self.port, "GET", path)
            except Exception as exc:  # noqa: BLE001
                route.error(exc)
                continue
            seconds = time.perf_counter() - start
            if tampered:
                route.record(seconds, f"{status} tampered", {"404 tampered"})
            elif is_ics:
                ok = status == 200 and body.startswith(b"BEGIN:VCALENDAR\r\n")
                route.record(seconds, "200" if ok else f"{status} {body[:60]!r}", {"200"})
            else:
                ok = status == 200 and barcode.encode() in body
                route.record(seconds, "200" if ok else f"{status} {body[:60]!r}", {"200"})

    # -- desk --------------------------------------------------------------------------------

    def desk(self, index: int) -> None:
        rng = random.Random(200 + index)
        route = self.routes["scan"]
        event_id = self.world["event"].pk
        session = Session(self.port, f"b8-desk-{index}", self.password, f"/desk/{event_id}/")
        status, _, page = session.call("GET", f"/desk/{event_id}/")
        if status != 200:
            raise RuntimeError(f"scanner page: HTTP {status}")
        token = TOKEN_INPUT.search(page.decode()).group(1)
        while time.monotonic() < self.deadline:
            roll = rng.random()
            with self.lock:
                if roll < 0.05 and self.small_barcodes:
                    barcode, expected = rng.choice(self.small_barcodes), "need_manual_confirmation"
                elif roll < 0.10:
                    barcode, expected = f"9{rng.randrange(10**14):014d}", "invalid_ticket"
                elif roll < 0.30 and self.scanned:
                    barcode, expected = rng.choice(self.scanned), "already_registered"
                elif self.fresh:
                    barcode, expected = self.fresh.popleft(), "confirmed_registration"
                elif self.scanned:
                    barcode, expected = rng.choice(self.scanned), "already_registered"
                else:
                    barcode = None
            if barcode is None:
                time.sleep(0.05)  # nothing registered yet
                continue
            body = json.dumps({"barcode": barcode, "event_id": event_id}).encode()
            start = time.perf_counter()
            try:
                status, _, answer = session.call(
                    "POST",
                    "/desk/api/scan",
                    body,
                    {"Content-Type": "application/json", "X-CSRFToken": token},
                )
            except Exception as exc:  # noqa: BLE001
                route.error(exc, barcode)
                continue
            outcome = _code(status, answer)
            route.record(time.perf_counter() - start, outcome, {f"200 {expected}"}, barcode)
            if outcome == "200 confirmed_registration":
                with self.lock:
                    self.scanned.append(barcode)
                    self.admitted += 1

    # -- seam --------------------------------------------------------------------------------

    def _order(self, ref: str, version: int, kind: str, quantity: int) -> bytes:
        lines = []
        if kind == "order.confirmed":
            lines = [
                {
                    "ref": f"{ref}/1",
                    "kind": "ticket",
                    "ticket_id": self.world["host"].pk,
                    "quantity": quantity,
                    "price_total": f"{60 * quantity}.00",
                    "attendees": [{"name": f"Buyer {ref}", "email": f"{ref.lower()}@example.org"}],
                }
            ]
        return json.dumps(
            {
                "type": kind,
                "data": {
                    "order": {
                        "ref": ref,
                        "version": version,
                        "amount_total": f"{60 * quantity}.00",
                        "currency": "EUR",
                        "partner": {
                            "ref": f"P-{ref}",
                            "name": "Soak Host Customer",
                            "email": "customer@example.org",
                        },
                        "lines": lines,
                    }
                },
            }
        ).encode()

    def _send(self, msg_id: str, body: bytes) -> tuple[float, str, bytes]:
        at = datetime.now(tz=UTC)
        headers = {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": self.hook.sign(msg_id=msg_id, timestamp=at, data=body.decode()),
        }
        start = time.perf_counter()
        status, _, answer = call(self.port, "POST", "/seams/v1/sale", body, headers)
        return time.perf_counter() - start, _code(status, answer), answer

    def _send_copies(self, msg_id: str, body: bytes) -> list:
        """Two copies of one message at the same instant (two threads, one barrier): each
        answer, or the exception that stood for it."""
        answers: list = [None, None]
        barrier = threading.Barrier(2)

        def copy(i: int) -> None:
            try:
                barrier.wait(timeout=30)
                answers[i] = self._send(msg_id, body)
            except Exception as exc:  # noqa: BLE001 — reported by the caller
                answers[i] = exc

        other = threading.Thread(target=copy, args=(1,))
        other.start()
        copy(0)
        other.join(90)
        return answers

    def seam(self, index: int) -> None:
        rng = random.Random(300 + index)
        route = self.routes["seam"]
        sent: list[tuple[str, bytes]] = []
        sent_ids: set[str] = set()
        live: list[tuple[str, int]] = []  # (order ref, quantity) confirmed, not cancelled
        cancelled: list[tuple[str, int]] = []
        n = 0
        while time.monotonic() < self.deadline:
            n += 1
            roll = rng.random()
            pair = False
            if roll < 0.20 and sent:
                msg_id, body = rng.choice(sent)
                expected, effect = {"200 duplicate"}, None
            elif roll < 0.27 and live:
                ref, quantity = live.pop(rng.randrange(len(live)))
                msg_id, body = f"msg_{ref}_v2", self._order(ref, 2, "order.cancelled", 0)
                expected, effect = {"200 applied"}, ("cancelled", ref, quantity)
            elif roll < 0.30 and cancelled:
                ref, quantity = rng.choice(cancelled)
                msg_id = f"msg_{ref}_late_{n}"
                body = self._order(ref, 1, "order.confirmed", quantity)
                expected, effect = {"200 stale"}, None
            else:
                ref, quantity = f"B8-{self.world['run_id']}-{index}-{n}", rng.choice((1, 2))
                msg_id, body = f"msg_{ref}_v1", self._order(ref, 1, "order.confirmed", quantity)
                expected, effect = {"200 applied"}, ("minted", ref, quantity)
                pair = rng.random() < 0.10
            if pair:
                outcomes = []
                for answer in self._send_copies(msg_id, body):
                    if isinstance(answer, BaseException) or answer is None:
                        route.error(answer or TimeoutError("copy never answered"), msg_id)
                        continue
                    seconds, outcome, raw = answer
                    outcomes.append(outcome)
                    route.record(seconds, outcome, {"200 applied", "200 duplicate"}, msg_id)
                if sorted(outcomes) != ["200 applied", "200 duplicate"]:
                    with route.lock:
                        route.errors.append(f"two copies of {msg_id} answered {outcomes}")
                applied = "200 applied" in outcomes
            else:
                try:
                    seconds, outcome, raw = self._send(msg_id, body)
                except Exception as exc:  # noqa: BLE001
                    route.error(exc, msg_id)
                    continue
                route.record(seconds, outcome, expected, f"{msg_id} {raw[:160]!r}")
                applied = outcome == "200 applied"
            if msg_id not in sent_ids:
                sent_ids.add(msg_id)
                sent.append((msg_id, body))
            with self.lock:
                self.seam_messages.add(msg_id)
                if effect and applied:
                    what, ref, quantity = effect
                    if what == "minted":
                        self.seam_minted += quantity
                        live.append((ref, quantity))
                    else:
                        self.seam_cancelled += quantity
                        cancelled.append((ref, quantity))

    # -- dashboard ---------------------------------------------------------------------------

    def dashboard(self, index: int) -> None:
        route = self.routes["dashboard"]
        path = f"/admin/events/event/{self.world['event'].pk}/dashboard/"
        session = Session(self.port, "b8-manager", self.password, path)
        name = self.world["event"].name.encode()
        while time.monotonic() < self.deadline:
            start = time.perf_counter()
            try:
                status, _, body = session.call("GET", path)
            except Exception as exc:  # noqa: BLE001
                route.error(exc)
                continue
            ok = status == 200 and name in body
            route.record(time.perf_counter() - start, "200" if ok else f"{status}", {"200"})
            time.sleep(DASHBOARD_PAUSE)  # a staff member watching the page

    # -- run ---------------------------------------------------------------------------------

    def run(self) -> tuple[float, float]:
        from django.db import connection

        threads = []
        for role, count in CLIENTS.items():
            for i in range(count):
                threads.append(threading.Thread(target=self._guard, args=(role, i), daemon=True))
        self.deadline = time.monotonic() + self.seconds
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.seconds + 180)
        if any(t.is_alive() for t in threads):
            self.thread_errors.append("a client thread was still running 180 s after the end")
        connection.close()
        return start, time.monotonic()

    def _guard(self, role: str, index: int) -> None:
        from django.db import connection

        try:
            getattr(self, role)(index)
        except Exception as exc:  # noqa: BLE001 — reported as a failed check
            self.thread_errors.append(f"{role} {index}: {type(exc).__name__}: {exc}"[:300])
        finally:
            connection.close()


# --- drain and checks --------------------------------------------------------------------------


def _pending(world: dict) -> dict[str, int]:
    from events.models import MailOutbox, MailRegistration, OutboxState
    from leads.models import LeadRequest
    from sms.models import SmsOutbox, SmsState

    schedulers = [world["mail"], world["sms"]]
    return {
        "unsent scheduler rows": MailRegistration.objects.filter(
            scheduler__in=schedulers, mail_sent=False, registration__state__in=("open", "done")
        ).count(),
        "queued mails": MailOutbox.objects.filter(
            scheduler=world["mail"], state=OutboxState.QUEUED
        ).count(),
        "queued sms": SmsOutbox.objects.filter(
            scheduler=world["sms"], state=SmsState.QUEUED
        ).count(),
        "lead requests": LeadRequest.objects.filter(event=world["event"]).count(),
    }


def _drain(world: dict) -> tuple[float, dict[str, int]]:
    start = time.monotonic()
    while True:
        left = _pending(world)
        if not any(left.values()) or time.monotonic() - start > DRAIN_DEADLINE:
            return time.monotonic() - start, left
        time.sleep(1.0)  # the worker works; the soak waits for it


def _pairs_over_one(model, **filters) -> int:
    from django.db.models import Count

    return (
        model.objects.filter(**filters)
        .values("scheduler_id", "registration_id")
        .annotate(k=Count("id"))
        .filter(k__gt=1)
        .count()
    )


def _checks(world: dict, traffic: Traffic, smtp: SmtpSink, gateway: GatewaySink) -> dict:
    from events.models import MailOutbox, OutboxState, Registration
    from events.services import seats
    from leads.models import LeadProvenanceRegistration
    from seams.models import SeamInbox
    from sms.models import SmsOutbox, SmsState

    event = world["event"]
    out: dict = {}

    # oversell and the ledger, every soak event
    events = [event] + [type(event).objects.get(pk=pk) for pk, _ in traffic.small]
    oversell, audit_problems, sold_out_events = 0, [], 0
    for e in events:
        summary = seats.event_summary(event=e)
        if summary.max is not None and summary.taken > summary.max:
            oversell += summary.taken - summary.max
        if summary.max is not None and summary.taken == summary.max:
            sold_out_events += 1
        audit_problems += [f"event {e.pk}: {p}" for p in seats.audit(event=e)]
    out["oversell"] = oversell
    out["audit"] = audit_problems
    out["small_events"] = len(events) - 1
    out["small_sold_out"] = sold_out_events

    # intake: every 201 is one registration, replays added none
    big = Registration.objects.filter(event=event, ticket=world["free"])
    small = Registration.objects.filter(event_id__in=[pk for pk, _ in traffic.small])
    out["intake"] = {
        "big_registrations": big.count(),
        "big_201": len(traffic.created["big"]),
        "small_registrations": small.count(),
        "small_201": len(traffic.created["small"]),
    }
    # desk: every admission answered once is one attended registration
    out["desk"] = {"attended": big.filter(state="done").count(), "admitted": traffic.admitted}
    # seam: effects equal the answers
    host = Registration.objects.filter(event=event, ticket=world["host"])
    inbox = SeamInbox.objects.filter(message_id__in=traffic.seam_messages).count()
    out["seam"] = {
        "minted": host.count(),
        "minted_answered": traffic.seam_minted,
        "cancelled": host.filter(state="cancel").count(),
        "cancelled_answered": traffic.seam_cancelled,
        "inbox_rows": inbox,
        "distinct_messages": len(traffic.seam_messages),
    }

    # mail: one outbox row per (scheduler, registration), each delivered once
    live = Registration.objects.filter(event=event, state__in=("open", "done"))
    mails = MailOutbox.objects.filter(scheduler=world["mail"])
    received = smtp.counts()
    sent_ids = set(mails.filter(state=OutboxState.SENT).values_list("message_id", flat=True))
    mine = {k: v for k, v in received.items() if k in sent_ids or k.strip("<>") in sent_ids}
    out["mail"] = {
        "outbox_rows": mails.count(),
        "pairs_over_one": _pairs_over_one(MailOutbox, scheduler=world["mail"]),
        "registrations_without": live.exclude(outbox_rows__scheduler=world["mail"]).count(),
        "sent": len(sent_ids),
        "failed": mails.filter(state=OutboxState.FAILED).count(),
        "received": sum(received.values()),
        "received_twice": sum(1 for v in received.values() if v > 1),
        "sent_not_received": len(sent_ids) - len(mine),
    }
    # sms: the same, for registrations with a phone
    sms = SmsOutbox.objects.filter(scheduler=world["sms"])
    got = gateway.counts()
    sms_sent = set(sms.filter(state=SmsState.SENT).values_list("reference", flat=True))
    out["sms"] = {
        "outbox_rows": sms.count(),
        "pairs_over_one": _pairs_over_one(SmsOutbox, scheduler=world["sms"]),
        "registrations_without": live.exclude(phone="")
        .exclude(sms_outbox_rows__scheduler=world["sms"])
        .count(),
        "sent": len(sms_sent),
        "failed": sms.filter(state=SmsState.FAILED).count(),
        "received": sum(got.values()),
        "received_twice": sum(1 for v in got.values() if v > 1),
        "sent_not_received": len(sms_sent - set(got)),
        "refused": gateway.refused,
    }
    # leads: one per (rule, registration) for every live registration
    rows = LeadProvenanceRegistration.objects.filter(rule=world["rule"])
    out["leads"] = {
        "rows": rows.count(),
        "registrations": rows.values("registration_id").distinct().count(),
        "registrations_without": live.exclude(lead_rows__rule=world["rule"]).count(),
    }
    return out


LOG_PROBLEM = re.compile(r"\b(ERROR|CRITICAL|Traceback|WORKER TIMEOUT)\b")


def _log_problems(stack: Stack) -> dict[str, list[str]]:
    found = {}
    for name in ("web", "worker", "beat"):
        lines = [line for line in stack.log(name).splitlines() if LOG_PROBLEM.search(line)]
        if lines:
            found[name] = lines
    return found


def _access_statuses(stack: Stack) -> Counter[str]:
    """5xx answers in gunicorn's access log (`h "m U" s b Mms`)."""
    out: Counter[str] = Counter()
    for line in stack.log("web").splitlines():
        match = re.search(r'"(\w+) (\S+)" (\d{3}) ', line)
        if match and match.group(3).startswith("5"):
            out[f"{match.group(3)} {match.group(1)} {match.group(2)}"] += 1
    return out


# --- run ---------------------------------------------------------------------------------------


def _route_rows(traffic: Traffic, seconds: float) -> list[dict]:
    rows = []
    for route in traffic.routes.values():
        n = len(route.latencies)
        p50, p99 = _percentiles(route.latencies)
        answers = ", ".join(f"{k} ×{v}" for k, v in route.answers.most_common())
        rows.append(
            {
                "bench": "B8",
                "what": f"soak {route.name}",
                "measured": (
                    f"{n:,} served ({n / seconds:,.1f}/s), p50 {p50:.1f} ms, p99 {p99:.1f} ms"
                ),
                "target": "(reported)",
                "ok": None,
                "checks": (f"errors {len(route.errors)}; " + answers)[:400],
                "checks_ok": not route.errors,
            }
        )
    return rows


def run(*, quick: bool = False) -> list[dict]:
    common.setup()
    from django.db import connection

    from events.services import audit, nudge
    from events.services import events as event_services

    seconds = SECONDS[quick]
    password = "b8-" + secrets.token_urlsafe(12)
    seam_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    sms_token = secrets.token_urlsafe(24)
    world = _world(password)
    smtp = SmtpSink()
    gateway = GatewaySink(sms_token)
    stack: Stack | None = None
    sampler: Sampler | None = None
    traffic: Traffic | None = None
    try:
        stack = Stack(seam_secret=seam_secret, sms_token=sms_token, smtp=smtp, gateway=gateway)
        traffic = Traffic(stack.port, world, password, seam_secret, seconds)
        sampler = Sampler(stack, SAMPLE_EVERY[quick]).start()
        sampler.sample()
        start, end = traffic.run()
        sampler.sample()
        drain_seconds, left = _drain(world)
        sampler.stop()
        sampler.sample()
        alive = {name: proc.poll() is None for name, proc in stack.procs.items()}
        stack.stop()
        log_problems = _log_problems(stack)
        server_5xx = _access_statuses(stack)
        checks = _checks(world, traffic, smtp, gateway)
    finally:
        if sampler is not None:
            sampler.stopping.set()
        if stack is not None:
            stack.stop()
        smtp.stop()
        gateway.stop()
        # The soak's events leave the passes' work list: archived.
        with mock.patch.object(nudge, "after_commit"):
            smalls = [pk for pk, _ in traffic.small] if traffic is not None else []
            for pk in [world["event"].pk, *smalls]:
                event = type(world["event"]).objects.get(pk=pk)
                event_services.update_event(event=event, active=False, actor=audit.SYSTEM)
        connection.close()

    elapsed = end - start
    memory = _memory(sampler.samples, start, end, SAMPLE_EVERY[quick])
    rows = _route_rows(traffic, elapsed)

    errors = sum(len(r.errors) for r in traffic.routes.values()) + len(traffic.thread_errors)
    served = sum(len(r.latencies) for r in traffic.routes.values())
    # intended refusals and no-effect answers: sold_out, question_required, a tampered link's
    # 404, the desk's refusals, the seam's duplicate / stale (every expected answer but success)
    refusals = sum(
        v for r in traffic.routes.values() for k, v in r.answers.items() if k not in SUCCESS
    ) - sum(len(r.errors) for r in traffic.routes.values())
    problems = [e for r in traffic.routes.values() for e in r.errors[:3]] + traffic.thread_errors
    problems += [f"{n} died" for n, up in alive.items() if not up]
    problems += [
        f"{n}: {len(lines)} line(s), e.g. {lines[0][:160]}" for n, lines in log_problems.items()
    ]
    problems += [f"5xx in the access log: {dict(server_5xx)}"] if server_5xx else []
    rows.append(
        {
            "bench": "B8",
            "what": f"soak, all routes, {elapsed:.0f} s, {sum(CLIENTS.values())} client threads",
            "measured": (
                f"{served:,} served ({served / elapsed:,.0f}/s), {refusals:,} intended refusals"
            ),
            "target": "errors 0",
            "ok": None,
            "checks": (
                f"errors {errors}; server 5xx {sum(server_5xx.values())}; "
                f"ERROR/Traceback lines {sum(len(v) for v in log_problems.values())}"
                + ("; " + "; ".join(problems) if problems else "")
            )[:600],
            "checks_ok": not problems and errors == 0,
        }
    )

    seat_problems = list(checks["audit"][:3])
    intake = checks["intake"]
    if intake["big_registrations"] != intake["big_201"]:
        seat_problems.append(
            f"big event: {intake['big_registrations']} rows for {intake['big_201']} 201s"
        )
    if intake["small_registrations"] != intake["small_201"]:
        seat_problems.append(
            f"small events: {intake['small_registrations']} rows for {intake['small_201']} 201s"
        )
    desk = checks["desk"]
    if desk["attended"] != desk["admitted"]:
        seat_problems.append(f"attended {desk['attended']} for {desk['admitted']} admissions")
    seam = checks["seam"]
    if (seam["minted"], seam["cancelled"], seam["inbox_rows"]) != (
        seam["minted_answered"],
        seam["cancelled_answered"],
        seam["distinct_messages"],
    ):
        seat_problems.append(f"seam effects {seam}")
    rows.append(
        {
            "bench": "B8",
            "what": "soak: seats and effects (every soak event)",
            "measured": (
                f"{intake['big_201'] + intake['small_201']:,} registered by intake, "
                f"{checks['small_sold_out']}/{checks['small_events']} small events sold out, "
                f"{desk['admitted']:,} admitted, seam minted {seam['minted']:,} / "
                f"cancelled {seam['cancelled']:,}"
            ),
            "target": "oversell 0",
            "ok": None,
            "checks": (
                f"oversell {checks['oversell']}, "
                + (
                    "audit clean, effects = answers"
                    if not seat_problems
                    else "; ".join(seat_problems)
                )
            )[:400],
            "checks_ok": checks["oversell"] == 0 and not seat_problems,
        }
    )

    mail, sms, leads = checks["mail"], checks["sms"], checks["leads"]
    send_problems = []
    if any(left.values()):
        send_problems.append(f"not drained after {DRAIN_DEADLINE:.0f} s: {left}")
    for name, figures in (("mail", mail), ("sms", sms)):
        for key in (
            "pairs_over_one",
            "registrations_without",
            "failed",
            "received_twice",
            "sent_not_received",
        ):
            if figures[key]:
                send_problems.append(f"{name} {key} {figures[key]}")
    if sms["refused"]:
        send_problems.append(f"sms refused by the gateway {sms['refused']}")
    if leads["registrations_without"] or leads["rows"] != leads["registrations"]:
        send_problems.append(f"leads {leads}")
    rows.append(
        {
            "bench": "B8",
            "what": "soak: sends (after_sub mail + sms, attendee lead rule)",
            "measured": (
                f"{mail['sent']:,} mails, {sms['sent']:,} SMS, {leads['rows']:,} leads; "
                f"drained {drain_seconds:.0f} s after the traffic"
            ),
            "target": "duplicate sends 0",
            "ok": None,
            "checks": (
                f"duplicate sends {mail['received_twice'] + sms['received_twice']}, "
                f"duplicate rows {mail['pairs_over_one'] + sms['pairs_over_one']}, "
                + (
                    "every registration mailed, texted (with a phone) and led once"
                    if not send_problems
                    else "; ".join(send_problems)
                )
            )[:400],
            "checks_ok": not send_problems,
        }
    )

    for proc in memory:
        rows.append(
            {
                "bench": "B8",
                "what": f"soak RSS {proc['process']} (pid {proc['pid']})",
                "measured": (
                    f"{proc['start_mib']:.1f} → {proc['end_mib']:.1f} MiB, slope "
                    f"{proc['slope_mib_per_min']:+.2f} MiB/min "
                    f"(second half {proc['second_half_slope_mib_per_min']:+.2f})"
                ),
                "target": f"no growth (2nd half < {MEMORY_SLOPE_TARGET:.0f} MiB/min)",
                "ok": proc["second_half_slope_mib_per_min"] < MEMORY_SLOPE_TARGET,
                "checks": "" if proc["whole_run"] else "not alive the whole run",
                "checks_ok": proc["whole_run"],
            }
        )

    # A failed check keeps the processes' output for reading: bench/results/b8_soak_logs/.
    kept = None
    if any(row.get("checks_ok") is False for row in rows):
        kept = common.RESULTS / "b8_soak_logs"
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for path in stack.logs.values():
            shutil.copy(path, kept / path.name)
    stack.cleanup()
    common.write_result(
        "b8_soak",
        {
            "quick": quick,
            "logs": str(kept) if kept else None,
            "seconds": round(elapsed, 1),
            "clients": CLIENTS,
            "stack": "gunicorn config/gunicorn.py (2 gthread × 16), celery worker -c 2, beat",
            "routes": {
                key: {
                    "served": len(r.latencies),
                    "p50_ms": round(_percentiles(r.latencies)[0], 2),
                    "p99_ms": round(_percentiles(r.latencies)[1], 2),
                    "answers": dict(r.answers),
                    "errors": r.errors[:50],
                }
                for key, r in traffic.routes.items()
            },
            "thread_errors": traffic.thread_errors,
            "log_problems": {k: v[:50] for k, v in log_problems.items()},
            "server_5xx": dict(server_5xx),
            "drain_seconds": round(drain_seconds, 1),
            "left_after_drain": left,
            "checks": checks,
            "memory": memory,
            "rows": rows,
        },
    )
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    for row in run(quick="--quick" in sys.argv):
        print(row)
