"""The real server (the Procfile's gunicorn line): it refuses to start with a bad capability
secret, and its access log never prints a capability token."""

from __future__ import annotations

import http.client
import os
import shlex
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection
from django.urls import reverse

from events.access_log import mask
from events.services import capability
from tests.events import factories

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow


def procfile_web(port: int) -> list[str]:
    line = next(
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:")
    )
    return shlex.split(line.removeprefix("web:").replace("${PORT}", str(port)))


def server_env(**extra: str) -> dict[str, str]:
    settings = connection.settings_dict
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    return {**os.environ, "DATABASE_URL": url, **extra}


def get(port: int, path: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path)
            status = conn.getresponse().status
            conn.close()
            return status
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # waiting for a server to boot, not for a race


def test_mask_hides_tokens_in_paths_and_request_lines():
    assert mask("/ics/eyJmIjox:abc-DEF_1.ics") == "/ics/***"
    assert mask("GET /my-tickets/eyJm:x9/ HTTP/1.1") == "GET /my-tickets/***/ HTTP/1.1"
    assert mask("https://h/my-tickets/abc:def/?a=1") == "https://h/my-tickets/***/?a=1"
    assert mask("/ics/not a token.ics") == "/ics/***"
    assert mask("/events/3/") == "/events/3/"


@pytest.mark.parametrize("secret", ["", "short-secret"])
def test_gunicorn_refuses_to_start_with_a_bad_secret(free_port, secret):
    result = subprocess.run(
        procfile_web(free_port),
        cwd=ROOT,
        env={**os.environ, "EVENT_CAPABILITY_SECRET": secret},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "EVENT_CAPABILITY_SECRET is missing or shorter than 32 characters" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_the_access_log_of_the_procfile_server_never_prints_a_token(free_port, tmp_path):
    reg = factories.RegistrationFactory()
    ics_token = capability.mint(purpose="ics", subject=reg)
    tickets_token = capability.mint(purpose="tickets", subject=reg)
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            procfile_web(free_port),
            cwd=ROOT,
            env=server_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        paths = [
            reverse("ics", kwargs={"token": ics_token}),
            reverse("my-tickets", kwargs={"token": tickets_token}),
            reverse("ics", kwargs={"token": ics_token[:-2] + "xx"}),
            "/ics/" + quote("not a token") + ".ics",
        ]
        assert [get(free_port, path) for path in paths] == [200, 200, 404, 404]
    finally:
        server.terminate()
        server.wait(timeout=30)
    text = log.read_text()
    assert text.count('"GET /ics/***" 200') == 1
    assert text.count('"GET /my-tickets/***/" 200') == 1
    assert text.count('"GET /ics/***" 404') == 2
    for token in (ics_token, tickets_token, ics_token.split(":")[0], ics_token.split(":")[1]):
        assert token not in text
