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

import logging
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from events.access_log import escape_controls
from events.local_sink import JsonAnswers, serve
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
    class Handler(JsonAnswers):
        server_version = "webhook-sink"
        logger = logging.getLogger("seams.webhook_sink")

        def do_POST(self) -> None:  # noqa: N802 — the http.server API
            if urlsplit(self.path).path != path:
                self.answer(404, {"error": "not found"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                self.answer(400, {"error": "bad Content-Length"})
                return
            if length > MAX_BODY:
                self.answer(413, {"error": "too large"})
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
                self.answer(401, {"error": "signature not verified"})
                return
            try:
                data = message["data"]
                line = (
                    f"{message['type']} {data['subject']} v{data['version']} "
                    f"{headers.get('webhook-id')} verified"
                )
            except (KeyError, TypeError):
                self.answer(400, {"error": "expected {type, timestamp, data}"})
                return
            logger.info("%s", escape_controls(line))
            self.answer(200, {"status": "received"})

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
        serve(
            knob="EVENT_WEBHOOK_SINK_URL",
            raw_url=raw,
            make_handler=lambda path: make_handler(url=raw, path=path),
            logger=logger,
            log_path=Path(options["log"]),
            name="Webhook sink",
            write=self.stdout.write,
        )
