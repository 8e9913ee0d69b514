"""The confirmation mail carries the PDF ticket when the event says `attach`, delivered through
the real path: the scheduler pass queues the outbox, `deliver_outbox` sends it over Django's
SMTP backend to a local SMTP server (aiosmtpd), which the test reads back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from events.models import MailOutbox, OutboxState, TicketPdf
from events.services import confirmation, delivery, scheduler
from events.services import registrations as registration_services
from tests.events import factories
from tests.events.mail.test_delivery import smtp  # noqa: F401 — the fixture: a local SMTP server
from tests.events.tickets import pdfs


def _attachments(message) -> list[tuple[str, str, bytes]]:
    return [
        (part.get_filename(), part.get_content_type(), part.get_payload(decode=True))
        for part in message.walk()
        if part.get_filename()
    ]


def _event_with_confirmation(actor, now, **fields):
    factories.MessageTemplateFactory(
        ref="registration-confirmation",
        subject="You're registered: {{ event.name }}",
        body="<p>Hello {{ registration.name }}, see you at {{ event.name }}.</p>",
    )
    begin = now + timedelta(days=10)
    event = factories.EventFactory(
        name="Summit", date_begin=begin, date_end=begin + timedelta(hours=8), **fields
    )
    scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="registration-confirmation",
        actor=actor,
    )
    return event


def _register(event, actor, name: str, email: str):
    ticket = factories.TicketFactory(event=event, name="Day pass")
    (reg,) = registration_services.register(
        event=event, ticket=ticket, attendees=[{"name": name, "email": email}], actor=actor
    )
    return reg


@pytest.mark.django_db
@pytest.mark.parametrize("script", ["latin", "arabic", "japanese"])
def test_the_confirmation_mail_carries_the_pdf_ticket_over_smtp(actor, now, smtp, script):  # noqa: F811
    event = _event_with_confirmation(actor, now)
    name = pdfs.NAMES[script]
    reg = _register(event, actor, name, "guest@example.org")
    assert scheduler.run_pass(now=now + timedelta(minutes=1)).messages_queued == 1
    smtp.start()

    report = delivery.deliver_outbox(now=now + timedelta(minutes=1))

    assert (report.sent, report.failed) == (1, 0)
    (message,) = smtp.inbox.messages
    assert message["To"] == "guest@example.org"
    assert message["Subject"] == "You're registered: Summit"
    ((filename, content_type, content),) = _attachments(message)
    assert filename == f"ticket-summit-{reg.pk}.pdf"
    assert content_type == "application/pdf"
    text = pdfs.text(content)
    assert name in text and "Summit" in text and "Day pass" in text
    assert pdfs.qr_codes(content) == [reg.barcode]
    assert MailOutbox.objects.get().state == OutboxState.SENT


@pytest.mark.django_db
def test_link_only_sends_the_confirmation_without_the_pdf(actor, now, smtp):  # noqa: F811
    event = _event_with_confirmation(actor, now, ticket_pdf=TicketPdf.LINK)
    _register(event, actor, "Ada Lovelace", "ada@example.org")
    scheduler.run_pass(now=now + timedelta(minutes=1))
    smtp.start()

    assert delivery.deliver_outbox(now=now + timedelta(minutes=1)).sent == 1

    (message,) = smtp.inbox.messages
    assert _attachments(message) == []


@pytest.mark.django_db
def test_only_the_confirmation_carries_the_ticket_not_a_reminder(actor, now, smtp):  # noqa: F811
    event = _event_with_confirmation(actor, now)
    factories.MessageTemplateFactory(ref="reminder", subject="Tomorrow: {{ event.name }}")
    scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="days",
        interval_type="before_event",
        template_ref="reminder",
        actor=actor,
    )
    _register(event, actor, "Ada Lovelace", "ada@example.org")
    scheduler.run_pass(now=now + timedelta(minutes=1))
    scheduler.run_pass(now=event.date_begin - timedelta(hours=20))
    smtp.start()

    assert delivery.deliver_outbox(now=event.date_begin - timedelta(hours=20)).sent == 2

    by_subject = {m["Subject"]: m for m in smtp.inbox.messages}
    assert [f for f, _, _ in _attachments(by_subject["You're registered: Summit"])] != []
    assert _attachments(by_subject["Tomorrow: Summit"]) == []


@pytest.mark.django_db
def test_a_resent_confirmation_carries_the_ticket_and_a_cancelled_one_does_not(actor, now, smtp):  # noqa: F811
    event = _event_with_confirmation(actor, now)
    reg = _register(event, actor, "Ada Lovelace", "ada@example.org")
    confirmation.resend_confirmation(registration=reg, actor=actor)
    smtp.start()
    assert delivery.deliver_outbox(now=now + timedelta(minutes=1)).sent == 1
    (resent,) = smtp.inbox.messages
    assert len(_attachments(resent)) == 1

    confirmation.resend_confirmation(registration=reg, actor=actor)
    registration_services.cancel(registration=reg, actor=actor)  # before the mail goes out
    assert delivery.deliver_outbox(now=now + timedelta(minutes=2)).sent == 1

    assert _attachments(smtp.inbox.messages[1]) == []  # a cancelled registration has no ticket
