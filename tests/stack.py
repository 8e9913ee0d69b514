"""Several processes of the served stack on one database and one Redis, as on several machines
(test infrastructure): gunicorn web processes, Celery beat processes (their intervals shortened
so a test sees several ticks) and a local SMS gateway that records every POST it receives.
Celery workers come from `tests.helpers.start_celery_worker`. Each process logs to its own file
and runs in its own process group; the caller stops what it started (`stop`)."""

from __future__ import annotations

import http.client
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path

from django.conf import settings

from sms.management.commands.sms_gateway_sink import make_handler
from tests import parallel
from tests.helpers import ROOT, database_url

LIFTED_LIMITS = {"intake": (1_000_000_000, 60), "token": (1_000_000_000, 60)}

# Web processes: the project's settings with the per-client limits lifted (every client of a
# test is 127.0.0.1).
WEB_SETTINGS = f"""\
from config.settings import *  # noqa: F403

EVENT_RATE_LIMITS = {LIFTED_LIMITS!r}
"""

# Beat processes: the project's Celery app and schedule, each interval entry shortened to
# {every} s. Connected after config.celery's own `import_modules` receiver, so the overlays'
# entries it merges are shortened too.
BEAT_APP = """\
from celery.signals import import_modules

from config.celery import app


def _shorten(**kwargs):
    for entry in app.conf.beat_schedule.values():
        if isinstance(entry["schedule"], (int, float)):
            entry["schedule"] = {every!r}


import_modules.connect(_shorten, sender=app, weak=False)
"""


def free_port() -> int:
    """A port of this xdist worker's own band (tests/parallel.py)."""
    return parallel.free_port()


def process_env(env: Mapping[str, str], tmp: Path) -> dict[str, str]:
    """The environment of one process of the stack: the test database, the test's broker,
    `env` on top, the tmp folder (settings and app modules) importable."""
    full = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        **env,
        "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
    }
    full.pop("TEST_DB_SUFFIX", None)
    return full


def _popen(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen, *, timeout: float = 30.0) -> None:
    """SIGTERM (a warm shutdown: running work finishes), SIGKILL after `timeout`; to the
    process group when the process leads its own (started here), else to the process alone
    (a worker of `start_celery_worker`)."""
    if proc.poll() is not None:
        return

    def send(sig: int) -> None:
        try:
            own_group = os.getpgid(proc.pid) == proc.pid
        except ProcessLookupError:
            return  # it ended meanwhile: nothing left to signal
        if own_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)  # a no-op on a process already reaped

    send(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait(timeout=10)


class Web:
    """One web process: gunicorn as the Procfile runs it (`--config config/gunicorn.py`) on a
    free port; `args` are appended (e.g. `--workers=1`)."""

    def __init__(self, tmp: Path, name: str, env: Mapping[str, str], args=()) -> None:
        (tmp / "stack_web_settings.py").write_text(WEB_SETTINGS)
        self.name = name
        self.port = free_port()
        self.log = tmp / f"{name}.log"
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        self.process = _popen(
            [
                gunicorn,
                "config.wsgi:application",
                "--config",
                "config/gunicorn.py",
                "--bind",
                f"127.0.0.1:{self.port}",
                *args,
            ],
            self.log,
            process_env({**env, "DJANGO_SETTINGS_MODULE": "stack_web_settings"}, tmp),
        )

    def wait_ready(self, deadline: float) -> None:
        last: object = "no answer yet"
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            try:
                last = self.call("GET", "/healthz")[0]
            except OSError as exc:
                last = exc  # not listening yet: kept for the message below
            if last == 200:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.name} did not answer ({last!r}):\n{self.log.read_text()[-3000:]}"
                )
            time.sleep(0.2)  # a server booting, not a race under test

    def call(self, method: str, path: str, body: bytes | None = None, headers=None):
        """One request on a fresh connection: (status, lower-cased headers, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return (
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def stop(self) -> None:
        stop(self.process)


def start_beat(
    tmp: Path, name: str, env: Mapping[str, str], *, every: float
) -> tuple[subprocess.Popen, Path]:
    """A `celery beat` process with its own schedule file (as on its own host), every interval
    entry of the project's schedule shortened to `every` seconds. Returns (process, log)."""
    module = f"stack_beat_{str(every).replace('.', '_')}"
    (tmp / f"{module}.py").write_text(BEAT_APP.format(every=float(every)))
    log = tmp / f"{name}.log"
    proc = _popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            module,
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            str(tmp / f"{name}-schedule"),
        ],
        log,
        process_env({**env, "DJANGO_SETTINGS_MODULE": "config.settings"}, tmp),
    )
    return proc, log


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A deliverer stopped mid-request leaves its answer nowhere to go: not printed."""


class RecordingGateway:
    """The project's local SMS gateway (`sms_gateway_sink`'s handler: bearer check, JSON,
    de-duplication by reference) in a thread, recording the reference of every POST it
    receives, duplicates included; `delay` seconds before it answers (a slow gateway)."""

    def __init__(self, token: str, *, delay: float = 0.0) -> None:
        self.posts: list[str] = []
        self.lock = threading.Lock()
        sink = make_handler(path="/sms", token=token)
        gateway = self

        class Recording(sink):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:  # noqa: N802 — the http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    reference = json.loads(raw)["reference"]
                except (ValueError, TypeError, KeyError):
                    reference = None
                if reference is not None:
                    with gateway.lock:
                        gateway.posts.append(reference)
                time.sleep(delay)
                kept, self.rfile = self.rfile, io.BytesIO(raw)  # the sink reads the body again
                try:
                    super().do_POST()
                finally:
                    self.rfile = kept

        self.server = _QuietServer(("127.0.0.1", 0), Recording)
        # stop() waits for serve_forever's next poll (0.5 s by default)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/sms"

    def received(self) -> Counter[str]:
        with self.lock:
            return Counter(self.posts)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
