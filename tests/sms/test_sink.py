"""The demo's local SMS gateway (`manage.py sms_gateway_sink`): accepts POST JSON with the
bearer, logs number and body (never the token), answers 200; the delivery task delivers to it
end to end."""

from __future__ import annotations

import logging
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command

from events.access_log import owner_only
from sms.management.commands.sms_gateway_sink import make_handler
from sms.models import SmsOutbox
from sms.services import delivery
from tests.sms.factories import SmsOutboxFactory
from tests.sms.gateway import TOKEN

ROOT = Path(__file__).resolve().parents[2]


# A capability token as the tickets page's link carries it (events.services.capability).
LINK_TOKEN = "eyJzIjo0MiwidiI6MX0:1uXk2c:Zm9vYmFyYmF6cXV4"  # noqa: S105 — a made-up token
LINK = f"http://127.0.0.1:8000/my-tickets/{LINK_TOKEN}/"


@pytest.fixture
def sink():
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(path="/sms", token=TOKEN))
    # shutdown() waits for serve_forever's next poll: 0.5 s by default, at every teardown
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/sms"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def post(url: str, payload, token: str | None = TOKEN) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.post(url, json=payload, headers=headers, timeout=10)


def test_the_sink_accepts_logs_and_deduplicates_without_logging_the_token(sink, caplog):
    caplog.set_level(logging.DEBUG, logger="sms.gateway_sink")
    message = {"to": "+32470123456", "body": "Summit at 9:00", "reference": "s1-r2-3"}
    first = post(sink, message)
    again = post(sink, message)
    assert (first.status_code, first.json()) == (200, {"status": "accepted"})
    assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
    assert "SMS s1-r2-3 to +32470123456: Summit at 9:00" in caplog.text
    assert "duplicate s1-r2-3 to +32470123456 ignored" in caplog.text
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("token", [None, "wrong"])
def test_the_sink_refuses_a_missing_or_wrong_bearer(sink, token, caplog):
    caplog.set_level(logging.DEBUG, logger="sms.gateway_sink")
    answer = post(sink, {"to": "+32470123456", "body": "x", "reference": "r"}, token=token)
    assert answer.status_code == 401
    assert "SMS r to" not in caplog.text


@pytest.mark.parametrize("payload", [{"to": "+32470123456", "body": "x"}, ["x"], {"to": 1}])
def test_the_sink_refuses_a_malformed_message(sink, payload):
    assert post(sink, payload).status_code == 400


@pytest.mark.django_db
def test_the_delivery_task_delivers_to_the_sink(sink, settings):
    settings.EVENT_SMS_GATEWAY_URL = sink
    settings.EVENT_SMS_GATEWAY_TOKEN = TOKEN
    rows = [SmsOutboxFactory(), SmsOutboxFactory()]
    assert delivery.deliver_outbox().sent == 2
    assert set(SmsOutbox.objects.filter(pk__in=[r.pk for r in rows]).values_list("state")) == {
        ("sent",)
    }


def test_the_command_refuses_a_url_it_cannot_listen_on(settings):
    settings.EVENT_SMS_GATEWAY_URL = "https://sms.example.com/send"
    with pytest.raises(CommandError, match="EVENT_SMS_GATEWAY_URL"):
        call_command("sms_gateway_sink")


@pytest.mark.slow
def test_the_command_listens_where_the_url_says_and_writes_its_own_log(free_port, tmp_path):
    log = tmp_path / "sink.log"
    env = {
        **os.environ,
        "EVENT_SMS_GATEWAY_URL": f"http://127.0.0.1:{free_port}/sms",
        "EVENT_SMS_GATEWAY_TOKEN": TOKEN,
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sms_gateway_sink", "--log", str(log)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # until the sink listens (a process start, not a race under test)
            assert proc.poll() is None, proc.stdout.read().decode()
            try:
                socket.create_connection(("127.0.0.1", free_port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the sink never listened"
                time.sleep(0.1)
        message = {"to": "+32470123456", "body": "Doors open 8:30", "reference": "demo-1"}
        assert post(f"http://127.0.0.1:{free_port}/sms", message).status_code == 200
        linked = {"to": "+32470123456", "body": f"Tickets: {LINK}", "reference": "demo-2"}
        assert post(f"http://127.0.0.1:{free_port}/sms", linked).status_code == 200
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0].decode()
    text = log.read_text()
    assert "SMS demo-1 to +32470123456: Doors open 8:30" in text
    # The ticket link masked as on the console; the file readable by its owner only.
    assert "SMS demo-2 to +32470123456: Tickets: http://127.0.0.1:8000/my-tickets/***/" in text
    assert LINK_TOKEN not in text and LINK_TOKEN not in output
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert TOKEN not in text and TOKEN not in output


def test_the_sink_masks_ticket_links_and_keeps_one_line_per_message(sink, caplog):
    caplog.set_level(logging.DEBUG, logger="sms.gateway_sink")
    message = {"to": "+32470123456", "body": f"Hi Ann\nTickets: {LINK}", "reference": "r-9"}

    assert post(sink, message).status_code == 200

    (line,) = [r.getMessage() for r in caplog.records if "r-9" in r.getMessage()]
    assert (
        line == "SMS r-9 to +32470123456: Hi Ann\\nTickets: http://127.0.0.1:8000/my-tickets/***/"
    )
    assert LINK_TOKEN not in caplog.text


def test_the_log_file_is_the_owners_only_whatever_the_umask(tmp_path):
    fresh, left = tmp_path / "new" / "sink.log", tmp_path / "old.log"
    left.write_text("a line of an earlier run\n")
    left.chmod(0o644)
    previous = os.umask(0)  # the most permissive umask a shell could give the process
    try:
        owner_only(fresh)
        owner_only(left)
    finally:
        os.umask(previous)

    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert stat.S_IMODE(fresh.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(left.stat().st_mode) == 0o600
    assert left.read_text() == "a line of an earlier run\n"  # appended to, never truncated
