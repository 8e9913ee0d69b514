"""How the sms overlay plugs into core: the demo, beat, the task by name, the nudge after
commit, the template preview hook; and the .env.example wiring that `make run` uses."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import transaction

from events import hooks, i18n
from events.models import Event, Mail
from events.ports import OutgoingSms
from events.services import nudge, scheduler
from sms.adapters import NUDGE_KEY, GatewaySmsQueue
from sms.models import SmsOutbox
from sms.services import delivery
from tests.sms.gateway import bearer

ROOT = Path(__file__).resolve().parents[2]


def test_env_example_wires_the_gateway_adapter_to_the_local_sink():
    values = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert values["EVENT_SMS_QUEUE"] == "sms.adapters.GatewaySmsQueue"
    assert values["EVENT_SMS_GATEWAY_URL"] == "http://127.0.0.1:9099/sms"
    assert values["EVENT_SMS_GATEWAY_TOKEN"] == "generate-me"  # make run writes a random one
    procfile = (ROOT / "Procfile").read_text()
    assert "sms-gateway: .venv/bin/python manage.py sms_gateway_sink" in procfile


def test_beat_delivers_the_outbox_every_minute_through_the_overlay_hook():
    from config.celery import app, merge_periodic_tasks

    assert {"name": "sms-outbox-delivery", "task": "sms.deliver_outbox", "schedule": 60.0} in (
        hooks.periodic_tasks
    )
    merge_periodic_tasks()
    assert app.conf.beat_schedule["sms-outbox-delivery"] == {
        "task": "sms.deliver_outbox",
        "schedule": 60.0,
    }


@pytest.mark.django_db(transaction=True)
def test_queueing_nudges_the_delivery_task_by_name_only_after_commit():
    # A nudge pending from an earlier test (its key lives 5 s in Redis) would swallow this one.
    nudge.started(key=NUDGE_KEY)
    message = OutgoingSms(idempotency_key="k-1", recipient="+32470123456", body="Hi")
    with mock.patch.object(nudge, "publish") as publish:
        with transaction.atomic():
            GatewaySmsQueue().enqueue_many(messages=[message])
            assert publish.call_count == 0  # never inside the transaction
        assert publish.call_args_list == [mock.call("sms.deliver_outbox")]
    with mock.patch.object(nudge, "publish") as publish:
        with transaction.atomic():
            GatewaySmsQueue().enqueue_many(messages=[message])
            transaction.set_rollback(True)
        assert publish.call_count == 0  # rolled back: nothing to deliver
    assert SmsOutbox.objects.count() == 1


@pytest.mark.django_db
def test_the_registered_task_delivers(gateway):
    from celery import current_app

    import sms.tasks  # noqa: F401 — registers the task (the worker autodiscovers it)

    SmsOutbox.objects.create(
        reference="r-1", to="+32470123456", body="Hi", next_attempt_at=delivery.timezone.now()
    )
    gateway.expect_request("/sms", headers=bearer()).respond_with_json({})
    result = current_app.tasks["sms.deliver_outbox"].apply().get()
    assert result["sent"] == 1


@pytest.mark.django_db
def test_seed_demo_adds_an_sms_confirmation_the_pass_sends_and_the_gateway_receives(gateway):
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "sms: confirmation SMS scheduler" in out.getvalue()
    summit = Event.objects.get(name="Open Source Summit")
    sms_schedulers = Mail.objects.filter(event=summit, notification_type="sms")
    assert set(sms_schedulers.values_list("template_ref", "interval_type")) == {
        ("registration-confirmation-sms", "after_sub"),
        ("event-reminder-sms", "before_event"),
    }
    call_command("seed_demo", stdout=StringIO())  # idempotent
    assert sms_schedulers.count() == 2

    confirmation = sms_schedulers.get(interval_type="after_sub")
    report = scheduler.run_pass(now=confirmation.scheduled_date)
    assert report.errors == 0
    rows = list(SmsOutbox.objects.filter(scheduler=confirmation))
    holders = summit.registrations.filter(state__in=("open", "done"), active=True)
    assert 0 < len(rows) <= holders.count()
    # Each in its registration's language (the summit's name in it).
    for row in rows:
        name = i18n.localized(summit, "name", row.registration.lang)
        assert row.to.startswith("+") and name in row.body
    assert {row.registration.lang for row in rows} >= {"en", "fr"}
    gateway.expect_request("/sms", headers=bearer()).respond_with_json({})
    assert delivery.deliver_outbox().sent == len(rows)
