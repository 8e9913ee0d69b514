"""A host's webhook receiver for the outbound tests: a real HTTP server on localhost that keeps
every request it got (headers and body) and answers what the test sets: a status (with optional
headers), or nothing until released (`hold`), or no listener at all (`stop`)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: str

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    status: int = 200
    answer_headers: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    hold_next: bool = False

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.released.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 — the http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                with receiver.lock:
                    receiver.received.append(
                        Received({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    hold, receiver.hold_next = receiver.hold_next, False
                    status, extra = receiver.status, dict(receiver.answer_headers)
                if hold:
                    receiver.released.clear()
                    receiver.held.set()
                    receiver.released.wait(30)
                data = b'{"ok": true}'
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def payloads(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.payload for r in self.received]
