"""The server as the Procfile starts it (config/gunicorn.py) against slow clients, and its access
log against forged lines.

Ten connections trickle request bodies to the intake API while /healthz and an event page keep
answering within 1 s each (two sync workers were starved by three such clients). A CR/LF decoded
from a path never starts a line of its own in the access log. A body that stops arriving (the
read times out) or breaks off (the connection resets) answers 408 / 400, JSON on the JSON
routes, with one WARNING line and no traceback (config/request_body.py), on every route that
reads a body.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.urls import reverse

from events.access_log import escape_controls
from events.services import capability
from tests.events import factories
from tests.events.capability.test_capability_server import get, procfile_web, server_env

ROOT = Path(__file__).resolve().parents[3]
SLOW_CLIENTS = 10
ANSWER_DEADLINE = 1.0  # seconds: an answer to a fast client within 1 s
BODY_READ_TIMEOUT = 2  # seconds, the served process's WEB_BODY_READ_TIMEOUT


@pytest.fixture
def server(free_port, tmp_path):
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            procfile_web(free_port),
            cwd=ROOT,
            # a stalled read answers after 2 s instead of the default 10 (the trickle below
            # sends a byte every 0.2 s)
            env=server_env(WEB_BODY_READ_TIMEOUT=str(BODY_READ_TIMEOUT)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        assert get(free_port, "/healthz") == 200  # waits for the boot
        yield free_port, log
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def timed_get(port: int, path: str) -> tuple[int, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def test_the_procfile_server_runs_threaded_workers_from_its_config_file():
    line = " ".join(procfile_web(8000))
    assert "--config config/gunicorn.py" in line
    config: dict = {}
    exec((ROOT / "config" / "gunicorn.py").read_text(), config)  # noqa: S102 — our own file
    assert config["worker_class"] == "gthread"
    assert config["workers"] * config["threads"] > 2 * SLOW_CLIENTS
    assert config["timeout"] > 0 and config["graceful_timeout"] > 0


@pytest.mark.slow
@pytest.mark.serial  # answers timed against ANSWER_DEADLINE: alone, not beside another worker
@pytest.mark.django_db(transaction=True)  # the server reads what the test commits
def test_trickling_bodies_do_not_starve_the_server(server):
    port, _log = server
    event = factories.EventFactory(is_published=True)
    intake = reverse("api-intake", kwargs={"event_id": event.pk})
    page = reverse("event-detail", kwargs={"event_id": event.pk})

    slow: list[socket.socket] = []
    stop = threading.Event()
    for _ in range(SLOW_CLIENTS):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(
            (
                f"POST {intake} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
            ).encode()
        )
        slow.append(sock)

    def trickle() -> None:
        while not stop.wait(0.2):  # one byte per connection every 0.2 s
            for sock in slow:
                try:
                    sock.sendall(b" ")
                except OSError:
                    return

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        stop.wait(1.0)  # let every slow connection reach a server thread
        answers = [timed_get(port, path) for path in ("/healthz", page) * 3]
    finally:
        stop.set()
        trickler.join(timeout=10)
        for sock in slow:
            sock.close()
    for status, elapsed in answers:
        assert status == 200
        assert elapsed < ANSWER_DEADLINE, answers


def test_escape_controls_keeps_a_value_on_one_line():
    assert escape_controls("/a\r\nb") == "/a\\r\\nb"
    assert escape_controls("x\u2028y\x85z\x00") == "x\\u2028y\\x85z\\x00"
    assert escape_controls("/a\\x0ab") == "/a\\\\x0ab"  # an escape cannot be faked either
    assert escape_controls("/events/3/ é") == "/events/3/ é"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_cr_lf_in_the_path_cannot_forge_an_access_line(server):
    port, log = server
    forged = "/events/%0D%0AFORGED%20%22GET%20/admin/%22%20200%0A/x"
    assert get(port, forged) == 404
    assert get(port, "/healthz") == 200  # a later line: the forged request's line is written
    lines = log.read_text().splitlines()
    assert not [line for line in lines if line.startswith(("FORGED", "/x"))], lines
    (logged,) = [line for line in lines if "FORGED" in line]
    assert '"GET /events/\\r\\nFORGED \\"GET /admin/\\" 200\\n/x" 404' in logged


# --- a body that never arrives ------------------------------------------------------------------


class BrokenBody:
    """A request body (wsgi.input) whose read fails as gunicorn's does when the declared bytes
    do not all arrive: `TimeoutError` once the client was silent past BODY_READ_TIMEOUT, a
    reset when it dropped the connection."""

    def __init__(self, error: OSError) -> None:
        self.error = error

    def read(self, size: int = -1) -> bytes:
        raise self.error

    readline = read


def _routes(event, token: str) -> dict[str, tuple[str, str]]:
    """Every route that reads a request body: path, content type."""
    form = "application/x-www-form-urlencoded"
    return {
        "intake API": (reverse("api-intake", kwargs={"event_id": event.pk}), "application/json"),
        "waiting list API": (reverse("api-waitlist", args=[event.pk]), "application/json"),
        "seam": (reverse("seam-sale"), "application/json"),
        "desk scan": (reverse("desk:api-scan"), "application/json"),
        "event page form": (reverse("event-detail", kwargs={"event_id": event.pk}), form),
        "waiting list form": (reverse("waitlist-join", args=[event.pk]), form),
        "cancel step": (reverse("my-tickets-cancel", kwargs={"token": token}), form),
        "admin login": ("/admin/login/", "multipart/form-data; boundary=xyz"),
    }


ROUTES = [
    "intake API",
    "waiting list API",
    "seam",
    "desk scan",
    "event page form",
    "waiting list form",
    "cancel step",
    "admin login",
]
JSON_ROUTES = {"intake API", "waiting list API", "seam", "desk scan"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (TimeoutError("timed out"), 408, "request_timeout"),
        (ConnectionResetError(104, "reset"), 400, "body_unreadable"),
    ],
    ids=["timed out", "reset"],
)
@pytest.mark.parametrize("route", ROUTES)
def test_an_unreadable_body_answers_4xx_with_one_warning_line(
    client, caplog, route, error, status, code
):
    event = factories.EventFactory()
    token = capability.mint(purpose="tickets", subject=factories.RegistrationFactory(event=event))
    path, content_type = _routes(event, token)[route]
    caplog.set_level(logging.INFO)

    response = client.post(
        path,
        data=b"x" * 500,  # the declared length: 500 bytes that never all arrive
        content_type=content_type,
        **{"wsgi.input": BrokenBody(error)},
    )

    assert response.status_code == status
    if route in JSON_ROUTES:
        assert response.json()["error"]["code"] == code
    else:
        assert response["Content-Type"] == "text/plain; charset=utf-8"
    (line,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert (line.levelname, line.name, line.exc_info) == ("WARNING", "events.request", None)
    assert f"could not be read ({type(error).__name__}): answering {status}" in line.getMessage()
    assert token not in caplog.text  # the cancel step's path is masked


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the server reads what the test commits
def test_a_stalled_body_answers_408_and_logs_one_warning_line(server):
    """A real socket: the headers and a few bytes, then silence; gunicorn's read times out
    (WEB_BODY_READ_TIMEOUT) and the answer comes, one per connection, without a traceback."""
    port, log = server
    event = factories.EventFactory(is_published=True)
    paths = {
        "intake API": (reverse("api-intake", kwargs={"event_id": event.pk}), "application/json"),
        "seam": (reverse("seam-sale"), "application/json"),
        "event page form": (
            reverse("event-detail", kwargs={"event_id": event.pk}),
            "application/x-www-form-urlencoded",
        ),
    }
    socks = {}
    for name, (path, content_type) in paths.items():
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
                "Content-Length: 1000\r\n\r\n"
            ).encode()
            + b"{"
        )
        socks[name] = sock
    answers = {}
    try:
        for name, sock in socks.items():  # each answers once its own read timed out
            response = http.client.HTTPResponse(sock)
            response.begin()
            answers[name] = (response.status, response.getheader("Content-Type"), response.read())
    finally:
        for sock in socks.values():
            sock.close()
    assert get(port, "/healthz") == 200  # the server is fine, and the log is flushed past them

    for name in ("intake API", "seam"):
        status, content_type, body = answers[name]
        assert (status, content_type) == (408, "application/json")
        assert json.loads(body)["error"]["code"] == "request_timeout"
    assert answers["event page form"][:2] == (408, "text/plain; charset=utf-8")
    text = log.read_text()
    warnings = [line for line in text.splitlines() if "could not be read" in line]
    assert len(warnings) == 3 and all(" WARNING events.request " in w for w in warnings), text
    assert "Traceback" not in text and " ERROR " not in text, text


@pytest.mark.parametrize("raw", ["0", "-1", "301", "ten", "nan", ""])
def test_a_body_read_timeout_that_is_not_seconds_stops_the_server_at_start_up(monkeypatch, raw):
    import runpy

    monkeypatch.setenv("WEB_BODY_READ_TIMEOUT", raw)
    with pytest.raises(SystemExit, match="WEB_BODY_READ_TIMEOUT must be seconds"):
        runpy.run_path(str(ROOT / "config" / "gunicorn.py"))


def test_the_body_read_timeout_defaults_to_ten_seconds(monkeypatch):
    import runpy

    monkeypatch.delenv("WEB_BODY_READ_TIMEOUT", raising=False)
    assert runpy.run_path(str(ROOT / "config" / "gunicorn.py"))["BODY_READ_TIMEOUT"] == 10
    monkeypatch.setenv("WEB_BODY_READ_TIMEOUT", "2.5")
    assert runpy.run_path(str(ROOT / "config" / "gunicorn.py"))["BODY_READ_TIMEOUT"] == 2.5
