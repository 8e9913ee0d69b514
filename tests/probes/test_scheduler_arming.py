"""Probe: scheduler arming and re-open (spec.md §6.4, §13).

Nudges go out after commit, never inside the transaction, and bursts collapse through the Redis
`SET NX EX 5` guard; a registration that re-opens is mailed once, never twice.
"""

from __future__ import annotations

import ast
import logging
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.core.cache import cache
from django.db.models import Count
from django.utils import timezone
from kombu.exceptions import OperationalError

from events.models import MailOutbox, MailRegistration
from events.services import events as event_services
from events.services import nudge, scheduler
from events.services import registrations as registration_services
from tests.events import factories
from tests.events.config.test_ports import Published, wire_ports

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def wired(settings):
    wire_ports(settings)
    cache.delete_many([nudge.PASS_KEY, nudge.DELIVERY_KEY])
    yield
    cache.delete_many([nudge.PASS_KEY, nudge.DELIVERY_KEY])


@contextmanager
def pass_task():
    with mock.patch.object(nudge, "publish") as publish:
        yield Published(publish, nudge.PASS_TASK)


def _event(**fields):
    begin = timezone.now() + 10 * DAY
    return factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8), **fields)


def _after_sub(event, actor, **kw):
    return scheduler.add_scheduler(
        event=event,
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        template_ref="confirm",
        actor=actor,
        **kw,
    )


@pytest.fixture
def confirm_template():
    return factories.MessageTemplateFactory(ref="confirm")


@pytest.mark.django_db
def test_registration_entering_open_nudges_after_commit_only(
    actor, confirm_template, django_capture_on_commit_callbacks
):
    event = _event()
    _after_sub(event, actor)
    cache.delete(nudge.PASS_KEY)
    with pass_task() as published, django_capture_on_commit_callbacks(execute=True):
        registration_services.register(event=event, attendees=[{"name": "Ada"}], actor=actor)
        assert published.call_count == 0  # not inside the transaction
    assert published.call_count == 1


@pytest.mark.django_db
def test_no_nudge_without_after_sub_scheduler_or_for_a_draft(
    actor, confirm_template, django_capture_on_commit_callbacks
):
    plain = _event()
    with_scheduler = _event()
    _after_sub(with_scheduler, actor)
    cache.delete(nudge.PASS_KEY)
    with pass_task() as published, django_capture_on_commit_callbacks(execute=True):
        registration_services.register(event=plain, attendees=[{"name": "Ada"}], actor=actor)
        (draft,) = registration_services.register(
            event=with_scheduler, attendees=[{"name": "Bo"}], state="draft", actor=actor
        )
    assert published.call_count == 0
    with pass_task() as published, django_capture_on_commit_callbacks(execute=True):
        registration_services.confirm(registration=draft, actor=actor)
    assert published.call_count == 1


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_registrations_collapses_to_a_handful_of_passes(actor, confirm_template):
    event = _event()
    with pass_task():
        _after_sub(event, actor)
    cache.delete(nudge.PASS_KEY)
    with pass_task() as published:
        for i in range(40):  # 40 committed transactions, each nudging after commit
            registration_services.register(
                event=event, attendees=[{"name": f"Guest {i}"}], actor=actor
            )
    assert 1 <= published.call_count <= 3
    assert MailRegistration.objects.count() == 40


@pytest.mark.django_db(transaction=True)
def test_a_started_pass_lets_the_next_nudge_through(actor, confirm_template):
    event = _event()
    with pass_task():
        _after_sub(event, actor)
    cache.delete(nudge.PASS_KEY)
    with pass_task() as published:
        registration_services.register(event=event, attendees=[{"name": "A"}], actor=actor)
        registration_services.register(event=event, attendees=[{"name": "B"}], actor=actor)
        assert published.call_count == 1
        nudge.started(key=nudge.PASS_KEY)  # what the task does first
        registration_services.register(event=event, attendees=[{"name": "C"}], actor=actor)
        assert published.call_count == 2


@pytest.mark.django_db
def test_add_scheduler_arms_the_pass_only_for_a_date_within_the_next_minute(
    actor, confirm_template, django_capture_on_commit_callbacks
):
    event = _event()
    with pass_task() as published, django_capture_on_commit_callbacks(execute=True):
        scheduler.add_scheduler(
            event=event,
            interval_nbr=1,
            interval_unit="days",
            interval_type="before_event",
            template_ref="confirm",
            actor=actor,
        )
    assert published.call_count == 0
    with pass_task() as published, django_capture_on_commit_callbacks(execute=True):
        _after_sub(event, actor, include_existing=True)
    assert published.call_count == 1


@pytest.mark.django_db
def test_moving_an_event_so_a_reminder_is_due_now_arms_the_pass(
    actor, confirm_template, django_capture_on_commit_callbacks
):
    event = _event()
    reminder = scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="hours",
        interval_type="before_event",
        template_ref="confirm",
        actor=actor,
    )
    new_begin = timezone.now() + timedelta(minutes=30)
    with pass_task() as published, django_capture_on_commit_callbacks(execute=True):
        event_services.update_event(
            event=event, date_begin=new_begin, date_end=new_begin + timedelta(hours=2), actor=actor
        )
    assert published.call_count == 1
    reminder.refresh_from_db()
    assert reminder.scheduled_date == new_begin - timedelta(hours=1)


@pytest.mark.django_db
def test_a_lost_nudge_is_logged_and_never_breaks_the_commit(
    actor, confirm_template, django_capture_on_commit_callbacks, caplog
):
    event = _event()
    _after_sub(event, actor)
    cache.delete(nudge.PASS_KEY)
    with (
        mock.patch.object(nudge, "publish", side_effect=OperationalError("broker down")),
        caplog.at_level(logging.WARNING, logger="events.nudge"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        (reg,) = registration_services.register(
            event=event, attendees=[{"name": "Ada"}], actor=actor
        )
    assert reg.pk is not None
    assert "nudge events.run_pass not sent (beat will run it): broker down" in caplog.text


@pytest.mark.django_db
def test_reopened_registration_is_mailed_once(actor, confirm_template):
    event = _event()
    mail = _after_sub(event, actor)
    (early, mailed) = registration_services.register(
        event=event,
        attendees=[
            {"name": "Early", "email": "early@example.org"},
            {"name": "Mailed", "email": "mailed@example.org"},
        ],
        actor=actor,
    )
    registration_services.cancel(registration=early, actor=actor)
    assert scheduler.run_pass(now=timezone.now() + timedelta(minutes=1)).messages_queued == 1
    assert not MailRegistration.objects.filter(registration=early).exists()  # dropped

    for reg in (early, mailed):
        if reg is mailed:
            registration_services.cancel(registration=reg, actor=actor)
        registration_services.reset_to_draft(registration=reg, actor=actor)
        registration_services.confirm(registration=reg, actor=actor)
    assert scheduler.run_pass(now=timezone.now() + timedelta(minutes=1)).messages_queued == 1

    per_recipient = dict(
        MailOutbox.objects.filter(scheduler=mail).values_list("recipient").annotate(n=Count("id"))
    )
    assert per_recipient == {"early@example.org": 1, "mailed@example.org": 1}


@pytest.mark.django_db
def test_an_unforeseen_publisher_failure_is_logged_and_never_breaks_the_commit(
    actor, confirm_template, django_capture_on_commit_callbacks, caplog
):
    event = _event()
    _after_sub(event, actor)
    cache.delete(nudge.PASS_KEY)
    with (
        mock.patch.object(nudge, "publish", side_effect=RuntimeError("Acquire on closed pool")),
        caplog.at_level(logging.WARNING, logger="events.nudge"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        (reg,) = registration_services.register(
            event=event, attendees=[{"name": "Ada"}], actor=actor
        )
    assert MailRegistration.objects.filter(registration=reg).exists()  # the write stands
    # The scheduler's nudge (an overlay's own nudge, sent or de-duplicated by its key's state
    # in Redis, may log beside it).
    (record,) = [
        r for r in caplog.records if r.name == "events.nudge" and nudge.PASS_TASK in r.getMessage()
    ]
    assert (record.levelname, record.getMessage()) == (
        "ERROR",
        "nudge events.run_pass not sent (beat will run it)",
    )
    assert record.exc_info is not None


def test_nudges_publish_by_registered_name_and_services_never_import_tasks():
    from config.celery import app
    from events import tasks  # noqa: F401 — registers the tasks with the app

    assert {nudge.PASS_TASK, nudge.DELIVERY_TASK} <= set(app.tasks)
    with mock.patch.object(nudge, "current_app") as current_app:
        nudge.publish(nudge.PASS_TASK)
    current_app.send_task.assert_called_once_with("events.run_pass")

    services = Path(__file__).resolve().parents[2] / "events" / "services"
    importers = []
    for path in sorted(services.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                node.module == "events.tasks"
                or (node.module == "events" and any(a.name == "tasks" for a in node.names))
            ):
                importers.append(path.name)
            elif isinstance(node, ast.Import) and any(a.name == "events.tasks" for a in node.names):
                importers.append(path.name)
    assert importers == []
