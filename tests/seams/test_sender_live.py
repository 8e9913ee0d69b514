"""The example sender (scripts/send_webhook.py) against the real served stack
(the Procfile's gunicorn line on the test database): `applied`, then `duplicate` for the same id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from events.models import Registration
from seams.models import SeamInbox
from tests.events import factories as ev
from tests.events.capability.test_capability_server import get, procfile_web, server_env
from tests.seams.host import new_secret

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_the_sender_script_gets_applied_then_duplicate(free_port, tmp_path):
    ticket = ev.TicketFactory(seats_max=10)
    secret = new_secret()
    env = server_env(EVENT_SEAM_SECRET=f"{new_secret()} {secret}")  # the host signs with #2
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            procfile_web(free_port),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        assert get(free_port, "/api/v1/catalog/linked-products?event=0") == 400  # booted
        command = [
            sys.executable,
            "scripts/send_webhook.py",
            "--url",
            f"http://127.0.0.1:{free_port}/seams/v1/sale",
            "--secret",
            secret,
            "--id",
            "msg_live_1",
            "--example-ticket",
            str(ticket.pk),
        ]
        runs = [
            subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
            for _ in range(2)
        ]
    finally:
        server.terminate()
        server.wait(timeout=30)
    answers = []
    for run in runs:
        assert run.returncode == 0, run.stdout + run.stderr + log.read_text()
        status, _, body = run.stdout.strip().partition(" ")
        answers.append((int(status), json.loads(body)["status"]))
    assert answers == [(200, "applied"), (200, "duplicate")]
    assert Registration.objects.filter(ticket=ticket).count() == 2
    assert SeamInbox.objects.get().message_id == "msg_live_1"
