"""B2 — public intake over HTTP, and B5 — /ics over HTTP (docs/benchmarks.md).

The bench starts gunicorn with 2 sync workers, a fresh connection per request, on a free port
against the bench database, with a settings module that only lifts the per-client rate limits
(every request comes from 127.0.0.1). This is not the Procfile's configuration
(config/gunicorn.py: 2 gthread workers × 16 threads, keep-alive, an access log): the figures
stay comparable with every earlier run; docs/benchmarks.md ("Server shape") gives what the
Procfile's configuration measured. Then:

B2. 1, 4 and 16 client threads POST /api/v1/events/<id>/registrations (one attendee, a free
    ticket, one mandatory question) until the event sells out: registrations/s, p50/p99.
    Checks: 201s == seats, every other answer is 409 sold_out, holders == seats (oversell 0),
    `seats.audit()` clean.
B5. 1, 4 and 16 client threads GET /ics/<token>.ics for registrations of that event:
    responses/s, p50/p99. Checks: every answer is 200 with a VCALENDAR.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from bench import common

CLIENTS = (1, 4, 16)
TARGET_B2 = 450.0  # registrations/s at 4 clients (raised from 250)
TARGET_B5 = 1_500.0  # /ics responses/s at 4 clients (raised from 520)
SETTINGS = """\
from config.settings import *  # noqa: F403

# B2/B5 hammer from one address: lift the per-client limits for this process only.
EVENT_RATE_LIMITS = {"intake": (1_000_000_000, 60), "token": (1_000_000_000, 60)}
"""


def _sizes(quick: bool) -> dict:
    return {"seats": 300, "ics": 400} if quick else {"seats": 3_000, "ics": 4_000}


# --- the server ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gunicorn on a free port, in its own process group, stopped on exit."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-b2-"))
        (self.tmp / "bench_b2_settings.py").write_text(SETTINGS)
        self.log = self.tmp / "gunicorn.log"
        env = os.environ.copy()
        env["DJANGO_SETTINGS_MODULE"] = "bench_b2_settings"
        env["PYTHONPATH"] = os.pathsep.join([str(self.tmp), str(common.ROOT)])
        gunicorn = Path(sys.executable).with_name("gunicorn")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(gunicorn),
                    "config.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{self.port}",
                    "--workers",
                    "2",
                    "--worker-class",
                    "sync",
                    "--backlog",
                    "256",
                    "--log-level",
                    "warning",
                ],
                cwd=common.ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{self.log.read_text()[-2000:]}")
            try:
                status, _ = request(self.port, "GET", "/healthz")
            except OSError:
                time.sleep(0.2)  # a server starting up, not a race under test
                continue
            if status == 200:
                # Warm both workers (imports, connections, templates).
                for _ in range(20):
                    request(self.port, "GET", "/healthz")
                return
        raise RuntimeError(f"gunicorn did not answer:\n{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def request(port: int, method: str, path: str, body: bytes | None = None, headers=None):
    """One request on a fresh connection (gunicorn's sync workers close after each answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# --- the world -------------------------------------------------------------------------------


def _event(seats_max: int):
    from django.utils import timezone

    from events.models import Question, QuestionType, Ticket
    from events.services import audit
    from events.services import events as event_services

    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name=f"B2 intake {secrets.token_hex(3)}",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        date_tz="Europe/Brussels",
        seats_limited=True,
        seats_max=seats_max,
        is_published=True,
        ticket_instructions="Bring the QR code.",
        actor=audit.SYSTEM,
    )
    ticket = Ticket.objects.create(event=event, name="Free")
    question = Question.objects.create(
        event=event,
        title="Diet",
        question_type=QuestionType.TEXT_BOX,
        is_mandatory_answer=True,
    )
    return event, ticket, question


def _percentiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        value = samples[0] * 1000 if samples else 0.0
        return value, value
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1000, cuts[98] * 1000


# --- B2 --------------------------------------------------------------------------------------


def _intake(port: int, clients: int, seats_max: int) -> dict:
    from events.models import Registration
    from events.services import seats

    event, ticket, question = _event(seats_max)
    path = f"/api/v1/events/{event.pk}/registrations"
    barrier = threading.Barrier(clients + 1)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    created = [0] * clients
    refusals: list[str] = []
    errors: list[str] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            n = 0
            while True:
                body = json.dumps(
                    {
                        "ticket_id": ticket.pk,
                        "attendees": [
                            {
                                "name": f"Bench {index}-{n}",
                                "email": f"bench{index}.{n}@example.org",
                                "answers": {str(question.pk): "none"},
                            }
                        ],
                    }
                ).encode()
                start = time.perf_counter()
                status, answer = request(
                    port, "POST", path, body, {"Content-Type": "application/json"}
                )
                latencies[index].append(time.perf_counter() - start)
                if status == 201:
                    created[index] += 1
                    n += 1
                    continue
                code = json.loads(answer).get("error", {}).get("code", f"http {status}")
                refusals.append(code)
                return
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            errors.append(repr(exc))

    elapsed = common.run_released(worker, clients, barrier)

    holders = Registration.objects.filter(event=event, state__in=("open", "done")).count()
    problems = []
    if holders > seats_max:
        problems.append(f"OVERSELL {holders - seats_max}")
    if holders != seats_max or sum(created) != seats_max:
        problems.append(f"holders {holders}, 201s {sum(created)} for {seats_max} seats")
    if set(refusals) - {"sold_out"} or len(refusals) != clients:
        problems.append(f"refusals {sorted(set(refusals))} x{len(refusals)}")
    problems += errors[:3]
    problems += seats.audit(event=event)
    p50, p99 = _percentiles([s for per in latencies for s in per])
    return {
        "event": event,
        "clients": clients,
        "registrations": sum(created),
        "seconds": elapsed,
        "rate": common.rate(sum(created), elapsed),
        "p50_ms": p50,
        "p99_ms": p99,
        "oversell": max(0, holders - seats_max),
        "problems": problems,
    }


# --- B5 --------------------------------------------------------------------------------------


def _ics(port: int, clients: int, total: int, paths: list[str]) -> dict:
    barrier = threading.Barrier(clients + 1)
    per_client = total // clients
    latencies: list[list[float]] = [[] for _ in range(clients)]
    bad: list[str] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for n in range(per_client):
                path = paths[(index * per_client + n) % len(paths)]
                start = time.perf_counter()
                status, body = request(port, "GET", path)
                latencies[index].append(time.perf_counter() - start)
                if status != 200 or not body.startswith(b"BEGIN:VCALENDAR\r\n"):
                    bad.append(f"http {status}")
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            bad.append(repr(exc))

    elapsed = common.run_released(worker, clients, barrier)
    done = per_client * clients
    p50, p99 = _percentiles([s for per in latencies for s in per])
    return {
        "clients": clients,
        "responses": done,
        "seconds": elapsed,
        "rate": common.rate(done - len(bad), elapsed),
        "p50_ms": p50,
        "p99_ms": p99,
        "problems": sorted(set(bad))[:3],
    }


# --- run -------------------------------------------------------------------------------------


def run(*, quick: bool = False) -> list[dict]:
    common.setup()
    from django.db import connection
    from django.urls import reverse

    from events.models import Registration
    from events.services import capability

    sizes = _sizes(quick)
    server = Server()
    try:
        b2 = [_intake(server.port, clients, sizes["seats"]) for clients in CLIENTS]
        registrations = list(
            Registration.objects.filter(event=b2[-1]["event"]).order_by("pk")[:200]
        )
        paths = [
            reverse("ics", kwargs={"token": capability.mint(purpose="ics", subject=r)})
            for r in registrations
        ]
        b5 = [_ics(server.port, clients, sizes["ics"], paths) for clients in CLIENTS]
    finally:
        server.stop()
        connection.close()

    rows = []
    for result in b2:
        at_target = result["clients"] == 4
        rows.append(
            {
                "bench": "B2",
                "what": f"intake over HTTP, {result['clients']} client(s)",
                "measured": (
                    f"{result['rate']:,.0f} reg/s (p50 {result['p50_ms']:.1f} ms, "
                    f"p99 {result['p99_ms']:.1f} ms)"
                ),
                "target": f"≥ {TARGET_B2:.0f}/s" if at_target else "(reported)",
                "ok": (result["rate"] >= TARGET_B2) if at_target else None,
                "checks": (
                    f"oversell {result['oversell']}, {result['registrations']} registered, "
                    + ("audit clean" if not result["problems"] else "; ".join(result["problems"]))
                ),
                "checks_ok": not result["problems"],
            }
        )
    for result in b5:
        at_target = result["clients"] == 4
        rows.append(
            {
                "bench": "B5",
                "what": f"/ics over HTTP, {result['clients']} client(s)",
                "measured": (
                    f"{result['rate']:,.0f} responses/s (p50 {result['p50_ms']:.1f} ms, "
                    f"p99 {result['p99_ms']:.1f} ms)"
                ),
                "target": f"≥ {TARGET_B5:.0f}/s" if at_target else "(reported)",
                "ok": (result["rate"] >= TARGET_B5) if at_target else None,
                "checks": (
                    f"{result['responses']} × 200 VCALENDAR"
                    if not result["problems"]
                    else "; ".join(result["problems"])
                ),
                "checks_ok": not result["problems"],
            }
        )
    common.write_result(
        "b2_intake",
        {
            "quick": quick,
            "server": "gunicorn, 2 sync workers",
            "intake": [{k: v for k, v in r.items() if k != "event"} for r in b2],
            "ics": b5,
            "rows": rows,
        },
    )
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    for row in run(quick="--quick" in sys.argv):
        print(row)
