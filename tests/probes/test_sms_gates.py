"""Probe: the sms arm fails loud, never silent (an unwired SMS port must stop start-up or
park the scheduler, never drop messages quietly).

- The HTTP gateway adapter selected with EVENT_SMS_GATEWAY_URL unset or empty: start-up refuses
  naming the knob (the system check every `manage.py` command runs, and the WSGI application).
- The code's refusing default port: an sms scheduler is parked `port_not_wired` (error state,
  audit row), nothing is queued, and it recovers once the port is wired.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest

from events.models import EventAuditLog, Mail, MailRegistration
from events.services import scheduler
from sms.models import SmsOutbox
from tests.events import factories
from tests.events.config.test_config import ROOT, manage
from tests.sms.gateway import GATEWAY, wire

KNOB = "EVENT_SMS_GATEWAY_URL"


@pytest.fixture(scope="module")
def knob_values(tmp_path_factory) -> dict[str, str]:
    """A complete, valid set of knobs: what `make run` writes (scripts/write_env.py)."""
    target = tmp_path_factory.mktemp("env") / ".env"
    subprocess.run([sys.executable, "scripts/write_env.py", str(target)], cwd=ROOT, check=True)
    values = {}
    for line in target.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            values[key] = value
    return values


@pytest.fixture
def gateway(settings, httpserver):
    return wire(settings, httpserver)


@pytest.mark.parametrize("url", ["", "   "])
def test_the_gateway_adapter_without_a_gateway_url_fails_every_manage_command(url, knob_values):
    result = manage("check", values={**knob_values, "EVENT_SMS_QUEUE": GATEWAY, KNOB: url})
    assert result.returncode != 0
    assert f"(sms.E001) {KNOB} is unset or empty" in result.stderr
    assert "EVENT_SMS_QUEUE=sms.adapters.GatewaySmsQueue" in result.stderr


def test_the_gateway_adapter_with_a_url_and_the_refusing_port_without_one_both_start(
    knob_values,
):
    wired = manage("check", values={**knob_values, "EVENT_SMS_QUEUE": GATEWAY})
    assert wired.returncode == 0, wired.stderr
    refusing = "events.ports.RefusingSmsQueue"
    unwired = manage("check", values={**knob_values, "EVENT_SMS_QUEUE": refusing, KNOB: ""})
    assert unwired.returncode == 0, unwired.stderr


def _import_wsgi(values: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, **values, "DJANGO_ENV_FILE": "/dev/null"}
    env.pop("EVENT_TEST_ADMIN_URL", None)
    return subprocess.run(
        [sys.executable, "-c", "import config.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_wsgi_application_refuses_to_start_without_the_gateway_url(knob_values):
    refused = _import_wsgi({**knob_values, "EVENT_SMS_QUEUE": GATEWAY, KNOB: ""})
    assert refused.returncode != 0
    assert f"ImproperlyConfigured: {KNOB} is unset or empty" in refused.stderr
    started = _import_wsgi({**knob_values, "EVENT_SMS_QUEUE": GATEWAY})
    assert started.returncode == 0, started.stderr


@pytest.mark.django_db
def test_the_refusing_default_parks_the_sms_scheduler_port_not_wired(gateway, settings, actor):
    settings.EVENT_SMS_QUEUE = "events.ports.RefusingSmsQueue"
    factories.MessageTemplateFactory(ref="sms", channel="sms", subject="", body="Hi")
    event = factories.EventFactory(country="BE")
    mail = scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="sms",
        notification_type="sms",
        include_existing=True,
        actor=actor,
    )
    factories.RegistrationFactory(event=event, phone="0470 12 34 56")
    at = mail.created_at + timedelta(minutes=1)

    report = scheduler.run_pass(now=at)

    assert (report.messages_queued, report.errors) == (0, 1)
    parked = Mail.objects.get(pk=mail.pk)
    assert parked.mail_state == "error"
    assert parked.error_message.startswith("[port_not_wired] The EventSmsQueue port is not wired")
    error = EventAuditLog.objects.get(verb="scheduler.error")
    assert (error.data["scheduler"], error.data["code"]) == (mail.pk, "port_not_wired")
    assert not SmsOutbox.objects.exists()
    assert not MailRegistration.objects.filter(scheduler=mail, mail_sent=True).exists()

    settings.EVENT_SMS_QUEUE = GATEWAY
    recovered = scheduler.run_pass(now=at + timedelta(minutes=1))
    assert (recovered.messages_queued, recovered.errors) == (1, 0)
    assert Mail.objects.get(pk=mail.pk).error_message == ""
    assert SmsOutbox.objects.count() == 1
