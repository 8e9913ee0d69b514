"""B4 — the desk scan over HTTP (docs/benchmarks.md).

gunicorn (2 sync workers, B2's `Server`; not the Procfile's gthread configuration) against
the bench database; one event with 50,000 open registrations (5,000 with --quick). Each
scanner is a desk user that logs in through the admin login form (session cookie + CSRF
token, as the browser does) and POSTs /desk/api/scan with the X-CSRFToken header and a fresh
`nonce` per scan (as the scanner page sends; a retry repeats it).

1. 1 then 4 concurrent scanners each scan their own share of distinct tickets: scans/s and
   p50/p99 latency. Checks: every answer is 200 `confirmed_registration`, the event's attended
   count equals the tickets scanned, `seats.audit()` is clean.
2. Duplicates: the 4 scanners scan the same 200 tickets at once. Check: exactly one
   `confirmed_registration` per ticket, every other answer `already_registered`.
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import sys
import threading
import time
from collections import Counter
from datetime import timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

from bench import common
from bench.b2_intake import Server, _percentiles

TARGET_RATE = 560.0  # scans/s at 4 scanners
TARGET_P99_MS = 50.0
PASSWORD = "bench-desk-" + secrets.token_hex(8)
TOKEN_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _sizes(quick: bool) -> dict:
    if quick:
        return {"registrations": 5_000, "scans": {1: 300, 4: 1_200}, "duplicates": 50}
    return {"registrations": 50_000, "scans": {1: 1_500, 4: 8_000}, "duplicates": 200}


class Scanner:
    """One desk: a logged-in session (cookies) and its CSRF token."""

    def __init__(self, port: int, username: str, event_id: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}
        status, _, body = self.call("GET", "/admin/login/?next=/desk/")
        token = TOKEN_INPUT.search(body.decode()).group(1)
        form = urlencode(
            {
                "username": username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": token,
                "next": "/desk/",
            }
        ).encode()
        status, headers, _ = self.call(
            "POST",
            "/admin/login/",
            form,
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        if status != 302 or "sessionid" not in self.cookies:
            raise RuntimeError(f"desk login failed for {username}: HTTP {status}")
        status, _, body = self.call("GET", f"/desk/{event_id}/")
        if status != 200:
            raise RuntimeError(f"scanner page: HTTP {status}")
        self.token = TOKEN_INPUT.search(body.decode()).group(1)

    def call(self, method: str, path: str, body: bytes | None = None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = dict(headers or {})
            if self.cookies:
                sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status, response.headers, response.read()
        finally:
            conn.close()

    def scan(self, barcode: str, event_id: int) -> tuple[int, str]:
        # A fresh nonce per scan, as the scanner page sends (a retry would repeat it).
        nonce = secrets.token_hex(16)
        status, _, body = self.call(
            "POST",
            "/desk/api/scan",
            json.dumps({"barcode": barcode, "event_id": event_id, "nonce": nonce}).encode(),
            {"Content-Type": "application/json", "X-CSRFToken": self.token},
        )
        try:
            answer = json.loads(body)
        except ValueError:
            return status, f"http {status}"
        return status, answer.get("status") or answer.get("error", {}).get("code", "?")


def _world(size: int):
    """An ongoing event with `size` open registrations (bulk insert, ledger through the seat
    module), and four desk users."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import transaction
    from django.utils import timezone

    from events.models import Registration
    from events.services import audit, seats
    from events.services import events as event_services

    begin = timezone.now() - timedelta(hours=1)
    event = event_services.create_event(
        name=f"B4 desk {secrets.token_hex(3)}",
        date_begin=begin,
        date_end=begin + timedelta(hours=10),
        date_tz="Europe/Brussels",
        actor=audit.SYSTEM,
    )
    prefix = f"{secrets.randbelow(10**8):08d}"
    with transaction.atomic():
        rows = Registration.objects.bulk_create(
            (
                Registration(
                    event=event,
                    state="open",
                    barcode=f"{prefix}{i:07d}",
                    name=f"Attendee {i}",
                    confirmed_at=begin,
                )
                for i in range(size)
            ),
            batch_size=5_000,
        )
        seats.apply(event=event, holds=[seats.hold_for(rows[0], reserved=size)])
    group = Group.objects.get(name="Event desk")
    users = []
    for n in range(4):
        user, _ = get_user_model().objects.get_or_create(
            username=f"bench-desk-{n}", defaults={"is_staff": True}
        )
        user.is_staff = True
        user.set_password(PASSWORD)
        user.save()
        user.groups.add(group)
        users.append(user.username)
    return event, [r.barcode for r in rows], users


def _scan_run(scanners: list[Scanner], event_id: int, barcodes: list[str]) -> dict:
    clients = len(scanners)
    shares = [barcodes[i::clients] for i in range(clients)]
    barrier = threading.Barrier(clients + 1)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    answers: list[Counter] = [Counter() for _ in range(clients)]
    errors: list[str] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for barcode in shares[index]:
                start = time.perf_counter()
                status, answer = scanners[index].scan(barcode, event_id)
                latencies[index].append(time.perf_counter() - start)
                answers[index][f"{status} {answer}"] += 1
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            errors.append(repr(exc))

    elapsed = common.run_released(worker, clients, barrier)
    total = sum(answers, Counter())
    p50, p99 = _percentiles([s for per in latencies for s in per])
    return {
        "clients": clients,
        "scans": sum(total.values()),
        "seconds": elapsed,
        "rate": common.rate(sum(total.values()), elapsed),
        "p50_ms": p50,
        "p99_ms": p99,
        "answers": dict(total),
        "errors": errors[:3],
    }


def _duplicates(scanners: list[Scanner], event_id: int, barcodes: list[str]) -> dict:
    """Every scanner scans the same tickets in the same order, released together per ticket."""
    clients = len(scanners)
    barrier = threading.Barrier(clients)
    outcome: list[list[str]] = [[""] * clients for _ in barcodes]
    errors: list[str] = []

    def worker(index: int) -> None:
        try:
            for n, barcode in enumerate(barcodes):
                barrier.wait(timeout=60)
                outcome[n][index] = scanners[index].scan(barcode, event_id)[1]
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            errors.append(repr(exc))

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(300)
    expected = Counter({"confirmed_registration": 1, "already_registered": clients - 1})
    bad = [n for n, per in enumerate(outcome) if Counter(per) != expected]
    return {"tickets": len(barcodes), "bad_tickets": len(bad), "errors": errors[:3]}


def run(*, quick: bool = False) -> list[dict]:
    common.setup()
    from django.db import connection

    from events.services import seats

    sizes = _sizes(quick)
    event, barcodes, users = _world(sizes["registrations"])
    server = Server()
    try:
        scanners = [Scanner(server.port, username, event.pk) for username in users]
        cursor = 0
        runs = []
        for clients in (1, 4):
            count = sizes["scans"][clients]
            runs.append(_scan_run(scanners[:clients], event.pk, barcodes[cursor : cursor + count]))
            cursor += count
        dup = _duplicates(scanners, event.pk, barcodes[cursor : cursor + sizes["duplicates"]])
        cursor += sizes["duplicates"]
    finally:
        server.stop()
        connection.close()

    summary = seats.event_summary(event=event)
    problems = list(seats.audit(event=event))
    if summary.used != cursor:
        problems.append(f"attended {summary.used} for {cursor} tickets scanned")
    rows = []
    for result in runs:
        at_target = result["clients"] == 4
        wrong = {k: v for k, v in result["answers"].items() if k != "200 confirmed_registration"}
        checks = wrong or result["errors"] or problems
        rows.append(
            {
                "bench": "B4",
                "what": (
                    f"desk scan over HTTP, {sizes['registrations']:,} registrations, "
                    f"{result['clients']} scanner(s)"
                ),
                "measured": (
                    f"{result['rate']:,.0f} scans/s (p50 {result['p50_ms']:.1f} ms, "
                    f"p99 {result['p99_ms']:.1f} ms)"
                ),
                "target": (
                    f"≥ {TARGET_RATE:.0f}/s, p99 < {TARGET_P99_MS:.0f} ms"
                    if at_target
                    else "(reported)"
                ),
                "ok": (
                    result["rate"] >= TARGET_RATE and result["p99_ms"] < TARGET_P99_MS
                    if at_target
                    else None
                ),
                "checks": (
                    f"{result['scans']} × confirmed, audit clean"
                    if not checks
                    else f"{wrong} {result['errors']} {problems}"[:200]
                ),
                "checks_ok": not checks,
            }
        )
    dup_ok = not dup["bad_tickets"] and not dup["errors"]
    rows.append(
        {
            "bench": "B4",
            "what": f"desk: 4 scanners on the same {dup['tickets']} tickets at once",
            "measured": f"{dup['tickets'] - dup['bad_tickets']}/{dup['tickets']} admitted once",
            "target": "each ticket: 1 confirmed, 3 already_registered",
            "ok": None,
            "checks": "admitted once" if dup_ok else f"{dup['bad_tickets']} bad {dup['errors']}",
            "checks_ok": dup_ok,
        }
    )
    common.write_result(
        "b4_desk",
        {
            "quick": quick,
            "server": "gunicorn, 2 sync workers",
            "registrations": sizes["registrations"],
            "runs": runs,
            "duplicates": dup,
            "rows": rows,
        },
    )
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    for row in run(quick="--quick" in sys.argv):
        print(row)
