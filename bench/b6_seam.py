"""B6 — signed sale-seam webhooks over HTTP (docs/benchmarks.md, BENCHMARKS.md: ≥ 500/s).

gunicorn (2 sync workers, the B2 server) on a free port against the bench database; 4 sender
threads POST signed `order.confirmed` messages (one ticket line, quantity 2) to
/seams/v1/sale, every fifth message a re-delivery of one already sent (same webhook-id and body,
a fresh timestamp and signature, as a Standard Webhooks sender retries): 20% duplicates.
Measured: messages/s (duplicates included), p50/p99. Checks: every first delivery answers
`applied`, every re-delivery `duplicate`, registrations == 2 × distinct messages (duplicates
caused no effect), one inbox row per distinct message.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta

from bench import common
from bench.b2_intake import Server, request

SENDERS = 4
TARGET = 500.0  # messages/s at 4 senders
DUPLICATE_EVERY = 5  # every fifth message is a re-delivery: 20%


def _percentiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        value = samples[0] * 1000 if samples else 0.0
        return value, value
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1000, cuts[98] * 1000


def _ticket():
    from django.utils import timezone

    from events.models import Ticket
    from events.services import audit
    from events.services import events as event_services

    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name=f"B6 seam {secrets.token_hex(3)}",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        seats_limited=False,
        is_published=True,
        actor=audit.SYSTEM,
    )
    return Ticket.objects.create(event=event, name="Sold by the host", price=60)


def _message(ticket_id: int, order_ref: str) -> bytes:
    return json.dumps(
        {
            "type": "order.confirmed",
            "data": {
                "order": {
                    "ref": order_ref,
                    "version": 1,
                    "amount_total": "120.00",
                    "currency": "EUR",
                    "partner": {"ref": "P-B6", "name": "Bench Host", "email": "b6@example.org"},
                    "lines": [
                        {
                            "ref": f"{order_ref}/1",
                            "kind": "ticket",
                            "ticket_id": ticket_id,
                            "quantity": 2,
                            "price_total": "120.00",
                            "attendees": [{"name": "Bench Attendee", "email": "a@example.org"}],
                        }
                    ],
                }
            },
        }
    ).encode()


def _send(port: int, hook, msg_id: str, body: bytes) -> tuple[int, str, float]:
    at = datetime.now(tz=UTC)
    headers = {
        "Content-Type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": hook.sign(msg_id=msg_id, timestamp=at, data=body.decode()),
    }
    start = time.perf_counter()
    status, answer = request(port, "POST", "/seams/v1/sale", body, headers)
    elapsed = time.perf_counter() - start
    try:
        kind = json.loads(answer).get("status", f"http {status}")
    except ValueError:
        kind = f"http {status}"
    return status, kind, elapsed


def run(*, quick: bool = False) -> list[dict]:
    from standardwebhooks.webhooks import Webhook

    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    os.environ["EVENT_SEAM_SECRET"] = secret  # before the server starts: it reads the env
    common.setup()
    from events.models import Registration
    from seams.models import SeamInbox

    per_sender = 100 if quick else 600  # messages per sender, duplicates included
    ticket = _ticket()
    run_id = secrets.token_hex(4)
    hook = Webhook(secret)
    server = Server()
    barrier = threading.Barrier(SENDERS + 1)
    latencies: list[list[float]] = [[] for _ in range(SENDERS)]
    answers: list[list[tuple[bool, int, str]]] = [[] for _ in range(SENDERS)]
    errors: list[str] = []

    def worker(index: int) -> None:
        sent: list[tuple[str, bytes]] = []
        try:
            barrier.wait()
            for n in range(per_sender):
                again = n % DUPLICATE_EVERY == DUPLICATE_EVERY - 1
                if again:
                    msg_id, body = sent[(n * 7) % len(sent)]
                else:
                    order_ref = f"B6-{run_id}-{index}-{n}"
                    msg_id, body = f"msg_{order_ref}", _message(ticket.pk, order_ref)
                    sent.append((msg_id, body))
                status, kind, elapsed = _send(server.port, hook, msg_id, body)
                latencies[index].append(elapsed)
                answers[index].append((again, status, kind))
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            errors.append(repr(exc))

    try:
        elapsed = common.run_released(worker, SENDERS, barrier)
    finally:
        server.stop()

    flat = [a for per in answers for a in per]
    distinct = sum(1 for again, _, _ in flat if not again)
    duplicates = len(flat) - distinct
    problems = list(errors[:3])
    wrong = [
        (again, status, kind)
        for again, status, kind in flat
        if (status, kind) != (200, "duplicate" if again else "applied")
    ]
    if wrong:
        problems.append(f"{len(wrong)} unexpected answers, e.g. {wrong[:3]}")
    regs = Registration.objects.filter(ticket=ticket).count()
    if regs != 2 * distinct:
        problems.append(f"registrations {regs} for {distinct} distinct 2-ticket orders")
    inbox = SeamInbox.objects.filter(message_id__startswith=f"msg_B6-{run_id}-").count()
    if inbox != distinct:
        problems.append(f"inbox rows {inbox} for {distinct} distinct messages")
    p50, p99 = _percentiles([s for per in latencies for s in per])
    rate = common.rate(len(flat), elapsed)
    result = {
        "senders": SENDERS,
        "messages": len(flat),
        "distinct": distinct,
        "duplicates": duplicates,
        "seconds": elapsed,
        "rate": rate,
        "p50_ms": p50,
        "p99_ms": p99,
        "registrations": regs,
        "problems": problems,
    }
    common.write_result("b6_seam", result)
    return [
        {
            "bench": "B6",
            "what": f"signed seam webhooks/s, {SENDERS} senders, 20% duplicates (p50/p99 ms)",
            "measured": f"{rate:.0f}/s ({p50:.1f}/{p99:.1f})",
            "target": f"≥ {TARGET:.0f}/s",
            "ok": rate >= TARGET,
            "checks": "; ".join(problems)
            or f"duplicates {duplicates} with no effect; registrations {regs} = 2 × {distinct}",
            "checks_ok": not problems,
        }
    ]
