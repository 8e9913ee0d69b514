"""A tiny local SMS gateway for the demo (`make run` starts it from the Procfile).

Listens where EVENT_SMS_GATEWAY_URL points (host, port and path), accepts `POST` JSON
`{to, body, reference}` carrying `Authorization: Bearer EVENT_SMS_GATEWAY_TOKEN`, writes each
message (reference, number, body) to its own log (var/log/sms-gateway.log and stdout) and
answers 200. A reference seen before is answered 200 again and logged as a duplicate (what a
real gateway's de-duplication does). A wrong or missing bearer is 401, a malformed body 400.
The token itself is never written anywhere; the capability links an SMS carries are masked in
every line (events.access_log.mask, as the console's filter does) and control characters are
escaped (a line per message); the log file is created readable by its owner only (0600).
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand

from events.access_log import escape_controls, mask
from events.local_sink import JsonAnswers, serve

logger = logging.getLogger("sms.gateway_sink")
MAX_BODY = 64 * 1024


def make_handler(*, path: str, token: str) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode()
    seen: set[str] = set()
    lock = threading.Lock()

    class Handler(JsonAnswers):
        server_version = "sms-gateway-sink"
        logger = logging.getLogger("sms.gateway_sink")

        def do_POST(self) -> None:  # noqa: N802 — the http.server API
            if urlsplit(self.path).path != path:
                self.answer(404, {"error": "not found"})
                return
            given = self.headers.get("Authorization", "").encode()
            if not token or not hmac.compare_digest(given, expected):
                logger.warning(
                    "refused a POST from %s: bad or missing bearer", self.client_address[0]
                )
                self.answer(401, {"error": "bad or missing bearer token"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.answer(413, {"error": "too large"})
                return
            try:
                message = json.loads(self.rfile.read(length) or b"null")
                to, body, reference = message["to"], message["body"], message["reference"]
                if not all(isinstance(v, str) and v for v in (to, body, reference)):
                    raise ValueError
            except (ValueError, TypeError, KeyError):
                self.answer(400, {"error": "expected JSON {to, body, reference}"})
                return
            with lock:
                duplicate = reference in seen
                seen.add(reference)
            # A body carries live ticket links; all three are the sender's text.
            reference, to, body = (escape_controls(mask(v)) for v in (reference, to, body))
            if duplicate:
                logger.info("duplicate %s to %s ignored", reference, to)
            else:
                logger.info("SMS %s to %s: %s", reference, to, body)
            self.answer(200, {"status": "duplicate" if duplicate else "accepted"})

    return Handler


class Command(BaseCommand):
    help = "Run a local SMS gateway that accepts and logs messages (the demo's gateway)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--log", default=str(Path(settings.BASE_DIR) / "var/log/sms-gateway.log")
        )

    def handle(self, *args, **options):
        serve(
            knob="EVENT_SMS_GATEWAY_URL",
            raw_url=(settings.EVENT_SMS_GATEWAY_URL or "").strip(),
            make_handler=lambda path: make_handler(
                path=path, token=settings.EVENT_SMS_GATEWAY_TOKEN
            ),
            logger=logger,
            log_path=Path(options["log"]),
            name="SMS gateway sink",
            write=self.stdout.write,
        )
