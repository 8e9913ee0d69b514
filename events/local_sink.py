"""The scaffolding of the demo's local receivers (`make run` starts them from the Procfile): the
SMS gateway sink (sms overlay) and the webhook sink (seams overlay). Each overlay writes only
what its sink checks and logs.

- `JsonAnswers`: a keep-alive HTTP/1.1 request handler base that answers JSON (`answer`) and
  keeps http.server's own request lines out of the log;
- `serve(...)`: the sink's URL checked (a local http://host:port/path), its log file created
  readable by its owner only, then the server run until interrupted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from django.core.management.base import CommandError

from events.access_log import owner_only


class JsonAnswers(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the deliverer reuses its connection
    # Headers and body are two writes: without TCP_NODELAY, Nagle + delayed ACK hold each
    # answer ~40 ms on a kept-alive connection.
    disable_nagle_algorithm = True
    logger = logging.getLogger("events.local_sink")

    def answer(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        if status != 200:
            # The request body may be unread: this connection cannot carry another request.
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 — the http.server API
        self.logger.debug("%s %s", self.client_address[0], format % args)


def serve(
    *,
    knob: str,
    raw_url: str,
    make_handler: Callable[[str], type[BaseHTTPRequestHandler]],
    logger: logging.Logger,
    log_path: Path,
    name: str,
    write: Callable[[str], None],
) -> None:
    """Run a sink at `raw_url` (the value of the knob `knob`) with the handler
    `make_handler(path)` until interrupted, `logger` also writing to `log_path`."""
    url = urlsplit(raw_url)
    if url.scheme != "http" or not url.hostname or not url.port:
        raise CommandError(
            f"{knob} must be a local http://host:port/path URL for the sink, not {raw_url!r}."
        )
    handler = logging.FileHandler(owner_only(log_path))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    server = ThreadingHTTPServer((url.hostname, url.port), make_handler(url.path or "/"))
    write(f"{name} on {url.geturl()}, logging to {log_path}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        write(f"{name} stopped")
    finally:
        server.server_close()
