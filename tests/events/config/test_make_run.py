"""`make run` (interfaces.md "Commands"): from the project root it prepares everything and runs
web (gunicorn) + a Celery worker + Celery beat in the foreground; SIGTERM stops all three.
A registration's confirmation mail, printed by the worker, leaves no capability token in any
process's output (logs are read by more people than the attendee).

The end-to-end test uses the development database of `.env` (as `make run` does) and needs no
network: `make test` has installed the virtualenv before it runs. The helper scripts that
`make run` calls are tested on their own below.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[3]
START_DEADLINE = 120
STOP_DEADLINE = 30


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        ppid = int(stat_line.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def http_get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def wait_for(predicate, deadline: float, what: str, log: Path, proc=None):
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"make run exited ({proc.returncode}) before {what}:\n{log.read_text()}")
        time.sleep(0.5)  # polling an external process against a deadline
    pytest.fail(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")


# The demo registration's number (Belgian, as the demo events): E.164 at the SMS gateway.
PHONE = "0470 12 34 56"
PHONE_E164 = "+32470123456"

# A capability link's path with anything but the mask after it (spec.md §7.1).
UNMASKED_LINK = re.compile(r"/(?:my-tickets|ics)/(?!\*\*\*)[^/\s\"]")


def register_and_wait_for_the_mail(base: str, log: Path, deadline: float, proc) -> list[str]:
    """Register on a demo event through the API; wait until the worker has printed the
    confirmation mail. Returns the capability tokens the response carried."""
    with urllib.request.urlopen(f"{base}/events/", timeout=5) as response:
        event_ids = dict.fromkeys(re.findall(r'href="/events/(\d+)/"', response.read().decode()))
    email = f"masked-{os.getpid()}@example.org"
    refusals = []
    for event_id in event_ids:  # the first demo event this simple registration fits
        with urllib.request.urlopen(f"{base}/events/{event_id}/", timeout=5) as response:
            page = response.read().decode()
        # The page's form says what the event needs: its selected ticket and, for every
        # choice question (a mandatory one among them), its first choice.
        ticket = re.search(r'name="ticket" value="(\d+)" checked', page)
        answers: dict[str, int] = {}
        radios = re.findall(r'type="radio" name="(?:a0|order)-q(\d+)" value="(\d+)"', page)
        for question, choice in radios:
            answers.setdefault(question, int(choice))
        payload = {
            "ticket_id": int(ticket.group(1)) if ticket else None,
            "attendees": [
                # A phone too: the demo summit's confirmation SMS goes to the local gateway sink.
                {"name": "Log Reader", "email": email, "phone": PHONE, "answers": answers}
            ],
        }
        request = urllib.request.Request(
            f"{base}/api/v1/events/{event_id}/registrations",
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = response.read().decode()
            break
        except urllib.error.HTTPError as exc:
            refusals.append((event_id, exc.code, exc.read()))
    else:
        pytest.fail(f"no demo event took the registration: {refusals}")
    tokens = re.findall(r"/(?:my-tickets|ics)/([^/\"?]+)", body)
    assert tokens, body
    wait_for(
        lambda: re.search(rf"worker\.1\s+\| .*To: {re.escape(email)}", log.read_text()),
        deadline,
        "the confirmation mail in the worker's output",
        log,
        proc,
    )
    return tokens


def assert_no_token(text: str, tokens: list[str]) -> None:
    assert "/my-tickets/***" in text  # the mail was printed, its links masked
    for token in tokens:
        for part in (token, *token.split(":")):
            assert part not in text, part
    leaks = [line for line in text.splitlines() if UNMASKED_LINK.search(line)]
    assert not leaks, leaks


@pytest.mark.slow
# Beside the parallel run's workers: `make run` migrates and seeds the development database of
# DATABASE_URL, collects static files into var/ (which no test serves), and its worker and beat
# take a broker database of 8–15, none of which an xdist worker owns.
def test_make_run_serves_web_worker_and_beat_and_stops_on_sigterm(free_port, tmp_path):
    log = tmp_path / "make-run.log"
    from django.conf import settings

    # The environment wins over .env for every step and every process: the broker given here
    # (another Redis database than .env's) must be the one the worker and beat use.
    # (A database of its own per run, 8–15: parallel runs must not consume each other's tasks.)
    broker_db = 8 + os.getpid() % 8
    broker = urlsplit(settings.CELERY_BROKER_URL)._replace(path=f"/{broker_db}").geturl()
    # Mails printed to the worker's output (the console backend, not the demo's default
    # mailbox): every process's output must still hold no capability token.
    env = {
        **os.environ,
        "PORT": str(free_port),
        "CELERY_BROKER_URL": broker,
        "EMAIL_URL": "consolemail://",
        # The local SMS gateway sink of its own: parallel runs must not collide on its port.
        "EVENT_SMS_GATEWAY_URL": f"http://127.0.0.1:{_closed_port()}/sms",
    }
    env.pop("TEST_DB_SUFFIX", None)
    base = f"http://127.0.0.1:{free_port}"
    seen: set[int] = set()
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_DEADLINE

        def healthy() -> bool:
            try:
                return http_get(f"{base}/healthz") == 200
            except OSError:
                return False

        wait_for(healthy, deadline, "/healthz 200", log, proc)
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            assert response.read() == b'{"db": "ok", "broker": "ok"}'
        assert http_get(f"{base}/admin/login/") == 200
        assert http_get(f"{base}/events/") == 200

        patterns = {
            "login": r"^Staff login: user 'admin'",
            "web": rf"web\.1\s+\| .*Listening at: http://127\.0\.0\.1:{free_port}\b",
            "worker": r"worker\.1\s+\| .*celery@\S+ ready\.",
            "beat": r"beat\.1\s+\| .*beat: Starting\.\.\.",
            "worker broker": rf"worker\.1\s+\| .*\.> transport:\s+redis://\S+/{broker_db}\s*$",
            "beat broker": rf"beat\.1\s+\| .*\. broker -> redis://\S+/{broker_db}\s*$",
        }

        def all_lines_seen() -> bool:
            text = log.read_text()
            return all(re.search(p, text, re.MULTILINE) for p in patterns.values())

        wait_for(all_lines_seen, deadline, "the web, worker, beat and login lines", log, proc)

        tokens = register_and_wait_for_the_mail(base, log, deadline, proc)
        # The same registration's confirmation SMS, delivered by the worker to the local sink
        # that `make run` started (the Procfile's sms-gateway), its link masked in the output.
        sms_line = rf"sms-gateway\.1\s+\| .*SMS \S+ to {re.escape(PHONE_E164)}: Hi Log Reader"
        wait_for(
            lambda: re.search(sms_line, log.read_text()),
            deadline,
            "the confirmation SMS at the local gateway sink",
            log,
            proc,
        )

        seen.update(descendants(proc.pid))
        commands = [cmdline(pid) for pid in seen]
        assert any("gunicorn config.wsgi:application" in c for c in commands), commands
        assert any(re.search(r"celery -A config worker", c) for c in commands), commands
        assert any(re.search(r"celery -A config beat", c) for c in commands), commands

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=STOP_DEADLINE)
        stop_deadline = time.monotonic() + STOP_DEADLINE
        wait_for(
            lambda: not [pid for pid in seen if alive(pid)],
            stop_deadline,
            "every process of make run to stop",
            log,
        )
        text = log.read_text()
        for name in ("web.1", "worker.1", "beat.1", "sms-gateway.1"):
            assert re.search(rf"system\s+\| {re.escape(name)} stopped", text), name
        assert_no_token(text, tokens)
    finally:
        for pid in [proc.pid, *seen]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)


# --- the helper scripts ---------------------------------------------------------------------


def test_write_env_fills_every_generate_me_with_a_fresh_secret(tmp_path):
    target = tmp_path / ".env"
    result = subprocess.run(
        [sys.executable, "scripts/write_env.py", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == f"wrote {target}"
    example = (ROOT / ".env.example").read_text().splitlines()
    written = target.read_text().splitlines()
    assert len(written) == len(example)
    generated = []
    for before, after in zip(example, written, strict=True):
        key, sep, value = before.partition("=")
        if sep and not before.startswith("#") and value == "generate-me":
            new_key, _, secret = after.partition("=")
            assert new_key == key
            assert len(secret) >= 32 and "generate-me" not in secret
            generated.append(secret)
        else:
            assert after == before
    assert len(generated) == 4  # secret key, capability, seam, SMS gateway token
    assert len(set(generated)) == len(generated)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600

    other = tmp_path / "other.env"
    subprocess.run([sys.executable, "scripts/write_env.py", str(other)], cwd=ROOT, check=True)
    assert set(generated).isdisjoint(other.read_text().split("="))


def test_write_env_leaves_an_existing_file_alone(tmp_path):
    target = tmp_path / ".env"
    target.write_text("MINE=1\n")
    result = subprocess.run(
        [sys.executable, "scripts/write_env.py", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == ""
    assert target.read_text() == "MINE=1\n"


def test_write_env_applies_overrides(tmp_path):
    target = tmp_path / ".env"
    subprocess.run(
        [
            sys.executable,
            "scripts/write_env.py",
            str(target),
            "DATABASE_URL=postgres://u@db:5432/x",
            "EXTRA_ONE=1",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    lines = target.read_text().splitlines()
    assert "DATABASE_URL=postgres://u@db:5432/x" in lines
    assert lines[-1] == "EXTRA_ONE=1"


def _closed_port() -> int:
    from tests import parallel

    return parallel.free_port()  # nothing listens there; this xdist worker's own band


def test_createdb_names_an_unreachable_postgresql():
    port = _closed_port()
    result = subprocess.run(
        [sys.executable, "scripts/createdb.py"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": f"postgres://postgres@127.0.0.1:{port}/nothing"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("ERROR: PostgreSQL is not reachable")
    assert f"port {port}" in result.stderr


def test_services_names_an_unreachable_service():
    port = _closed_port()
    result = subprocess.run(
        ["bash", "scripts/services.sh"],
        cwd=ROOT,
        env={**os.environ, "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"ERROR: Redis is not reachable on 127.0.0.1:{port} (CELERY_BROKER_URL)."
    )


def test_services_passes_when_both_answer():
    result = subprocess.run(
        ["bash", "scripts/services.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.django_db
def test_bootstrap_admin_creates_the_superuser_once_and_prints_its_login_once():
    from io import StringIO

    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    first = StringIO()
    call_command("bootstrap_admin", stdout=first)
    match = re.fullmatch(r"Staff login: user 'admin', password '(\S{16,})'\n", first.getvalue())
    assert match is not None, first.getvalue()
    admin = get_user_model().objects.get(username="admin")
    assert (admin.is_staff, admin.is_superuser) == (True, True)
    assert admin.check_password(match.group(1))

    second = StringIO()
    call_command("bootstrap_admin", stdout=second)
    assert second.getvalue().startswith("Staff login: user 'admin' (its password was printed")
    assert match.group(1) not in second.getvalue()
    assert get_user_model().objects.filter(username="admin").count() == 1
    admin.refresh_from_db()
    assert admin.check_password(match.group(1))
