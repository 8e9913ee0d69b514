"""The sms branch of the scheduler pass with the built-in gateway outbox (spec-overlay.md §4,
spec.md §6): one SMS per eligible registration, rendered and
E.164, `skipped_no_phone` counted and not retried, mail and sms schedulers side by side, and
postponement re-arming sent SMS reminders exactly like mail ones.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from events.models import EventAuditLog, MailOutbox, MailRegistration
from events.services import events as event_services
from events.services import registrations as registration_services
from events.services import scheduler
from sms.models import SmsOutbox
from sms.services import delivery
from tests.events import factories
from tests.sms.gateway import bearer

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
SMS_BODY = "{{ registration.name }}: {{ event.name }} starts {{ event_begin }}."


def templates() -> None:
    factories.MessageTemplateFactory(ref="reminder-sms", channel="sms", subject="", body=SMS_BODY)
    factories.MessageTemplateFactory(
        ref="reminder-mail", channel="mail", body="<p>Hi {{ registration.name }}</p>"
    )


def add(event, actor, interval_type, *, sms=True, nbr=1, unit="days", **kw):
    return scheduler.add_scheduler(
        event=event,
        interval_nbr=nbr,
        interval_unit=unit,
        interval_type=interval_type,
        template_ref="reminder-sms" if sms else "reminder-mail",
        notification_type="sms" if sms else "mail",
        actor=actor,
        **kw,
    )


def make_event(begin, **fields):
    return factories.EventFactory(
        name="Summit", date_begin=begin, date_end=begin + 8 * HOUR, date_tz="UTC", **fields
    )


def test_an_sms_reminder_sends_one_rendered_e164_sms_per_eligible_registration(gateway, actor, now):
    templates()
    event = make_event(now + 10 * DAY, country="BE")
    local = factories.RegistrationFactory(event=event, name="Ada", phone="0470 12 34 56")
    foreign = factories.RegistrationFactory(event=event, name="Bob", phone="+33 6 12 34 56 78")
    attended = factories.RegistrationFactory(
        event=event, name="Cy", phone="0471/11.22.33", state="done"
    )
    factories.RegistrationFactory(event=event, name="Dee", phone="")  # skipped_no_phone
    factories.RegistrationFactory(event=event, name="Eve", phone="12")  # skipped_no_phone
    factories.RegistrationFactory(event=event, name="Draft", phone="0470 99 99 99", state="draft")
    factories.RegistrationFactory(event=event, name="Gone", phone="0470 88 88 88", state="cancel")
    reminder = add(event, actor, "before_event")

    report = scheduler.run_pass(now=now + 9 * DAY)

    assert (report.messages_queued, report.skipped, report.errors) == (3, 2, 0)
    rows = {row.registration_id: row for row in SmsOutbox.objects.all()}
    assert set(rows) == {local.pk, foreign.pk, attended.pk}  # never draft, cancelled, no number
    assert (rows[local.pk].to, rows[foreign.pk].to, rows[attended.pk].to) == (
        "+32470123456",
        "+33612345678",
        "+32471112233",
    )
    begin = event.date_begin.strftime("%A %-d %B %Y, %H:%M")
    assert rows[local.pk].body == f"Ada: Summit starts {begin} (UTC)."
    assert {row.scheduler_id for row in rows.values()} == {reminder.pk}
    assert len({row.reference for row in rows.values()}) == 3
    assert not MailOutbox.objects.exists()
    sent = EventAuditLog.objects.get(verb="scheduler.sent", data__scheduler=reminder.pk)
    assert (sent.data["queued"], sent.data["skipped"], sent.data["done"]) == (3, 2, True)
    # Not retried: the reminder is done, the numberless are not asked again.
    again = scheduler.run_pass(now=now + 9 * DAY + HOUR)
    assert (again.messages_queued, again.skipped) == (0, 0)
    assert SmsOutbox.objects.count() == 3

    # Delivered as JSON {to, body, reference} with the bearer.
    for row in rows.values():
        gateway.expect_oneshot_request(
            "/sms",
            method="POST",
            headers=bearer(),
            json={"to": row.to, "body": row.body, "reference": row.reference},
        ).respond_with_json({})
    assert delivery.deliver_outbox().sent == 3
    gateway.check_assertions()


def test_after_sub_sms_records_skipped_no_phone_per_registration_and_never_retries(
    gateway, actor, now
):
    templates()
    event = make_event(now + 10 * DAY, country="BE")
    welcome = add(event, actor, "after_sub", nbr=0, unit="now")
    with_phone, without = registration_services.register(
        event=event,
        attendees=[
            {"name": "Ada", "email": "ada@example.org", "phone": "0470 12 34 56"},
            {"name": "Nop", "email": "nop@example.org", "phone": "not a number"},
        ],
        actor=actor,
    )
    report = scheduler.run_pass(now=welcome.created_at + HOUR)
    assert (report.messages_queued, report.skipped) == (1, 1)
    outcomes = dict(
        MailRegistration.objects.filter(scheduler=welcome).values_list("registration_id", "outcome")
    )
    assert outcomes == {with_phone.pk: "sent", without.pk: "skipped_no_phone"}
    (row,) = SmsOutbox.objects.all()
    assert (row.to, row.registration_id) == ("+32470123456", with_phone.pk)
    assert scheduler.run_pass(now=welcome.created_at + 2 * HOUR).skipped == 0
    assert SmsOutbox.objects.count() == 1


def test_the_same_message_queued_twice_is_one_outbox_row(gateway):
    from events.ports import OutgoingSms
    from sms.adapters import GatewaySmsQueue

    message = OutgoingSms(idempotency_key="s1-r1-100", recipient="+32470123456", body="Hi")
    GatewaySmsQueue().enqueue_many(messages=[message])
    GatewaySmsQueue().enqueue_many(messages=[message, message])
    assert list(SmsOutbox.objects.values_list("reference", "to", "body")) == [
        ("s1-r1-100", "+32470123456", "Hi")
    ]


def test_mail_and_sms_schedulers_of_one_event_run_in_one_pass_exactly_once_each(
    gateway, actor, now
):
    templates()
    event = make_event(now + 10 * DAY, country="BE")
    regs = [factories.RegistrationFactory(event=event, phone=f"0470 00 00 0{i}") for i in range(4)]
    schedulers = {
        "mail-reminder": add(event, actor, "before_event", sms=False),
        "sms-reminder": add(event, actor, "before_event"),
        "mail-welcome": add(
            event, actor, "after_sub", sms=False, nbr=0, unit="now", include_existing=True
        ),
        "sms-welcome": add(event, actor, "after_sub", nbr=0, unit="now", include_existing=True),
    }
    report = scheduler.run_pass(now=now + 9 * DAY)
    assert (report.schedulers_processed, report.messages_queued, report.errors) == (4, 16, 0)
    mails = Counter(MailOutbox.objects.values_list("scheduler_id", "registration_id"))
    texts = Counter(SmsOutbox.objects.values_list("scheduler_id", "registration_id"))
    for name, mail in schedulers.items():
        box = texts if name.startswith("sms") else mails
        assert {reg.pk: box[(mail.pk, reg.pk)] for reg in regs} == {reg.pk: 1 for reg in regs}
    assert scheduler.run_pass(now=now + 9 * DAY + HOUR).messages_queued == 0
    assert (MailOutbox.objects.count(), SmsOutbox.objects.count()) == (8, 8)


def test_postponing_an_event_rearms_sent_sms_reminders_exactly_like_mail_ones(gateway, actor, now):
    templates()
    begin = now + 10 * DAY
    event = make_event(begin, country="BE")
    regs = [factories.RegistrationFactory(event=event, phone=f"0470 00 00 1{i}") for i in range(2)]
    sms_reminder = add(event, actor, "before_event")
    mail_reminder = add(event, actor, "before_event", sms=False)
    assert scheduler.run_pass(now=begin - DAY).messages_queued == 4

    event_services.update_event(
        event=event, date_begin=begin + 7 * DAY, date_end=begin + 7 * DAY + 8 * HOUR, actor=actor
    )

    sms_after = type(sms_reminder).objects.get(pk=sms_reminder.pk)
    mail_after = type(mail_reminder).objects.get(pk=mail_reminder.pk)
    for mail in (sms_after, mail_after):
        assert (mail.mail_done, mail.mail_count_done, mail.last_registration_id) == (False, 0, 0)
        assert mail.scheduled_date == begin + 6 * DAY
        assert mail.mail_state == "scheduled"
    assert set(
        EventAuditLog.objects.filter(verb="scheduler.rearmed").values_list(
            "data__scheduler", flat=True
        )
    ) == {sms_reminder.pk, mail_reminder.pk}
    assert scheduler.run_pass(now=begin + 5 * DAY).messages_queued == 0  # not yet
    assert scheduler.run_pass(now=begin + 6 * DAY).messages_queued == 4
    per_reg = Counter(
        SmsOutbox.objects.filter(scheduler=sms_reminder).values_list("registration_id", flat=True)
    )
    mail_per_reg = Counter(
        MailOutbox.objects.filter(scheduler=mail_reminder).values_list("registration_id", flat=True)
    )
    assert per_reg == mail_per_reg == {regs[0].pk: 2, regs[1].pk: 2}
    # A new date is a new message: a new reference the gateway will not take for a duplicate.
    assert SmsOutbox.objects.values("reference").distinct().count() == 4


def test_a_queued_row_holds_every_column_as_the_orm_would_write_it(gateway):
    """The adapter's one-statement INSERT gives each column the rows do not carry its value:
    due now, made now, the field's default for the rest."""
    from django.utils import timezone

    from events.ports import OutgoingSms
    from sms.adapters import GatewaySmsQueue

    before = timezone.now()
    GatewaySmsQueue().enqueue_many(
        messages=[OutgoingSms(idempotency_key="s2-r2-200", recipient="+32470123456", body="Yo")]
    )
    row = SmsOutbox.objects.get()
    made = SmsOutbox(reference="x", to="+32470123456", body="Yo", next_attempt_at=before)
    assert (row.state, row.attempts, row.last_error, row.sent_at) == (
        made.state,
        made.attempts,
        made.last_error,
        made.sent_at,
    )
    assert (row.scheduler_id, row.registration_id) == (None, None)
    assert before <= row.next_attempt_at == row.created_at <= timezone.now()
