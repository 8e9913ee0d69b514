"""Staff surface of the schedulers: run pass now, the inline, adding through add_scheduler,
template preview and deletion through the store's verb."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from events.models import EventAuditLog, Mail, MailOutbox, MessageTemplate
from events.services import scheduler
from tests.events import factories
from tests.events.config.test_ports import wire_ports


@pytest.fixture(autouse=True)
def wired(settings):
    wire_ports(settings)


def _event_with_welcome(actor):
    factories.MessageTemplateFactory(ref="confirm", subject="Hi {{ registration.name }}")
    begin = timezone.now() + timedelta(days=10)
    event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8))
    factories.RegistrationFactory.create_batch(2, event=event)
    mail = scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="confirm",
        include_existing=True,
        actor=actor,
    )
    return event, mail


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.mark.django_db
def test_run_pass_now_action_reports_the_pass(admin_client, actor):
    _, mail = _event_with_welcome(actor)
    response = admin_client.post(
        reverse("admin:events_mail_changelist"),
        {"action": "run_pass_now", "_selected_action": [mail.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert _messages(response) == [
        "Scheduler pass: schedulers processed: 1, messages queued: 2, skipped: 0, errors: 0, "
        "schedulers skipped: 0, work remaining: no."
    ]
    assert MailOutbox.objects.count() == 2


@pytest.mark.django_db
def test_event_page_inline_shows_state_counts_and_last_error(admin_client, actor, settings):
    event, mail = _event_with_welcome(actor)
    settings.EVENT_MAIL_QUEUE = "events.ports.RefusingMailQueue"
    response = admin_client.post(
        reverse("admin:events_event_changelist"),
        {"action": "run_pass_now", "_selected_action": [event.pk]},
        follow=True,
    )
    assert "errors: 1" in _messages(response)[0]
    page = admin_client.get(reverse("admin:events_event_change", args=[event.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert "[port_not_wired] The EventMailQueue port is not wired" in body
    assert ">error<" in body


@pytest.mark.django_db
def test_adding_a_scheduler_in_the_admin_goes_through_add_scheduler(admin_client):
    factories.MessageTemplateFactory(ref="reminder")
    begin = timezone.now() + timedelta(days=10)
    event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8))
    response = admin_client.post(
        reverse("admin:events_mail_add"),
        {
            "event": event.pk,
            "sequence": 10,
            "template_ref": "reminder",
            "notification_type": "mail",
            "interval_nbr": 2,
            "interval_unit": "days",
            "interval_type": "before_event",
        },
        follow=True,
    )
    assert response.status_code == 200
    mail = Mail.objects.get()
    assert mail.scheduled_date == begin - timedelta(days=2)
    assert EventAuditLog.objects.filter(verb="scheduler.created", data__scheduler=mail.pk).exists()


@pytest.mark.django_db
def test_adding_a_scheduler_with_a_missing_template_is_a_message_not_a_500(admin_client):
    event = factories.EventFactory()
    response = admin_client.post(
        reverse("admin:events_mail_add"),
        {
            "event": event.pk,
            "sequence": 10,
            "template_ref": "nope",
            "notification_type": "mail",
            "interval_nbr": 1,
            "interval_unit": "days",
            "interval_type": "before_event",
        },
        follow=True,
    )
    assert response.status_code == 200
    assert any("template_missing" in m for m in _messages(response))
    assert not Mail.objects.exists()


@pytest.mark.django_db
def test_template_preview_and_deletion_through_the_store(admin_client, actor):
    _, mail = _event_with_welcome(actor)
    template = MessageTemplate.objects.get(ref="confirm")
    page = admin_client.get(reverse("admin:events_messagetemplate_change", args=[template.pk]))
    assert page.status_code == 200
    assert "srcdoc=" in page.content.decode()

    response = admin_client.post(
        reverse("admin:events_messagetemplate_delete", args=[template.pk]),
        {"post": "yes"},
        follow=True,
    )
    assert response.status_code == 200
    assert not MessageTemplate.objects.exists()
    assert not Mail.objects.filter(pk=mail.pk).exists()
    (row,) = EventAuditLog.objects.filter(verb="template.deleted")
    assert row.actor_type == "user"
    assert row.data["schedulers_deleted"] == 1
    assert EventAuditLog.objects.filter(verb="scheduler.deleted", data__scheduler=mail.pk).exists()


@pytest.mark.django_db
def test_scheduler_pass_command_prints_the_report(actor, capsys):
    from django.core.management import call_command

    _event_with_welcome(actor)
    call_command("scheduler_pass")
    assert capsys.readouterr().out.strip() == (
        "schedulers processed: 1, messages queued: 2, skipped: 0, errors: 0, "
        "schedulers skipped: 0, work remaining: no"
    )


@pytest.mark.django_db
def test_the_pass_task_frees_the_nudge_guard_and_runs_the_pass(actor):
    from django.core.cache import cache

    from events import tasks
    from events.services import nudge

    _event_with_welcome(actor)
    cache.set(nudge.PASS_KEY, "1", timeout=5)
    result = tasks.run_pass_task()
    assert result["messages_queued"] == 2
    assert cache.get(nudge.PASS_KEY) is None


def test_beat_runs_the_pass_and_the_delivery_every_minute():
    from config.celery import app

    schedule = {e["task"]: e["schedule"] for e in app.conf.beat_schedule.values()}
    assert schedule["events.run_pass"] == 60.0
    assert schedule["events.deliver_outbox"] == 60.0
