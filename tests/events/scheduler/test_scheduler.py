"""The communication scheduler pass (spec.md §6): after_sub, event-based, multi-slot, errors,
limits, template deletion, postponement. Time is passed to `run_pass(now=…)`.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from datetime import datetime, timedelta
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from events.db import locks
from events.models import (
    EventAuditLog,
    KanbanState,
    Mail,
    MailOutbox,
    MailRegistration,
    MailSlot,
    MessageTemplate,
    Registration,
    Slot,
    TypeMail,
)
from events.services import events as event_services
from events.services import nudge, scheduler, seats
from events.services import registrations as registration_services
from events.services import templates as template_services
from tests.events import factories
from tests.events.config.test_ports import FlakyMailQueue, Published, RecordingSmsQueue, wire_ports

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def wired(settings):
    wire_ports(settings)
    RecordingSmsQueue.sent.clear()
    FlakyMailQueue.fail_at_batch.clear()
    FlakyMailQueue.calls.clear()


def template(ref: str = "confirm", channel: str = "mail") -> MessageTemplate:
    return factories.MessageTemplateFactory(
        ref=ref,
        channel=channel,
        subject="{{ event.name }}: hello {{ registration.name }}",
        body=(
            "Dear {{ registration.name }}, see you at {{ event.name }}."
            if channel == "sms"
            else "<p>Dear {{ registration.name }}, see you at {{ event.name }}.</p>"
        ),
    )


def make_event(begin, **fields):
    return factories.EventFactory(date_begin=begin, date_end=begin + 8 * HOUR, **fields)


def add(event, actor, interval_type, nbr=1, unit="days", ref="confirm", **kw) -> Mail:
    return scheduler.add_scheduler(
        event=event,
        interval_nbr=nbr,
        interval_unit=unit,
        interval_type=interval_type,
        template_ref=ref,
        actor=actor,
        **kw,
    )


def attendee(name: str, email: str | None = None, phone: str = "") -> dict:
    return {
        "name": name,
        "email": f"{name.lower()}@example.org" if email is None else email,
        "phone": phone,
    }


def outbox_pairs() -> Counter:
    return Counter(MailOutbox.objects.values_list("scheduler_id", "registration_id"))


def recipients(mail: Mail) -> set[str]:
    return set(MailOutbox.objects.filter(scheduler=mail).values_list("recipient", flat=True))


def fresh(mail: Mail) -> Mail:
    return Mail.objects.select_related("event").get(pk=mail.pk)


def soon() -> datetime:
    return timezone.now() + timedelta(minutes=1)


# --- 1. after_sub ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_after_sub_mails_each_open_or_done_attendee_once_never_draft_or_cancelled(actor):
    template()
    event = make_event(timezone.now() + 10 * DAY)
    mail = add(event, actor, "after_sub", nbr=0, unit="now")
    ada, bob = registration_services.register(
        event=event, attendees=[attendee("Ada"), attendee("Bob")], actor=actor
    )
    (draft,) = registration_services.register(
        event=event, attendees=[attendee("Draft")], state="draft", actor=actor
    )
    (gone,) = registration_services.register(event=event, attendees=[attendee("Gone")], actor=actor)
    (came,) = registration_services.register(event=event, attendees=[attendee("Came")], actor=actor)
    registration_services.mark_attended(registration=came, actor=actor)
    assert MailRegistration.objects.filter(scheduler=mail, registration=gone).exists()
    registration_services.cancel(registration=gone, actor=actor)

    report = scheduler.run_pass(now=soon())

    assert (report.schedulers_processed, report.messages_queued, report.errors) == (1, 3, 0)
    assert recipients(mail) == {"ada@example.org", "bob@example.org", "came@example.org"}
    rows = MailRegistration.objects.filter(scheduler=mail)
    assert sorted(rows.values_list("registration_id", "mail_sent", "outcome")) == sorted(
        [(ada.pk, True, "sent"), (bob.pk, True, "sent"), (came.pk, True, "sent")]
    )
    assert not rows.filter(registration__in=[draft, gone]).exists()  # the row was deleted
    sent_audit = EventAuditLog.objects.get(verb="scheduler.sent", data__scheduler=mail.pk)
    assert sent_audit.data["rows_dropped"] == 1
    assert fresh(mail).mail_count_done == 3
    assert fresh(mail).mail_state == "running"

    again = scheduler.run_pass(now=soon())
    assert again.messages_queued == 0
    assert set(outbox_pairs().values()) == {1} and sum(outbox_pairs().values()) == 3


@pytest.mark.django_db
def test_after_sub_honours_its_interval_per_registration(actor):
    template()
    event = make_event(timezone.now() + 10 * DAY)
    mail = add(event, actor, "after_sub", nbr=2, unit="hours")
    (reg,) = registration_services.register(event=event, attendees=[attendee("Ada")], actor=actor)
    row = MailRegistration.objects.get(scheduler=mail)
    assert row.scheduled_date == reg.confirmed_at + 2 * HOUR

    assert (
        scheduler.run_pass(now=reg.confirmed_at + 2 * HOUR - timedelta(seconds=1)).messages_queued
        == 0
    )
    assert scheduler.run_pass(now=reg.confirmed_at + 2 * HOUR).messages_queued == 1


@pytest.mark.django_db
def test_new_after_sub_scheduler_mails_existing_attendees_only_with_include_existing(actor):
    template()
    event = make_event(timezone.now() + 10 * DAY)
    registration_services.register(
        event=event, attendees=[attendee("Ada"), attendee("Bob")], actor=actor
    )
    only_new = add(event, actor, "after_sub", nbr=0, unit="now")
    everyone = add(event, actor, "after_sub", nbr=0, unit="now", include_existing=True)

    report = scheduler.run_pass(now=soon())

    assert report.messages_queued == 2
    assert recipients(only_new) == set()
    assert recipients(everyone) == {"ada@example.org", "bob@example.org"}

    registration_services.register(event=event, attendees=[attendee("Cy")], actor=actor)
    assert scheduler.run_pass(now=soon()).messages_queued == 2
    assert recipients(only_new) == {"cy@example.org"}
    assert recipients(everyone) == {"ada@example.org", "bob@example.org", "cy@example.org"}


@pytest.mark.django_db
def test_after_sub_sweep_creates_missing_rows_in_one_insert(actor):
    """Registrations that got no row in their transaction are caught by the pass's sweep."""
    template()
    event = make_event(timezone.now() + 10 * DAY)
    mail = add(event, actor, "after_sub", nbr=0, unit="now", include_existing=True)
    regs = factories.RegistrationFactory.create_batch(3, event=event)
    factories.RegistrationFactory(event=event, state="draft")
    assert not MailRegistration.objects.filter(scheduler=mail).exists()

    with CaptureQueriesContext(connection) as queries:
        assert scheduler.run_pass(now=soon()).messages_queued == 3
    inserts = [
        q["sql"]
        for q in queries
        if re.match(r'\s*INSERT INTO "?events_mailregistration\b', q["sql"])
    ]
    assert len(inserts) == 1, inserts  # three rows, one set-based statement
    assert set(
        MailRegistration.objects.filter(scheduler=mail).values_list("registration_id", flat=True)
    ) == {r.pk for r in regs}
    assert fresh(mail).last_registration_id == Registration.objects.latest("pk").pk


@pytest.mark.django_db
def test_after_sub_stops_when_the_event_ended(actor):
    template()
    event = make_event(timezone.now() + 10 * DAY)
    add(event, actor, "after_sub", nbr=0, unit="now")
    registration_services.register(event=event, attendees=[attendee("Ada")], actor=actor)
    report = scheduler.run_pass(now=event.date_end)
    assert (report.schedulers_processed, report.messages_queued) == (0, 0)
    assert not MailOutbox.objects.exists()


@pytest.mark.django_db
def test_mail_without_email_is_skipped_counted_and_not_retried(actor):
    template()
    event = make_event(timezone.now() + 10 * DAY)
    mail = add(event, actor, "after_sub", nbr=0, unit="now")
    (ada, nobody) = registration_services.register(
        event=event, attendees=[attendee("Ada"), attendee("Nobody", email="")], actor=actor
    )
    report = scheduler.run_pass(now=soon())
    assert (report.messages_queued, report.skipped) == (1, 1)
    row = MailRegistration.objects.get(scheduler=mail, registration=nobody)
    assert (row.mail_sent, row.outcome) == (True, "skipped_no_email")
    assert recipients(mail) == {"ada@example.org"}
    again = scheduler.run_pass(now=soon())
    assert (again.messages_queued, again.skipped) == (0, 0)


# --- SMS ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sms_scheduler_uses_the_sms_port_and_skips_registrations_without_phone(actor):
    template("sms-reminder", channel="sms")
    event = make_event(timezone.now() + 10 * DAY, country="BE")
    mail = add(
        event, actor, "after_sub", nbr=0, unit="now", ref="sms-reminder", notification_type="sms"
    )
    ada, nophone = registration_services.register(
        event=event,
        attendees=[attendee("Ada", phone="0470 12 34 56"), attendee("Nophone")],
        actor=actor,
    )
    report = scheduler.run_pass(now=soon())
    assert (report.messages_queued, report.skipped, report.errors) == (1, 1, 0)
    (sms,) = RecordingSmsQueue.sent
    assert (sms.recipient, sms.registration_id, sms.scheduler_id) == (
        "+32470123456",
        ada.pk,
        mail.pk,
    )
    assert sms.body == "Dear Ada, see you at " + event.name + "."
    row = MailRegistration.objects.get(scheduler=mail, registration=nophone)
    assert (row.mail_sent, row.outcome) == (True, "skipped_no_phone")
    assert not MailOutbox.objects.exists()
    assert scheduler.run_pass(now=soon()).skipped == 0  # not retried


@pytest.mark.django_db
def test_sms_scheduler_with_the_refusing_sms_port_is_parked(actor, settings):
    settings.EVENT_SMS_QUEUE = "events.ports.RefusingSmsQueue"
    template("sms-reminder", channel="sms")
    event = make_event(timezone.now() + 10 * DAY, country="BE")
    mail = add(
        event, actor, "after_sub", nbr=0, unit="now", ref="sms-reminder", notification_type="sms"
    )
    registration_services.register(
        event=event, attendees=[attendee("Ada", phone="0470 12 34 56")], actor=actor
    )
    report = scheduler.run_pass(now=soon())
    assert (report.messages_queued, report.errors) == (0, 1)
    mail = fresh(mail)
    assert mail.mail_state == "error"
    assert mail.error_message.startswith("[port_not_wired] The EventSmsQueue port is not wired")
    assert not MailRegistration.objects.filter(scheduler=mail, mail_sent=True).exists()


@pytest.mark.django_db
def test_add_scheduler_refuses_a_template_of_the_other_channel_or_a_missing_one(actor):
    template("sms-reminder", channel="sms")
    event = make_event(timezone.now() + 10 * DAY)
    with pytest.raises(Exception) as wrong:
        add(event, actor, "before_event", ref="sms-reminder")
    assert wrong.value.code == "invalid_value"
    with pytest.raises(Exception) as missing:
        add(event, actor, "before_event", ref="nope")
    assert missing.value.code == "template_missing"
    assert not Mail.objects.exists()


# --- 2. event-based, single slot ------------------------------------------------------------------


@pytest.mark.django_db
def test_event_based_schedulers_fire_at_their_dates(actor, now):
    template()
    begin = now + 10 * DAY
    event = make_event(begin)
    end = event.date_end
    holders = [
        factories.RegistrationFactory(event=event),
        factories.RegistrationFactory(event=event),
        factories.RegistrationFactory(event=event, state="done"),
    ]
    factories.RegistrationFactory(event=event, state="draft")
    factories.RegistrationFactory(event=event, state="cancel")
    schedulers = {
        "before_event": add(event, actor, "before_event", 1, "days"),
        "after_event_start": add(event, actor, "after_event_start", 1, "hours"),
        "negative_before": add(event, actor, "before_event", -2, "hours"),
        "before_event_end": add(event, actor, "before_event_end", 1, "hours"),
        "after_event": add(event, actor, "after_event", 2, "hours"),
        "negative_after": add(event, actor, "after_event", -1, "days"),
    }
    expected = {
        "before_event": begin - DAY,
        "negative_after": end - DAY,
        "after_event_start": begin + HOUR,
        "negative_before": begin + 2 * HOUR,
        "before_event_end": end - HOUR,
        "after_event": end + 2 * HOUR,
    }
    assert {k: m.scheduled_date for k, m in schedulers.items()} == expected
    assert seats.event_summary(event=event).taken == 3

    holder_ids = {r.pk for r in holders}
    fired: list[str] = []
    for name, at in sorted(expected.items(), key=lambda kv: kv[1]):
        early = scheduler.run_pass(now=at - timedelta(seconds=1))
        assert early.messages_queued == 0, name
        report = scheduler.run_pass(now=at)
        assert (report.messages_queued, report.errors) == (3, 0), name
        fired.append(name)
        mail = fresh(schedulers[name])
        assert (mail.mail_done, mail.mail_count_done, mail.mail_state) == (True, 3, "sent")
        assert mail.last_registration_id == max(holder_ids)
        assert (
            set(MailOutbox.objects.filter(scheduler=mail).values_list("registration_id", flat=True))
            == holder_ids
        )
    assert len(fired) == 6
    assert sum(outbox_pairs().values()) == 18 and set(outbox_pairs().values()) == {1}


@pytest.mark.django_db
def test_cursor_advances_per_batch_and_done_only_when_count_reaches_taken(actor, now, settings):
    settings.EVENT_MAIL_BATCH = 2
    settings.EVENT_MAIL_CRON_LIMIT = 3
    template()
    event = make_event(now + 10 * DAY)
    regs = factories.RegistrationFactory.create_batch(5, event=event)
    mail = add(event, actor, "before_event", 1, "days")

    first = scheduler.run_pass(now=mail.scheduled_date)
    mail = fresh(mail)
    assert (first.messages_queued, first.work_remaining) == (3, True)
    assert (mail.mail_count_done, mail.last_registration_id, mail.mail_done) == (
        3,
        regs[2].pk,
        False,
    )
    assert mail.mail_state == "scheduled"

    second = scheduler.run_pass(now=mail.scheduled_date)
    mail = fresh(mail)
    assert (second.messages_queued, second.work_remaining) == (2, False)
    assert (mail.mail_count_done, mail.last_registration_id, mail.mail_done) == (
        5,
        regs[4].pk,
        True,
    )
    batches = [
        (e.data["queued"], e.data["done"])
        for e in EventAuditLog.objects.filter(verb="scheduler.sent").order_by("pk")
    ]
    assert batches == [(2, False), (1, False), (2, False), (0, True)]


# --- 3. multi-slot --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_multi_slot_reminders_are_gated_per_slot_and_done_when_every_slot_is(actor, now):
    template()
    begin = now + 10 * DAY
    event = factories.EventFactory(
        is_multi_slots=True, date_begin=begin, date_end=begin + DAY + 8 * HOUR
    )
    first = factories.SlotFactory(event=event, start_datetime=begin, end_datetime=begin + 3 * HOUR)
    second = factories.SlotFactory(
        event=event, start_datetime=begin + DAY, end_datetime=begin + DAY + 3 * HOUR
    )
    in_first = factories.RegistrationFactory.create_batch(2, event=event, slot=first)
    in_second = factories.RegistrationFactory.create_batch(3, event=event, slot=second)
    mail = add(event, actor, "before_event", 1, "hours")
    assert mail.scheduled_date == begin - HOUR

    report = scheduler.run_pass(now=begin - HOUR)
    assert report.messages_queued == 2
    rows = {row.slot_id: row for row in MailSlot.objects.filter(scheduler=mail)}
    assert set(rows) == {first.pk, second.pk}
    assert (rows[first.pk].mail_done, rows[first.pk].mail_count_done) == (True, 2)
    assert rows[first.pk].last_registration_id == in_first[-1].pk
    assert (rows[second.pk].mail_done, rows[second.pk].last_registration_id) == (False, 0)
    assert rows[second.pk].scheduled_date == begin + DAY - HOUR
    mail = fresh(mail)
    assert (mail.mail_done, mail.scheduled_date, mail.mail_state) == (
        False,
        begin + DAY - HOUR,
        "scheduled",
    )

    assert scheduler.run_pass(now=begin + DAY - HOUR - timedelta(seconds=1)).messages_queued == 0
    assert scheduler.run_pass(now=begin + DAY - HOUR).messages_queued == 3
    mail = fresh(mail)
    assert (mail.mail_done, mail.mail_count_done, mail.mail_state) == (True, 5, "sent")
    second_row = MailSlot.objects.get(scheduler=mail, slot=second)
    assert (second_row.mail_done, second_row.last_registration_id) == (True, in_second[-1].pk)
    assert set(MailOutbox.objects.values_list("registration_id", flat=True)) == {
        r.pk for r in in_first + in_second
    }


@pytest.mark.django_db
def test_multi_slot_after_event_uses_each_slot_end(actor, now):
    template()
    begin = now + 10 * DAY
    event = factories.EventFactory(is_multi_slots=True, date_begin=begin, date_end=begin + 2 * DAY)
    slot = factories.SlotFactory(event=event, start_datetime=begin, end_datetime=begin + 3 * HOUR)
    factories.RegistrationFactory(event=event, slot=slot)
    mail = add(event, actor, "after_event", 1, "hours")
    assert mail.scheduled_date == begin + 4 * HOUR  # the slot's end, not the event's
    assert scheduler.run_pass(now=begin + 4 * HOUR).messages_queued == 1
    assert fresh(mail).mail_done is True


# --- 4. postponement and stale reminders ----------------------------------------------------------


@pytest.mark.django_db
def test_postponing_an_event_rearms_a_sent_reminder(actor, now):
    template()
    begin = now + 10 * DAY
    event = make_event(begin)
    regs = factories.RegistrationFactory.create_batch(2, event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    welcome = add(event, actor, "after_sub", 0, "now", include_existing=True)
    assert scheduler.run_pass(now=begin - DAY).messages_queued == 4
    assert fresh(reminder).mail_state == "sent"

    event_services.update_event(
        event=event, date_begin=begin + 7 * DAY, date_end=begin + 7 * DAY + 8 * HOUR, actor=actor
    )

    reminder = fresh(reminder)
    assert (reminder.mail_done, reminder.mail_count_done, reminder.last_registration_id) == (
        False,
        0,
        0,
    )
    assert reminder.scheduled_date == begin + 6 * DAY
    assert reminder.mail_state == "scheduled"
    assert (
        EventAuditLog.objects.filter(verb="scheduler.rearmed", data__scheduler=reminder.pk).count()
        == 1
    )
    report = scheduler.run_pass(now=begin + 6 * DAY)
    assert report.messages_queued == 2  # the reminder again; the after_sub welcome not again
    per_reg = Counter(
        MailOutbox.objects.filter(scheduler=reminder).values_list("registration_id", flat=True)
    )
    assert per_reg == {regs[0].pk: 2, regs[1].pk: 2}
    assert MailOutbox.objects.filter(scheduler=welcome).count() == 2
    assert fresh(reminder).mail_state == "sent"


@pytest.mark.django_db
def test_postponing_a_partly_sent_reminder_reminds_every_attendee_for_the_new_date(
    actor, now, settings
):
    settings.EVENT_MAIL_BATCH = 2
    settings.EVENT_MAIL_CRON_LIMIT = 2
    template()
    begin = now + 10 * DAY
    event = make_event(begin)
    regs = factories.RegistrationFactory.create_batch(5, event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    assert scheduler.run_pass(now=begin - DAY).messages_queued == 2  # the cron limit stops it
    reminder = fresh(reminder)
    assert (reminder.mail_done, reminder.mail_count_done, reminder.last_registration_id) == (
        False,
        2,
        regs[1].pk,
    )

    event_services.update_event(
        event=event, date_begin=begin + 7 * DAY, date_end=begin + 7 * DAY + 8 * HOUR, actor=actor
    )

    reminder = fresh(reminder)
    assert (
        reminder.mail_done,
        reminder.mail_count_done,
        reminder.last_registration_id,
        reminder.scheduled_date,
    ) == (False, 0, 0, begin + 6 * DAY)
    assert (
        EventAuditLog.objects.filter(verb="scheduler.rearmed", data__scheduler=reminder.pk).count()
        == 1
    )
    settings.EVENT_MAIL_CRON_LIMIT = 5000
    assert scheduler.run_pass(now=begin + 6 * DAY).messages_queued == 5
    stamp = int((begin + 6 * DAY).timestamp())
    new_date = MailOutbox.objects.filter(
        scheduler=reminder, idempotency_key__endswith=f"-{stamp}"
    ).values_list("registration_id", flat=True)
    assert sorted(new_date) == [r.pk for r in regs]  # the two reminded early ones too
    assert fresh(reminder).mail_state == "sent"


@pytest.mark.django_db
def test_moving_a_partly_reminded_slot_rearms_that_slot(actor, now, settings):
    settings.EVENT_MAIL_BATCH = 2
    settings.EVENT_MAIL_CRON_LIMIT = 2
    template()
    begin = now + 10 * DAY
    event = factories.EventFactory(is_multi_slots=True, date_begin=begin, date_end=begin + 3 * DAY)
    slot = factories.SlotFactory(event=event, start_datetime=begin, end_datetime=begin + 3 * HOUR)
    regs = factories.RegistrationFactory.create_batch(3, event=event, slot=slot)
    mail = add(event, actor, "before_event", 1, "hours")
    assert scheduler.run_pass(now=begin - HOUR).messages_queued == 2
    row = MailSlot.objects.get(scheduler=mail)
    assert (row.mail_done, row.mail_count_done, row.last_registration_id) == (False, 2, regs[1].pk)

    moved = begin + DAY
    with transaction.atomic():
        locked = locks.lock_event(event.pk)
        Slot.objects.filter(pk=slot.pk).update(start_datetime=moved, end_datetime=moved + 3 * HOUR)
        assert scheduler.reschedule(event=locked) == 1

    row.refresh_from_db()
    assert (row.mail_done, row.mail_count_done, row.last_registration_id, row.scheduled_date) == (
        False,
        0,
        0,
        moved - HOUR,
    )
    mail = fresh(mail)
    assert (mail.mail_count_done, mail.scheduled_date) == (0, moved - HOUR)
    assert EventAuditLog.objects.filter(verb="scheduler.rearmed", data__scheduler=mail.pk).exists()
    settings.EVENT_MAIL_CRON_LIMIT = 5000
    assert scheduler.run_pass(now=moved - HOUR).messages_queued == 3
    mail = fresh(mail)
    assert (mail.mail_state, mail.mail_count_done) == ("sent", 3)


@pytest.mark.django_db
def test_an_event_moved_away_and_back_queues_each_date_once_and_completes(actor, now):
    """A → B → A: the date-A keys exist already; the outbox takes them as queued."""
    template()
    begin = now + 10 * DAY
    later = begin + 7 * DAY
    event = make_event(begin)
    regs = factories.RegistrationFactory.create_batch(2, event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    assert scheduler.run_pass(now=begin - DAY).messages_queued == 2  # sent for date A

    event_services.update_event(
        event=event, date_begin=later, date_end=later + 8 * HOUR, actor=actor
    )  # B: re-armed
    event_services.update_event(
        event=event, date_begin=begin, date_end=begin + 8 * HOUR, actor=actor
    )
    reminder = fresh(reminder)  # back to A before B fired
    assert (reminder.scheduled_date, reminder.mail_done) == (begin - DAY, False)

    report = scheduler.run_pass(now=begin - DAY + MINUTE)

    assert report.errors == 0
    reminder = fresh(reminder)
    assert (reminder.mail_state, reminder.error_message, reminder.mail_count_done) == (
        "sent",
        "",
        2,
    )
    assert not EventAuditLog.objects.filter(verb="scheduler.error").exists()

    event_services.update_event(
        event=event, date_begin=later, date_end=later + 8 * HOUR, actor=actor
    )
    assert scheduler.run_pass(now=later - DAY).errors == 0  # B fires this time

    stamps = (int((begin - DAY).timestamp()), int((later - DAY).timestamp()))
    keys = Counter(
        MailOutbox.objects.filter(scheduler=reminder).values_list("idempotency_key", flat=True)
    )
    assert keys == {f"s{reminder.pk}-r{r.pk}-{t}": 1 for r in regs for t in stamps}
    assert fresh(reminder).mail_state == "sent"


@pytest.mark.django_db
def test_start_relative_reminder_due_after_the_event_ended_is_skipped(actor, now):
    template()
    begin = now + 10 * DAY
    event = make_event(begin)
    factories.RegistrationFactory(event=event)
    late = add(event, actor, "after_event_start", 2, "days")
    assert late.scheduled_date > event.date_end

    report = scheduler.run_pass(now=late.scheduled_date)

    late = fresh(late)
    assert (report.messages_queued, report.schedulers_skipped) == (0, 1)
    assert late.mail_state == "skipped"
    assert "ended" in late.skipped_reason
    assert not MailOutbox.objects.exists()
    assert EventAuditLog.objects.filter(verb="scheduler.skipped", data__scheduler=late.pk).exists()
    # skipped is final: the next pass does not pick it up again
    assert scheduler.run_pass(now=late.scheduled_date + DAY).schedulers_processed == 0


@pytest.mark.django_db
def test_before_event_reminder_reached_only_after_the_event_is_skipped_not_sent(actor, now):
    template()
    event = make_event(now + 10 * DAY)
    factories.RegistrationFactory(event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    report = scheduler.run_pass(now=event.date_end + HOUR)  # the pass never ran in between
    assert (report.messages_queued, report.schedulers_skipped) == (0, 1)
    assert fresh(reminder).mail_state == "skipped"


# --- state, cancelled events ----------------------------------------------------------------------


@pytest.mark.django_db
def test_mail_state_priority(now):
    event = make_event(now + 10 * DAY)
    after_sub = factories.MailFactory.build(event=event, interval_type="after_sub")
    assert after_sub.mail_state == "running"
    reminder = factories.MailFactory.build(event=event)
    assert reminder.mail_state == "scheduled"
    reminder.mail_done = True
    assert reminder.mail_state == "sent"
    reminder.skipped_reason = "late"
    assert reminder.mail_state == "skipped"
    reminder.mail_done = False
    event.kanban_state = KanbanState.CANCEL
    assert reminder.mail_state == "cancelled"
    reminder.mail_done = True
    assert reminder.mail_state == "skipped"  # done: not cancelled
    reminder.error_datetime = now
    assert reminder.mail_state == "error"


@pytest.mark.django_db
def test_cancelled_or_archived_events_are_not_run(actor, now):
    template()
    cancelled = make_event(now + 10 * DAY)
    archived = make_event(now + 10 * DAY)
    for event in (cancelled, archived):
        factories.RegistrationFactory(event=event)
    c_mail = add(cancelled, actor, "before_event", 1, "days")
    add(archived, actor, "before_event", 1, "days")
    event_services.cancel_event(event=cancelled, actor=actor)
    event_services.update_event(event=archived, active=False, actor=actor)

    report = scheduler.run_pass(now=now + 9 * DAY)

    assert (report.schedulers_processed, report.messages_queued) == (0, 0)
    assert not MailOutbox.objects.exists()
    assert fresh(c_mail).mail_state == "cancelled"


# --- 6. a port failing halfway through a batch ----------------------------------------------------


@pytest.mark.django_db
def test_queue_failure_rolls_back_its_batch_parks_the_scheduler_and_the_pass_goes_on(
    actor, now, settings
):
    settings.EVENT_MAIL_QUEUE = "tests.events.config.test_ports.FlakyMailQueue"
    settings.EVENT_MAIL_BATCH = 4
    template()
    broken_event = make_event(now + 10 * DAY)
    fine_event = make_event(now + 10 * DAY)
    broken_regs = factories.RegistrationFactory.create_batch(10, event=broken_event)
    factories.RegistrationFactory.create_batch(3, event=fine_event)
    broken = add(broken_event, actor, "before_event", 1, "days")
    fine = add(fine_event, actor, "before_event", 1, "days")
    FlakyMailQueue.fail_at_batch[broken.pk] = 2  # its second batch breaks halfway

    report = scheduler.run_pass(now=now + 9 * DAY)

    assert (report.messages_queued, report.errors, report.schedulers_processed) == (7, 1, 2)
    broken = fresh(broken)
    assert broken.mail_state == "error"
    assert broken.error_message == "[ConnectionResetError] mail relay went away mid-batch"
    assert broken.error_datetime == now + 9 * DAY
    assert (broken.mail_count_done, broken.last_registration_id) == (4, broken_regs[3].pk)
    assert MailOutbox.objects.filter(scheduler=broken).count() == 4  # batch 2's half undone
    (error,) = EventAuditLog.objects.filter(verb="scheduler.error")
    assert error.data == {
        "scheduler": broken.pk,
        "code": "ConnectionResetError",
        "message": "mail relay went away mid-batch",
    }
    assert (fresh(fine).mail_done, MailOutbox.objects.filter(scheduler=fine).count()) == (True, 3)

    FlakyMailQueue.fail_at_batch.clear()  # the cause is fixed
    retry = scheduler.run_pass(now=now + 9 * DAY + timedelta(minutes=1))

    assert (retry.messages_queued, retry.errors) == (6, 0)
    broken = fresh(broken)
    assert (broken.mail_state, broken.error_message, broken.error_datetime) == ("sent", "", None)
    assert EventAuditLog.objects.filter(verb="scheduler.recovered").count() == 1
    pairs = outbox_pairs()
    assert set(pairs.values()) == {1} and sum(pairs.values()) == 13


# --- 7. unwired ports -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_unwired_port_parks_the_scheduler_and_marks_nothing_sent(actor, now, settings):
    template()
    event = make_event(now + 10 * DAY)
    regs = factories.RegistrationFactory.create_batch(2, event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    welcome = add(event, actor, "after_sub", 0, "now", include_existing=True)
    settings.EVENT_MAIL_QUEUE = "events.ports.RefusingMailQueue"

    report = scheduler.run_pass(now=now + 9 * DAY)

    assert (report.errors, report.messages_queued) == (2, 0)
    for mail in (fresh(reminder), fresh(welcome)):
        assert mail.mail_state == "error"
        assert mail.error_message.startswith("[port_not_wired] The EventMailQueue port")
        assert (mail.mail_count_done, mail.mail_done) == (0, False)
    assert fresh(reminder).last_registration_id == 0
    assert not MailOutbox.objects.exists()
    assert not MailRegistration.objects.filter(mail_sent=True).exists()
    codes = set(
        EventAuditLog.objects.filter(verb="scheduler.error").values_list("data__code", flat=True)
    )
    assert codes == {"port_not_wired"}

    settings.EVENT_MAIL_QUEUE = "events.adapters.OutboxMailQueue"
    assert scheduler.run_pass(now=now + 9 * DAY).messages_queued == 4
    assert {r.pk for r in regs} == set(
        MailOutbox.objects.filter(scheduler=reminder).values_list("registration_id", flat=True)
    )


@pytest.mark.django_db
def test_an_unimportable_port_path_parks_the_scheduler_naming_the_setting(actor, now, settings):
    template()
    event = make_event(now + 10 * DAY)
    factories.RegistrationFactory(event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    settings.EVENT_MAIL_QUEUE = "nowhere.Queue"
    assert scheduler.run_pass(now=now + 9 * DAY).errors == 1
    assert "EVENT_MAIL_QUEUE='nowhere.Queue' cannot be imported" in fresh(reminder).error_message


@pytest.mark.django_db
def test_a_scheduler_failing_pass_after_pass_is_audited_and_logged_once_per_error(
    actor, now, settings, caplog
):
    template()
    event = make_event(now + 10 * DAY)
    factories.RegistrationFactory.create_batch(2, event=event)
    reminder = add(event, actor, "before_event", 1, "days")
    at = reminder.scheduled_date
    errors = EventAuditLog.objects.filter(verb="scheduler.error").order_by("pk")
    settings.EVENT_MAIL_QUEUE = "events.ports.RefusingMailQueue"

    with caplog.at_level(logging.WARNING, logger="events.scheduler"):
        for minute in range(3):
            assert scheduler.run_pass(now=at + minute * MINUTE).errors == 1

    assert list(errors.values_list("data__code", flat=True)) == ["port_not_wired"]
    assert [r.levelname for r in caplog.records if r.name == "events.scheduler"] == [
        "ERROR",
        "WARNING",
        "WARNING",
    ]
    reminder = fresh(reminder)
    assert (reminder.mail_state, reminder.error_datetime) == ("error", at + 2 * MINUTE)

    MessageTemplate.objects.filter(ref="confirm").delete()  # the error changes
    for minute in (3, 4):
        assert scheduler.run_pass(now=at + minute * MINUTE).errors == 1
    assert list(errors.values_list("data__code", flat=True)) == [
        "port_not_wired",
        "template_missing",
    ]

    template()
    settings.EVENT_MAIL_QUEUE = "events.adapters.OutboxMailQueue"
    report = scheduler.run_pass(now=at + 5 * MINUTE)

    assert (report.errors, report.messages_queued) == (0, 2)
    (recovered,) = EventAuditLog.objects.filter(verb="scheduler.recovered")
    assert recovered.data["error"] == "[template_missing] Template 'confirm' does not exist."
    reminder = fresh(reminder)
    assert (reminder.mail_state, reminder.error_datetime, reminder.error_message) == (
        "sent",
        None,
        "",
    )
    assert errors.count() == 2


# --- 8. template deletion -------------------------------------------------------------------------


@pytest.mark.django_db
def test_deleting_a_template_through_the_store_removes_its_schedulers_audited(actor, now):
    template("reminder")
    template("other")
    first = make_event(now + 10 * DAY)
    second = make_event(now + 10 * DAY)
    a = add(first, actor, "before_event", 1, "days", ref="reminder")
    b = add(second, actor, "after_sub", 0, "now", ref="reminder")
    kept = add(first, actor, "before_event", 1, "days", ref="other")
    factories.MailRegistrationFactory(scheduler=b)
    line = factories.TypeMailFactory(template_ref="reminder")
    other_line = factories.TypeMailFactory(template_ref="other")

    count = template_services.delete_template(template_ref="reminder", actor=actor)

    assert count == 3
    assert list(Mail.objects.values_list("pk", flat=True)) == [kept.pk]
    assert list(TypeMail.objects.values_list("pk", flat=True)) == [other_line.pk]
    assert not MailRegistration.objects.exists()
    assert not MessageTemplate.objects.filter(ref="reminder").exists()
    deleted = EventAuditLog.objects.filter(verb="scheduler.deleted")
    assert sorted(deleted.values_list("data__scheduler", flat=True)) == sorted([a.pk, b.pk])
    assert set(deleted.values_list("event_id", flat=True)) == {first.pk, second.pk}
    (type_row,) = EventAuditLog.objects.filter(verb="type_mail.deleted")
    assert type_row.data["type_mail"] == line.pk
    (tpl_row,) = EventAuditLog.objects.filter(verb="template.deleted")
    assert tpl_row.data["schedulers_deleted"] == 3


@pytest.mark.django_db
def test_on_template_deleted_returns_the_count_and_a_vanished_template_parks_the_scheduler(
    actor, now
):
    template("reminder")
    event = make_event(now + 10 * DAY)
    factories.RegistrationFactory(event=event)
    mail = add(event, actor, "before_event", 1, "days", ref="reminder")
    assert scheduler.on_template_deleted(template_ref="unused") == 0

    MessageTemplate.objects.filter(ref="reminder").delete()  # vanished some other way
    report = scheduler.run_pass(now=now + 9 * DAY)

    assert report.errors == 1
    mail = fresh(mail)
    assert mail.mail_state == "error"
    assert mail.error_message == "[template_missing] Template 'reminder' does not exist."


# --- 9. batch size, cron limit and the successor nudge --------------------------------------------


@pytest.mark.django_db
def test_batch_and_cron_limit_are_honoured_and_the_successor_is_nudged_after_commit(
    actor, now, settings, django_capture_on_commit_callbacks
):
    settings.EVENT_MAIL_BATCH = 3
    settings.EVENT_MAIL_CRON_LIMIT = 7
    template()
    event = make_event(now + 10 * DAY)
    factories.RegistrationFactory.create_batch(10, event=event)
    mail = add(event, actor, "before_event", 1, "days")
    cache.delete(nudge.PASS_KEY)
    cache.delete(nudge.DELIVERY_KEY)

    with (
        mock.patch.object(nudge, "publish") as publish,
        django_capture_on_commit_callbacks(execute=True) as callbacks,
    ):
        pass_task = Published(publish, nudge.PASS_TASK)
        delivery_task = Published(publish, nudge.DELIVERY_TASK)
        report = scheduler.run_pass(now=now + 9 * DAY)
        assert pass_task.call_count == 0  # never inside the open transaction

    assert (report.messages_queued, report.work_remaining) == (7, True)
    assert pass_task.call_count == 1
    assert delivery_task.call_count == 1  # the outbox nudges delivery, de-duplicated
    assert len(callbacks) >= 2
    batches = [
        e.data["queued"] for e in EventAuditLog.objects.filter(verb="scheduler.sent").order_by("pk")
    ]
    assert batches == [3, 3, 1]
    assert fresh(mail).mail_count_done == 7

    cache.delete(nudge.PASS_KEY)
    with (
        mock.patch.object(nudge, "publish") as publish,
        django_capture_on_commit_callbacks(execute=True),
    ):
        pass_task = Published(publish, nudge.PASS_TASK)
        rest = scheduler.run_pass(now=now + 9 * DAY)
    assert (rest.messages_queued, rest.work_remaining) == (3, False)
    assert pass_task.call_count == 0
    assert fresh(mail).mail_done is True


@pytest.mark.django_db
def test_cron_limit_spans_schedulers(actor, now, settings):
    settings.EVENT_MAIL_CRON_LIMIT = 4
    template()
    events = [make_event(now + 10 * DAY) for _ in range(3)]
    for event in events:
        factories.RegistrationFactory.create_batch(2, event=event)
        add(event, actor, "before_event", 1, "days")
    first = scheduler.run_pass(now=now + 9 * DAY)
    assert (first.messages_queued, first.schedulers_processed, first.work_remaining) == (4, 2, True)
    second = scheduler.run_pass(now=now + 9 * DAY)
    assert (second.messages_queued, second.work_remaining) == (2, False)


# --- 12. queries per batch are constant -----------------------------------------------------------


def _queries_of_one_pass(actor, now, size: int, interval_type: str) -> int:
    event = make_event(now + 10 * DAY)
    factories.RegistrationFactory.create_batch(size, event=event)
    add(
        event,
        actor,
        interval_type,
        1 if interval_type != "after_sub" else 0,
        "days" if interval_type != "after_sub" else "now",
        include_existing=interval_type == "after_sub",
    )
    with CaptureQueriesContext(connection) as ctx:
        report = scheduler.run_pass(now=max(now + 9 * DAY, timezone.now() + timedelta(minutes=1)))
    assert report.messages_queued == size
    Mail.objects.all().delete()
    return len(ctx.captured_queries)


@pytest.mark.django_db
@pytest.mark.parametrize("interval_type", ["before_event", "after_sub"])
def test_queries_per_batch_do_not_grow_with_the_number_of_messages(actor, now, interval_type):
    template()
    small = _queries_of_one_pass(actor, now, 10, interval_type)
    large = _queries_of_one_pass(actor, now, 100, interval_type)
    assert small == large
    assert small <= 16


@pytest.mark.django_db
def test_multi_slot_dates_follow_slots_added_later(actor, now):
    """Without slots the scheduler waits at a lower bound of any slot's date; `add_slot`
    (through `reschedule`, run when dates or slots change) moves it to the slots' dates and
    re-arms a done scheduler for a slot that has no row yet."""
    template()
    begin = now + 10 * DAY
    event = factories.EventFactory(
        is_multi_slots=True, date_begin=begin, date_end=begin + 2 * DAY, date_tz="UTC"
    )
    mail = add(event, actor, "after_event", 1, "hours")
    assert mail.scheduled_date == begin + HOUR  # lower bound: no slot can end before begin

    first = event_services.add_slot(
        event=event, date=begin.date(), start_hour=10, end_hour=12, actor=actor
    )
    assert fresh(mail).scheduled_date == first.end_datetime + HOUR  # add_slot rescheduled
    factories.RegistrationFactory(event=event, slot=first)
    assert scheduler.run_pass(now=first.end_datetime + HOUR).messages_queued == 1
    assert fresh(mail).mail_done is True

    second = event_services.add_slot(
        event=event, date=(begin + DAY).date(), start_hour=10, end_hour=12, actor=actor
    )
    factories.RegistrationFactory(event=event, slot=second)
    mail = fresh(mail)  # add_slot re-armed the done scheduler for the new slot
    assert (mail.mail_done, mail.mail_count_done, mail.scheduled_date) == (
        False,
        1,
        second.end_datetime + HOUR,
    )
    assert scheduler.run_pass(now=second.end_datetime + HOUR).messages_queued == 1
    mail = fresh(mail)
    assert (mail.mail_done, mail.mail_count_done) == (True, 2)
    assert set(outbox_pairs().values()) == {1}
