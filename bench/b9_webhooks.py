"""B9 — outbound webhooks: deliveries per second to a local receiver, and what the outbox adds
to the public intake (B2).

1. N registrations are booked on an event while one endpoint (every type, every event) points
   at a local receiver: a plain HTTP/1.1 keep-alive server in its own process that answers 200
   to every POST and counts them. Then 1 deliverer (`seams.services.webhooks.deliver_due`, what
   one Celery task runs) and, on a second batch, 2 deliverer processes at once (the Procfile's
   worker concurrency) send them: deliveries/s, signing and the attempt rows included.
   Checks: every delivery `delivered`, the receiver counted each message once.
2. B2's intake at 4 clients (the same gunicorn, the same request) run twice back to back:
   without any endpoint (the trigger's probe of an empty table only) and with the endpoint
   subscribed (each booking also writes its message and delivery, and nudges delivery after
   commit): registrations/s of each and their ratio.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from bench import common

TARGET_DELIVERIES = 500.0  # deliveries/s, one deliverer (BENCHMARKS.md)
TARGET_RATIO = 0.9  # the outbox adds at most 10 % to B2
RECEIVER = textwrap.dedent(
    """
    import sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    count = 0
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self):
            global count
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                count += 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            data = str(count).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """
)
DELIVERER = (
    "import django; django.setup(); from seams.services import webhooks; "
    "print(webhooks.deliver_due(limit=10**9).delivered)"
)


def _sizes(quick: bool) -> dict:
    return {"messages": 600, "seats": 300} if quick else {"messages": 6_000, "seats": 3_000}


class Receiver:
    def __init__(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603 — our own interpreter and code
            [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True
        )
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/hooks"

    def count(self) -> int:
        import httpx

        return int(httpx.get(self.url, timeout=10).text)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def _book(event, n: int) -> None:
    from events.services import registrations

    for start in range(0, n, 50):
        registrations.register(
            event=event,
            attendees=[{"name": f"Guest {i}"} for i in range(start, min(n, start + 50))],
            actor="system",
        )


def _deliveries(receiver: Receiver, n: int, processes: int) -> dict:
    from django.db import connection

    from events.models import Event
    from seams.models import WebhookDelivery

    event = Event.objects.order_by("-pk").first()
    _book(event, n)
    before = receiver.count()
    pending = WebhookDelivery.objects.filter(state="pending").count()
    connection.close()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env["DATABASE_URL"] = common.bench_database_url()
    started = time.perf_counter()
    workers = [
        subprocess.Popen(  # noqa: S603 — our own interpreter and code
            [sys.executable, "-c", DELIVERER],
            env=env,
            cwd=common.ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    delivered = sum(
        int((w.communicate(timeout=600)[0] or "0").strip().splitlines()[-1]) for w in workers
    )
    elapsed = time.perf_counter() - started
    received = receiver.count() - before
    left = WebhookDelivery.objects.filter(state="pending").count()
    problems = []
    if (delivered, received) != (pending, pending) or left:
        problems.append(
            f"delivered {delivered}, received {received}, queued {pending}, left {left}"
        )
    return {
        "processes": processes,
        "deliveries": delivered,
        "rate": delivered / elapsed,
        "problems": problems,
    }


def run(*, quick: bool = False) -> list[dict]:
    common.setup()
    from django.db import connection
    from django.utils import timezone

    from bench import b2_intake
    from events.services import audit
    from events.services import events as event_services
    from seams.models import WebhookEndpoint
    from seams.services import webhooks

    sizes = _sizes(quick)
    WebhookEndpoint.objects.all().delete()
    receiver = Receiver()
    rows: list[dict] = []
    try:
        # 1. deliveries/s
        begin = timezone.now() + timezone.timedelta(days=30)
        event_services.create_event(
            name="B9 webhooks",
            date_begin=begin,
            date_end=begin + timezone.timedelta(hours=8),
            actor=audit.SYSTEM,
        )
        endpoint = webhooks.create_endpoint(name="B9", url=receiver.url, actor="system")
        results = [_deliveries(receiver, sizes["messages"], p) for p in (1, 2)]
        for result in results:
            at_target = result["processes"] == 1
            rows.append(
                {
                    "bench": "B9",
                    "what": f"webhook deliveries to a local receiver, {result['processes']} "
                    "deliverer(s)",
                    "measured": f"{result['rate']:,.0f} deliveries/s ({result['deliveries']:,})",
                    "target": f"≥ {TARGET_DELIVERIES:.0f}/s" if at_target else "(reported)",
                    "ok": (result["rate"] >= TARGET_DELIVERIES) if at_target else None,
                    "checks": "; ".join(result["problems"]) or "all delivered, each once",
                    "checks_ok": not result["problems"],
                }
            )

        # 2. the outbox's cost on the intake (B2 at 4 clients), without then with the endpoint
        webhooks.delete_endpoint(endpoint=endpoint, actor="system")
        connection.close()
        server = b2_intake.Server()
        try:
            without = b2_intake._intake(server.port, 4, sizes["seats"])
            webhooks.create_endpoint(name="B9", url=receiver.url, actor="system")
            connection.close()
            with_endpoint = b2_intake._intake(server.port, 4, sizes["seats"])
        finally:
            server.stop()
            connection.close()
        ratio = with_endpoint["rate"] / without["rate"]
        problems = without["problems"] + with_endpoint["problems"]
        rows.append(
            {
                "bench": "B9",
                "what": "B2 intake, 4 clients: no endpoint → one endpoint subscribed",
                "measured": (
                    f"{without['rate']:,.0f} → {with_endpoint['rate']:,.0f} reg/s "
                    f"({ratio:.2f}×; p99 {without['p99_ms']:.1f} → "
                    f"{with_endpoint['p99_ms']:.1f} ms)"
                ),
                "target": f"≥ {TARGET_RATIO:.2f}×",
                "ok": ratio >= TARGET_RATIO,
                "checks": "; ".join(problems) or "oversell 0, audit clean (both runs)",
                "checks_ok": not problems,
            }
        )
    finally:
        receiver.stop()
        WebhookEndpoint.objects.all().delete()
        connection.close()
    common.write_result("b9_webhooks", {"quick": quick, "rows": rows})
    return rows


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    for row in run(quick="--quick" in sys.argv):
        print(row)
