"""A local receiver of our outbound webhooks for the demo (`make run` starts it from the
Procfile; seed_demo points an endpoint at it).

Listens where EVENT_WEBHOOK_SINK_URL points (host, port and path; empty: it only idles) and
accepts `POST` JSON
signed the Standard Webhooks way. Each message is checked with the reference `standardwebhooks`
verifier against the secrets of the endpoints configured with this URL (read on every request,
so a rotation in the admin is seen at once), then one line per message goes to its log
(var/log/webhook-sink.log and stdout): type, subject, version, webhook-id. A message no secret
verifies is answered 401, a malformed one 400, a body over 1 MiB 413. The log file is created
readable by its owner only; control characters are escaped (a line per message).
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from events.access_log import escape_controls, owner_only
from seams.models import WebhookEndpoint

logger = logging.getLogger("seams.webhook_sink")
MAX_BODY = 1024 * 1024


def secrets_for(url: str) -> list[str]:
    """The signing secrets of the endpoints that deliver to `url` (current and previous), read
    on the request's own thread, whose connection is closed after (a thread per request)."""
    try:
        keys: list[str] = []
        for secret, previous in WebhookEndpoint.objects.filter(url=url).values_list(
            "secret", "previous_secret"
        ):
            keys += [k for k in (secret, previous) if k]
        return keys
    finally:
        connection.close()


def make_handler(*, url: str, path: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "webhook-sink"
        protocol_version = "HTTP/1.1"  # keep-alive: the deliverer reuses its connection
        disable_nagle_algorithm = True

        def _answer(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            if status != 200:
                self.close_connection = True
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 — the http.server API
            if urlsplit(self.path).path != path:
                self._answer(404, {"error": "not found"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self._answer(400, {"error": "bad Content-Length"})
                return
            if length > MAX_BODY:
                self._answer(413, {"error": "too large"})
                return
            body = self.rfile.read(length).decode("utf-8", "replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            message = None
            for key in secrets_for(url):
                try:
                    message = Webhook(key).verify(body, headers)
                    break
                except WebhookVerificationError:
                    continue
            if message is None:
                logger.warning(
                    "refused %s: no configured secret verifies it",
                    escape_controls(headers.get("webhook-id") or ""),
                )
                self._answer(401, {"error": "signature not verified"})
                return
            try:
                data = message["data"]
                line = (
                    f"{message['type']} {data['subject']} v{data['version']} "
                    f"{headers.get('webhook-id')} verified"
                )
            except (KeyError, TypeError):
                self._answer(400, {"error": "expected {type, timestamp, data}"})
                return
            logger.info("%s", escape_controls(line))
            self._answer(200, {"status": "received"})

        def log_message(self, format: str, *args) -> None:  # noqa: A002 — the http.server API
            logger.debug("%s %s", self.client_address[0], format % args)

    return Handler


class Command(BaseCommand):
    help = "Run a local receiver that verifies and logs our outbound webhooks (the demo's host)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--log", default=str(Path(settings.BASE_DIR) / "var/log/webhook-sink.log")
        )

    def handle(self, *args, **options):
        raw = (settings.EVENT_WEBHOOK_SINK_URL or "").strip()
        if not raw:
            # An .env written before the knob existed: no sink, and no demo endpoint either.
            # The process stays (honcho stops every process of `make run` when one exits).
            self.stdout.write("EVENT_WEBHOOK_SINK_URL is empty: no webhook sink (see .env.example)")
            threading.Event().wait()
            return
        url = urlsplit(raw)
        if url.scheme != "http" or not url.hostname or not url.port:
            raise CommandError(
                "EVENT_WEBHOOK_SINK_URL must be a local http://host:port/path URL for the sink, "
                f"not {settings.EVENT_WEBHOOK_SINK_URL!r}."
            )
        log_path = Path(options["log"])
        handler = logging.FileHandler(owner_only(log_path))
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        server = ThreadingHTTPServer(
            (url.hostname, url.port), make_handler(url=raw, path=url.path or "/")
        )
        self.stdout.write(f"Webhook sink on {raw}, logging to {log_path}")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            self.stdout.write("Webhook sink stopped")
        finally:
            server.server_close()
