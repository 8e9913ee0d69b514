"""Outbox delivery through Django's SMTP backend to a real local SMTP server (aiosmtpd)."""

from __future__ import annotations

import email
import logging
import threading
from datetime import timedelta
from email.message import Message
from unittest import mock

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from events.models import MailOutbox
from events.services import delivery, scheduler
from tests.events import factories
from tests.events.config.test_ports import ALL_WIRED


class Inbox:
    """An aiosmtpd handler keeping every message it accepted."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 — aiosmtpd hook name
        with self.lock:
            self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"

    def message_ids(self) -> list[str]:
        with self.lock:
            return [m["Message-ID"] for m in self.messages]


class SmtpServer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.inbox = Inbox()
        self.controller: Controller | None = None

    def start(self) -> SmtpServer:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def smtp(settings, free_port):
    """SMTP settings pointing at a local server on a free port (started by the test)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = free_port
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.DEFAULT_FROM_EMAIL = "events@example.org"
    for name, path in ALL_WIRED.items():
        setattr(settings, name, path)
    settings.EVENT_MAIL_BATCH = 500
    settings.EVENT_MAIL_CRON_LIMIT = 5000
    server = SmtpServer(free_port)
    yield server
    server.stop()


def _queue_reminders(actor, now, count: int) -> list:
    factories.MessageTemplateFactory(
        ref="reminder",
        subject="Tomorrow: {{ event.name }}",
        body="<p>Hello {{ registration.name }}, {{ event.name }} starts soon &amp; early.</p>",
    )
    begin = now + timedelta(days=10)
    event = factories.EventFactory(
        name="Summit", date_begin=begin, date_end=begin + timedelta(hours=8)
    )
    regs = [
        factories.RegistrationFactory(event=event, name=f"Guest {i}", email=f"g{i}@example.org")
        for i in range(count)
    ]
    scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="days",
        interval_type="before_event",
        template_ref="reminder",
        actor=actor,
    )
    assert scheduler.run_pass(now=begin - timedelta(days=1)).messages_queued == count
    return regs


@pytest.mark.django_db
def test_outbox_mails_reach_a_real_smtp_server_rendered(actor, now, smtp):
    regs = _queue_reminders(actor, now, 3)
    smtp.start()

    report = delivery.deliver_outbox(now=now)

    assert (report.sent, report.retried, report.failed) == (3, 0, 0)
    received = {m["To"]: m for m in smtp.inbox.messages}
    assert set(received) == {r.email for r in regs}
    message = received["g0@example.org"]
    assert message["Subject"] == "Tomorrow: Summit"
    assert message["From"] == "events@example.org"
    parts = {
        part.get_content_type(): part.get_payload(decode=True).decode()
        for part in message.walk()
        if not part.is_multipart()
    }
    assert parts["text/plain"].strip() == "Hello Guest 0, Summit starts soon & early."
    assert "<p>Hello Guest 0, Summit starts soon &amp; early.</p>" in parts["text/html"]
    rows = MailOutbox.objects.order_by("pk")
    assert sorted(smtp.inbox.message_ids()) == sorted(r.message_id for r in rows)
    assert {(r.state, r.attempts, r.last_error) for r in rows} == {("sent", 1, "")}
    assert all(r.sent_at is not None for r in rows)
    assert delivery.deliver_outbox(now=now).sent == 0  # nothing sent twice


@pytest.mark.django_db
def test_server_down_keeps_rows_queued_with_backoff_then_delivers_each_once(actor, now, smtp):
    _queue_reminders(actor, now, 4)

    down = delivery.deliver_outbox(now=now)  # nothing listens on the port

    assert (down.sent, down.retried, down.failed) == (0, 4, 0)
    rows = list(MailOutbox.objects.order_by("pk"))
    assert {(r.state, r.attempts, r.next_attempt_at) for r in rows} == {
        ("queued", 1, now + timedelta(seconds=30))
    }
    assert all("ConnectionRefusedError" in r.last_error for r in rows)

    again = delivery.deliver_outbox(now=now + timedelta(seconds=29))  # still backing off
    assert (again.sent, again.retried) == (0, 0)
    assert set(MailOutbox.objects.values_list("attempts", flat=True)) == {1}

    second_failure = delivery.deliver_outbox(now=now + timedelta(seconds=30))
    assert second_failure.retried == 4
    assert set(MailOutbox.objects.values_list("attempts", "next_attempt_at")) == {
        (2, now + timedelta(seconds=90))
    }

    smtp.start()  # the server returns
    back = delivery.deliver_outbox(now=now + timedelta(seconds=90))

    assert (back.sent, back.retried, back.failed) == (4, 0, 0)
    ids = smtp.inbox.message_ids()
    assert len(ids) == 4 and len(set(ids)) == 4
    assert sorted(ids) == sorted(MailOutbox.objects.values_list("message_id", flat=True))
    assert set(MailOutbox.objects.values_list("state", "attempts")) == {("sent", 3)}
    assert delivery.deliver_outbox(now=now + timedelta(hours=1)).sent == 0
    assert len(smtp.inbox.messages) == 4


@pytest.mark.django_db
def test_a_permanent_refusal_fails_the_row_without_retry(now, smtp, settings):
    class Refusing(Inbox):
        async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802
            return "550 no such user"

    smtp.inbox = Refusing()
    smtp.start()
    factories.MailOutboxFactory(recipient="nobody@example.org", next_attempt_at=now)

    report = delivery.deliver_outbox(now=now)

    row = MailOutbox.objects.get()
    assert (report.failed, row.state, row.attempts) == (1, "failed", 1)
    assert "SMTPRecipientsRefused" in row.last_error
    assert delivery.deliver_outbox(now=now + timedelta(days=1)).failed == 0


@pytest.mark.django_db
def test_a_row_django_cannot_build_fails_alone_and_the_batch_keeps_its_sent_marks(
    now, smtp, caplog
):
    smtp.start()
    ada = factories.MailOutboxFactory(recipient="ada@example.org", next_attempt_at=now)
    bad_to = factories.MailOutboxFactory(
        recipient="eve@example.org\nBcc: everyone@example.org", next_attempt_at=now
    )
    bad_subject = factories.MailOutboxFactory(
        subject="Hello\nBcc: everyone@example.org", next_attempt_at=now
    )
    bob = factories.MailOutboxFactory(recipient="bob@example.org", next_attempt_at=now)

    with caplog.at_level(logging.ERROR, logger="events.delivery"):
        first = delivery.deliver_outbox(now=now)
    second = delivery.deliver_outbox(now=now + timedelta(days=1))

    assert (first.sent, first.failed, first.retried) == (2, 2, 0)
    assert (second.sent, second.failed, second.retried) == (0, 0, 0)
    assert sorted(smtp.inbox.message_ids()) == sorted([ada.message_id, bob.message_id])
    rows = {row.pk: row for row in MailOutbox.objects.all()}
    assert {(rows[r.pk].state, rows[r.pk].attempts) for r in (ada, bob)} == {("sent", 1)}
    assert (rows[bad_to.pk].state, rows[bad_to.pk].attempts) == ("failed", 1)
    assert rows[bad_to.pk].last_error.startswith("ValueError: ")
    assert (rows[bad_subject.pk].state, rows[bad_subject.pk].attempts) == ("failed", 1)
    assert rows[bad_subject.pk].last_error.startswith("BadHeaderError: ")
    logged = [r.getMessage() for r in caplog.records if r.name == "events.delivery"]
    assert [line.split(" (")[0] for line in logged] == [
        f"outbox row {bad_to.pk}",
        f"outbox row {bad_subject.pk}",
    ]


@pytest.mark.django_db
def test_an_unforeseen_error_fails_its_row_only_and_nothing_is_sent_twice(now, smtp, caplog):
    smtp.start()
    rows = factories.MailOutboxFactory.create_batch(3, next_attempt_at=now)
    build = delivery._message

    def breaking(row, connection):
        if row.pk == rows[1].pk:
            raise RuntimeError("template engine exploded")
        return build(row, connection)

    with (
        mock.patch.object(delivery, "_message", side_effect=breaking),
        caplog.at_level(logging.ERROR, logger="events.delivery"),
    ):
        first = delivery.deliver_outbox(now=now)
    second = delivery.deliver_outbox(now=now + timedelta(days=1))

    assert (first.sent, first.failed, second.sent, second.failed) == (2, 1, 0, 0)
    assert sorted(smtp.inbox.message_ids()) == sorted([rows[0].message_id, rows[2].message_id])
    broken = MailOutbox.objects.get(pk=rows[1].pk)
    assert (broken.state, broken.last_error) == ("failed", "RuntimeError: template engine exploded")
    (record,) = [r for r in caplog.records if r.name == "events.delivery"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.getMessage().startswith(f"outbox row {rows[1].pk} ")


def test_backoff_doubles_and_is_capped():
    assert [delivery.backoff(n).total_seconds() for n in (1, 2, 3, 8, 20)] == [
        30,
        60,
        120,
        3600,
        3600,
    ]


@pytest.mark.django_db(transaction=True)
def test_two_deliverers_at_once_send_each_row_once(now, smtp, settings):
    """SKIP LOCKED claims: two delivery runs in two threads, every Message-ID arrives once."""
    from tests.events.scheduler.test_scheduler_concurrency import _run_in_threads

    settings.EVENT_MAIL_BATCH = 5
    smtp.start()
    factories.MailOutboxFactory.create_batch(30, next_attempt_at=timezone.now())

    reports = _run_in_threads(2, lambda: delivery.deliver_outbox(now=timezone.now()))

    assert sum(r.sent for r in reports) == 30
    ids = smtp.inbox.message_ids()
    assert len(ids) == 30 and len(set(ids)) == 30
    assert set(MailOutbox.objects.values_list("state", flat=True)) == {"sent"}
