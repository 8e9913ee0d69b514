"""End to end: a real Celery worker on Redis, the test database and a local SMTP server.

Registering an attendee on an event with an after_sub scheduler nudges the pass after commit;
the worker runs the pass, which writes the outbox and nudges delivery; the worker delivers to
the local SMTP server. Nothing else drives it (no beat), so the nudges are what is tested.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from events.models import MailOutbox
from events.services import nudge, scheduler
from events.services import registrations as registration_services
from tests.events import factories
from tests.events.mail.test_delivery import SmtpServer
from tests.helpers import start_celery_worker

DEADLINE_SECONDS = 30


def _start_worker(smtp_port: int, log) -> subprocess.Popen:
    return start_celery_worker(
        log,
        name="sched-e2e",
        env={
            "EMAIL_URL": f"smtp://127.0.0.1:{smtp_port}",
            "DEFAULT_FROM_EMAIL": "events@example.org",
            "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
            "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
            "EVENT_PUBLIC_URL": "http://127.0.0.1:8000",
        },
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_registration_leads_to_the_confirmation_mail_through_a_real_worker(actor, free_port):
    assert connection.settings_dict["NAME"].startswith("test_")
    smtp = SmtpServer(free_port).start()
    factories.MessageTemplateFactory(
        ref="registration-confirmation",
        subject="You're registered: {{ event.name }}",
        body="<p>Hello {{ registration.name }}, see you at {{ event.name }}.</p>",
    )
    begin = timezone.now() + timedelta(days=10)
    event = factories.EventFactory(
        name="Worker Summit", date_begin=begin, date_end=begin + timedelta(hours=8)
    )
    scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="registration-confirmation",
        actor=actor,
    )
    celery_app.control.purge()  # stale nudges of earlier tests on this broker database
    cache.delete_many([nudge.PASS_KEY, nudge.DELIVERY_KEY])

    with tempfile.TemporaryFile(mode="w+") as log:
        worker = _start_worker(free_port, log)
        try:
            registration_services.register(
                event=event,
                attendees=[{"name": "Ada Lovelace", "email": "ada@example.org"}],
                actor=actor,
            )
            deadline = time.monotonic() + DEADLINE_SECONDS
            while not smtp.inbox.messages and time.monotonic() < deadline:
                time.sleep(0.2)  # polling an external process, with a deadline
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)
            smtp.stop()
            log.seek(0)
            worker_log = log.read()

    assert smtp.inbox.messages, f"no mail within {DEADLINE_SECONDS}s; worker log:\n{worker_log}"
    (message,) = smtp.inbox.messages
    assert message["To"] == "ada@example.org"
    assert message["Subject"] == "You're registered: Worker Summit"
    row = MailOutbox.objects.get()
    assert (row.state, row.message_id) == ("sent", message["Message-ID"])
