"""Assertions shared by the tests: what a refusal must leave untouched, how to run workers
at the same instant (real threads released by one barrier, joined with a timeout, every
thread's error collected and asserted), and a real Celery worker on the test database."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.db import connection

from events.models import (
    EventAuditLog,
    MailRegistration,
    Registration,
    RegistrationAnswer,
    SeatLedger,
)

DRAFT, OPEN, DONE, CANCEL = "draft", "open", "done", "cancel"
HOLDING = (OPEN, DONE)
# spec.md §4, written out here (never imported from the service): (from, to) → the verb that
# makes it. The model-checked and the property tests compare the code with this one copy.
SPEC_TRANSITIONS = {
    (DRAFT, OPEN): "confirm",
    (OPEN, DONE): "mark_attended",
    (DONE, OPEN): "undo_attendance",
    (DRAFT, CANCEL): "cancel",
    (OPEN, CANCEL): "cancel",
    (OPEN, DRAFT): "reset_to_draft",
    (CANCEL, DRAFT): "reset_to_draft",
}
# The state each verb leads to.
SPEC_TARGET = {
    "confirm": OPEN,
    "mark_attended": DONE,
    "undo_attendance": OPEN,
    "cancel": CANCEL,
    "reset_to_draft": DRAFT,
}


def snapshot(event) -> dict:
    """Everything a verb on `event` could write: its registrations (state, contact, dates),
    answers, audit rows, seat ledger and scheduler rows. Equal before and after = nothing
    written."""
    return {
        "registrations": list(
            Registration.objects.filter(event=event)
            .order_by("pk")
            .values_list(
                "pk",
                "state",
                "active",
                "name",
                "email",
                "phone",
                "confirmed_at",
                "date_closed",
                "updated_at",
            )
        ),
        "answers": RegistrationAnswer.objects.count(),
        "audit": list(EventAuditLog.objects.order_by("pk").values_list("pk", flat=True)),
        "ledger": sorted(
            SeatLedger.objects.filter(event=event).values_list(
                "slot_id", "ticket_id", "reserved", "used"
            ),
            key=str,
        ),
        "mail_rows": MailRegistration.objects.count(),
    }


JOIN_TIMEOUT = 60.0  # seconds: a stuck worker fails the test instead of hanging the suite


def run_concurrently(
    workers: Sequence[Callable[[], Any]], *, timeout: float = JOIN_TIMEOUT
) -> list[Any]:
    """Run each worker in its own thread, all released together by one barrier.

    Returns the workers' results in order. Fails (AssertionError) when a thread is still alive
    after `timeout` or when any worker raised: every thread's error is collected and listed,
    none is swallowed. Expected refusals are the worker's to catch and return. Each thread
    closes its own database connection (tests using this need django_db(transaction=True)).
    """
    barrier = threading.Barrier(len(workers))
    results: list[Any] = [None] * len(workers)
    errors: list[str] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=timeout)
            results[index] = workers[index]()
        except BaseException as exc:  # noqa: BLE001 — collected and asserted below
            errors.append(f"worker {index}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(workers))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [i for i, thread in enumerate(threads) if thread.is_alive()]
    assert not stuck, f"workers {stuck} still running after {timeout} s (deadlock?)"
    assert errors == [], errors
    return results


ROOT = Path(__file__).resolve().parents[1]


def database_url() -> str:
    """The URL of the database this test runs on (the pytest test database)."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def start_celery_worker(log: IO[bytes], *, name: str, env: Mapping[str, str]) -> subprocess.Popen:
    """A real Celery worker (solo pool, no beat) on the test database and the test's broker,
    logging to `log`; `env` adds or overrides variables (adapters, mail server). The caller
    stops it."""
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,  # the test's own Redis database
        "CACHE_URL": os.environ["CACHE_URL"],
        **env,
    }
    full_env.pop("TEST_DB_SUFFIX", None)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--hostname",
            f"{name}-{os.getpid()}@%h",
        ],
        cwd=ROOT,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def kill_worker(worker: subprocess.Popen, *, timeout: float = 20.0) -> None:
    """SIGKILL a worker (no shutdown, no ack, no rollback of its own) and wait until PostgreSQL
    has ended its sessions: afterwards what it committed is final (a COMMIT already on the wire
    has landed) and its row locks are gone. Counts every session on the test database but the
    test's own, so the test must hold no other connection."""
    worker.kill()
    worker.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            (others,) = cursor.fetchone()
            if not others:
                return
            assert time.monotonic() < deadline, f"{others} session(s) outlived the killed worker"
            time.sleep(0.02)  # PostgreSQL notices the closed socket and ends the backend


def terminate_backend(pid: int) -> None:
    """Drop a backend from a separate connection, as a failover or a restart would."""
    db = connection.settings_dict
    assert db["NAME"].startswith("test_")
    with psycopg.connect(
        host=db["HOST"],
        port=db["PORT"],
        user=db["USER"],
        password=db["PASSWORD"],
        dbname=db["NAME"],
        autocommit=True,
    ) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone() == (True,)
