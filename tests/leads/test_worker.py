"""The lead pass in the background: beat's
schedule carries the lead pass (merged from the overlay's hook, config never names it), and a
real Celery worker started here runs the pass after a registration commit, nudged by name."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings

from config.celery import app as celery_app
from events.services import registrations as registration_services
from leads import services
from leads.models import Lead, LeadProvenanceRegistration, LeadRequest
from leads.services.requests import NUDGE_KEY
from tests.events import factories
from tests.helpers import start_celery_worker

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 30


def test_beat_loads_the_lead_pass_into_its_schedule():
    """In a fresh process, the way `celery beat` loads (Beat.init_loader), then the schedule."""
    code = (
        "from config.celery import app\n"
        "from celery.apps.beat import Beat\n"
        "Beat(app=app).init_loader()\n"
        "entry = app.conf.beat_schedule['leads-lead-pass']\n"
        "print(entry['task'], entry['schedule'])\n"
        "print('events-scheduler-pass' in app.conf.beat_schedule)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["leads.run_pass", "60.0", "True"]


def test_the_lead_pass_task_is_registered_by_name():
    celery_app.loader.import_default_modules()
    assert "leads.run_pass" in celery_app.tasks
    assert celery_app.conf.beat_schedule["leads-lead-pass"]["task"] == "leads.run_pass"


def _start_worker(log) -> subprocess.Popen:
    return start_celery_worker(
        log, name="leads-e2e", env={"EVENT_LEAD_SINK": "leads.adapters.LocalLeadSink"}
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_lead_pass_after_a_registration_commit(actor):
    assert connection.settings_dict["NAME"].startswith("test_")
    event = factories.EventFactory(name="Worker Leads")
    with override_settings(EVENT_LEAD_SINK="leads.adapters.LocalLeadSink"):
        rule = services.create_rule(
            name="every attendee",
            lead_creation_basis="attendee",
            lead_creation_trigger="confirm",
            lead_type="lead",
            event=event,
            actor=actor,
        )
    celery_app.control.purge()  # stale nudges of earlier tests on this broker database
    cache.delete(NUDGE_KEY)

    with tempfile.TemporaryFile(mode="w+") as log:
        worker = _start_worker(log)
        try:
            (registration,) = registration_services.register(
                event=event, attendees=[{"name": "Ada", "email": "ada@example.org"}], actor=actor
            )
            committed = time.monotonic()
            deadline = committed + DEADLINE_SECONDS
            while not Lead.objects.exists() and time.monotonic() < deadline:
                time.sleep(0.2)  # polling an external process, with a deadline
            took = time.monotonic() - committed
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)
            log.seek(0)
            worker_log = log.read()

    assert Lead.objects.exists(), f"no lead within {DEADLINE_SECONDS}s; worker log:\n{worker_log}"
    print(f"lead made by the worker {took:.1f} s after the commit")
    assert took < DEADLINE_SECONDS
    assert "leads.run_pass" in worker_log
    (lead,) = Lead.objects.all()
    assert lead.name == "Worker Leads – Ada"
    assert list(LeadProvenanceRegistration.objects.values_list("rule_id", "registration_id")) == [
        (rule.pk, registration.pk)
    ]
    assert not LeadRequest.objects.exists()  # the worker's pass finished the request
