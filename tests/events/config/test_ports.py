"""The four host ports (spec.md §11): refusing defaults, resolution, ports_check, the built-in
template store. Also home of the port test doubles other scheduler tests wire by dotted path.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test import override_settings

from events import ports
from events.adapters import DatabaseTemplateRenderer, OutboxMailQueue, html_to_text
from events.errors import PortNotWired, TemplateMissing
from events.models import MailOutbox, Registration
from tests.events import factories

ROOT = Path(__file__).resolve().parents[3]

# --- test doubles (wired by dotted path with override_settings) ---------------------------------


class RecordingSmsQueue(ports.EventSmsQueue):
    """Records every SMS handed over (class-level, cleared by the tests that use it)."""

    sent: list[ports.OutgoingSms] = []

    def enqueue(self, *, message: ports.OutgoingSms) -> None:
        type(self).sent.append(message)


class RecordingLeadSink(ports.EventLeadSink):
    def upsert_lead(self, *, lead_ref: str | None, values: Mapping[str, Any]) -> str:
        return lead_ref or "LEAD-1"


class FlakyMailQueue(OutboxMailQueue):
    """The outbox adapter, breaking halfway through the n-th batch of chosen schedulers.

    `fail_at_batch = {scheduler_id: n}`. The first half of the failing batch is written to the
    outbox before the failure, so a test can see that the rollback removed it.
    """

    fail_at_batch: dict[int, int] = {}
    calls: Counter = Counter()

    def enqueue_many(self, *, messages: Sequence[ports.OutgoingMail]) -> None:
        scheduler_id = messages[0].scheduler_id if messages else None
        type(self).calls[scheduler_id] += 1
        if self.fail_at_batch.get(scheduler_id) == self.calls[scheduler_id]:
            super().enqueue_many(messages=messages[: len(messages) // 2])
            raise ConnectionResetError("mail relay went away mid-batch")
        super().enqueue_many(messages=messages)


class Published:
    """Counts the publishes of one task name at the nudge's publish point (`nudge.publish`
    patched with a mock)."""

    def __init__(self, publish: Any, task: str) -> None:
        self.publish, self.task = publish, task

    @property
    def call_count(self) -> int:
        return sum(1 for call in self.publish.call_args_list if call.args == (self.task,))


BUILT_IN = {
    "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
    "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
}
ALL_WIRED = {
    **BUILT_IN,
    "EVENT_SMS_QUEUE": "tests.events.config.test_ports.RecordingSmsQueue",
    "EVENT_LEAD_SINK": "tests.events.config.test_ports.RecordingLeadSink",
}


def wire_ports(settings, *, batch: int = 500, cron_limit: int = 5000) -> None:
    """Wire every port to a working adapter (built-in or test double) and set the limits."""
    for name, path in ALL_WIRED.items():
        setattr(settings, name, path)
    settings.EVENT_MAIL_BATCH = batch
    settings.EVENT_MAIL_CRON_LIMIT = cron_limit


REFUSING = {
    "EVENT_TEMPLATE_RENDERER": "events.ports.RefusingTemplateRenderer",
    "EVENT_MAIL_QUEUE": "events.ports.RefusingMailQueue",
    "EVENT_SMS_QUEUE": "events.ports.RefusingSmsQueue",
    "EVENT_LEAD_SINK": "events.ports.RefusingLeadSink",
}


# --- refusing defaults and resolution ---------------------------------------------------------


@override_settings(**REFUSING)
def test_each_refusing_default_raises_port_not_wired_naming_its_port():
    registration = Registration(name="Ada")
    calls = [
        ("EventTemplateRenderer", lambda: ports.template_renderer().exists(template_ref="x")),
        ("EventTemplateRenderer", lambda: ports.template_renderer().channel(template_ref="x")),
        (
            "EventTemplateRenderer",
            lambda: ports.template_renderer().render(template_ref="x", registration=registration),
        ),
        ("EventMailQueue", lambda: ports.mail_queue().enqueue_many(messages=[])),
        ("EventSmsQueue", lambda: ports.sms_queue().enqueue_many(messages=[])),
        ("EventLeadSink", lambda: ports.lead_sink().upsert_lead(lead_ref=None, values={})),
    ]
    for port, call in calls:
        with pytest.raises(PortNotWired) as caught:
            call()
        assert caught.value.code == "port_not_wired"
        assert caught.value.details["port"] == port
        assert port in caught.value.message


@override_settings(EVENT_SMS_QUEUE="sms.adapters.NoSuchQueue")
def test_an_unimportable_dotted_path_is_a_clear_error_naming_the_setting():
    with pytest.raises(ImproperlyConfigured) as caught:
        ports.sms_queue()
    assert "EVENT_SMS_QUEUE='sms.adapters.NoSuchQueue' cannot be imported" in str(caught.value)


@override_settings(EVENT_MAIL_QUEUE="events.adapters.DatabaseTemplateRenderer")
def test_a_path_to_the_wrong_kind_of_adapter_is_refused():
    with pytest.raises(ImproperlyConfigured) as caught:
        ports.mail_queue()
    assert "is not an implementation of EventMailQueue" in str(caught.value)


@override_settings(**ALL_WIRED)
def test_ports_resolve_to_the_configured_adapters():
    assert type(ports.template_renderer()) is DatabaseTemplateRenderer
    assert type(ports.mail_queue()) is OutboxMailQueue
    assert type(ports.sms_queue()) is RecordingSmsQueue
    assert ports.lead_sink().upsert_lead(lead_ref=None, values={"name": "x"}) == "LEAD-1"


# --- ports_check --------------------------------------------------------------------------------


@override_settings(**{**ALL_WIRED, "EVENT_LEAD_SINK": "events.ports.RefusingLeadSink"})
def test_ports_check_exits_1_when_a_refusing_default_is_active(capsys):
    with pytest.raises(CommandError) as caught:
        call_command("ports_check")
    assert caught.value.returncode == 1
    assert "EVENT_LEAD_SINK" in str(caught.value)
    out = capsys.readouterr().out
    assert "EventLeadSink" in out and "refusing" in out
    assert out.count(" wired ") == 3


@override_settings(**{**ALL_WIRED, "EVENT_SMS_QUEUE": "sms.adapters.NoSuchQueue"})
def test_ports_check_exits_1_on_a_broken_path(capsys):
    with pytest.raises(CommandError) as caught:
        call_command("ports_check")
    assert caught.value.returncode == 1
    assert "broken" in capsys.readouterr().out


@override_settings(**ALL_WIRED)
def test_ports_check_passes_when_all_four_are_wired(capsys):
    call_command("ports_check")
    out = capsys.readouterr().out
    assert out.count(" wired ") == 4
    assert "all four ports are wired" in out


def _ports_check_process(env_ports: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_ports}
    return subprocess.run(
        [sys.executable, "manage.py", "ports_check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ports_check_process_exit_codes():
    """The real command line: exit 1 with the .env.example wiring of sms/leads, 0 when wired."""
    refusing = _ports_check_process(
        {
            **BUILT_IN,
            "EVENT_SMS_QUEUE": "events.ports.RefusingSmsQueue",
            "EVENT_LEAD_SINK": "events.ports.RefusingLeadSink",
        }
    )
    assert refusing.returncode == 1, refusing.stdout + refusing.stderr
    assert "EVENT_SMS_QUEUE" in refusing.stderr and "EVENT_LEAD_SINK" in refusing.stderr
    wired = _ports_check_process(ALL_WIRED)
    assert wired.returncode == 0, wired.stdout + wired.stderr


def test_env_example_wires_every_port_to_a_built_in_adapter():
    """`make run` works alone: .env.example wires all four ports; the code's own defaults stay
    the refusing ones (PORTS)."""
    lines = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert lines["EVENT_TEMPLATE_RENDERER"] == "events.adapters.DatabaseTemplateRenderer"
    assert lines["EVENT_MAIL_QUEUE"] == "events.adapters.OutboxMailQueue"
    assert lines["EVENT_SMS_QUEUE"] == "sms.adapters.GatewaySmsQueue"
    assert lines["EVENT_LEAD_SINK"] == "leads.adapters.LocalLeadSink"
    assert {name: default.__name__ for name, (_, default) in ports.PORTS.items()} == {
        "EVENT_TEMPLATE_RENDERER": "RefusingTemplateRenderer",
        "EVENT_MAIL_QUEUE": "RefusingMailQueue",
        "EVENT_SMS_QUEUE": "RefusingSmsQueue",
        "EVENT_LEAD_SINK": "RefusingLeadSink",
    }


# --- the built-in template store ----------------------------------------------------------------


@pytest.mark.django_db
def test_database_renderer_renders_mail_autoescaped_with_the_context(settings):
    settings.EVENT_PUBLIC_URL = "https://events.example.org"
    event = factories.EventFactory(
        name="Tom & Jerry's <Summit>",
        date_begin=datetime(2027, 3, 11, 9, 0, tzinfo=UTC),
        date_end=datetime(2027, 3, 11, 17, 0, tzinfo=UTC),
        date_tz="Europe/Brussels",
    )
    ticket = factories.TicketFactory(event=event, name="VIP")
    registration = factories.RegistrationFactory(event=event, ticket=ticket, name="<b>Ada</b>")
    factories.MessageTemplateFactory(
        ref="confirm",
        channel="mail",
        subject="Welcome to {{ event.name }}",
        body=(
            "<p>Hi {{ registration.name }}, {{ ticket.name }} for {{ event.name }}</p>"
            "<p>Starts {{ event_begin }}</p>"
            '<p><a href="{{ tickets_url }}">tickets</a> {{ ics_url }}</p>'
        ),
    )
    renderer = DatabaseTemplateRenderer()
    assert renderer.exists(template_ref="confirm") is True
    assert renderer.channel(template_ref="confirm") == "mail"
    rendered = renderer.render(template_ref="confirm", registration=registration)
    assert rendered.channel == "mail"
    assert rendered.subject == "Welcome to Tom & Jerry's <Summit>"
    assert "Hi &lt;b&gt;Ada&lt;/b&gt;, VIP for Tom &amp; Jerry&#x27;s &lt;Summit&gt;" in (
        rendered.body_html
    )
    assert "Starts Thursday 11 March 2027, 10:00 (Europe/Brussels)" in rendered.body_html
    assert 'href="https://events.example.org/my-tickets/' in rendered.body_html
    assert "https://events.example.org/ics/" in rendered.body_html
    assert rendered.body_text.startswith("Hi <b>Ada</b>, VIP for Tom & Jerry's <Summit>\n")
    assert "tickets (https://events.example.org/my-tickets/" in rendered.body_text


@pytest.mark.django_db
def test_database_renderer_sms_is_plain_text_and_slot_times_win():
    event = factories.EventFactory(
        name="A & B",
        is_multi_slots=True,
        date_begin=datetime(2027, 3, 11, 8, 0, tzinfo=UTC),
        date_end=datetime(2027, 3, 12, 17, 0, tzinfo=UTC),
        date_tz="Europe/Brussels",
    )
    slot = factories.SlotFactory(
        event=event,
        start_datetime=datetime(2027, 3, 12, 13, 0, tzinfo=UTC),
        end_datetime=datetime(2027, 3, 12, 15, 0, tzinfo=UTC),
    )
    registration = factories.RegistrationFactory(event=event, slot=slot)
    factories.MessageTemplateFactory(
        ref="sms", channel="sms", subject="", body="{{ event.name }} at {{ event_begin }}"
    )
    rendered = DatabaseTemplateRenderer().render(template_ref="sms", registration=registration)
    assert rendered.channel == "sms"
    assert rendered.body_text == "A & B at Friday 12 March 2027, 14:00 (Europe/Brussels)"
    assert rendered.body_html == ""


@pytest.mark.django_db
def test_database_renderer_missing_template_is_typed():
    renderer = DatabaseTemplateRenderer()
    assert renderer.exists(template_ref="gone") is False
    with pytest.raises(TemplateMissing) as caught:
        renderer.channel(template_ref="gone")
    assert caught.value.code == "template_missing"


@pytest.mark.django_db
def test_seed_demo_templates_render_with_the_context():
    from events.management.commands.seed_demo import TEMPLATES

    for spec in TEMPLATES:
        factories.MessageTemplateFactory(**spec)
    registration = factories.RegistrationFactory(name="Ada", event=factories.EventFactory())
    renderer = DatabaseTemplateRenderer()
    for ref in ("registration-confirmation", "event-reminder", "event-reminder-sms"):
        rendered = renderer.render(template_ref=ref, registration=registration)
        assert registration.event.name in rendered.subject + rendered.body_text
        assert "/my-tickets/" in rendered.body_text
        assert "{{" not in rendered.body_text


def test_both_queue_ports_take_the_same_argument_shape():
    """The sms overlay implements EventSmsQueue exactly as the outbox implements the mail one."""
    for method in ("enqueue", "enqueue_many"):
        shapes = [
            [(p.name, p.kind) for p in inspect.signature(getattr(port, method)).parameters.values()]
            for port in (ports.EventMailQueue, ports.EventSmsQueue)
        ]
        assert shapes[0] == shapes[1], method
        assert shapes[0][1:] == [
            ("message" if method == "enqueue" else "messages", inspect.Parameter.KEYWORD_ONLY)
        ]
    texts = [
        ports.OutgoingSms(idempotency_key=f"k{i}", recipient="+32470000000", body="Hi")
        for i in range(2)
    ]
    RecordingSmsQueue.sent.clear()
    RecordingSmsQueue().enqueue_many(messages=texts)  # the port's default walks `enqueue`
    assert RecordingSmsQueue.sent == texts
    RecordingSmsQueue.sent.clear()


@pytest.mark.django_db
def test_outbox_queue_writes_rows_with_a_stable_message_id(settings):
    settings.EVENT_PUBLIC_URL = "https://events.example.org"
    OutboxMailQueue().enqueue_many(
        messages=[
            ports.OutgoingMail(
                idempotency_key="s1-r2",
                recipient="ada@example.org",
                subject="Hello",
                body_text="Hi",
                body_html="<p>Hi</p>",
            )
        ]
    )
    row = MailOutbox.objects.get()
    assert (row.state, row.attempts, row.recipient) == ("queued", 0, "ada@example.org")
    assert row.message_id == "<s1-r2@events.example.org>"


def test_html_to_text_keeps_paragraphs_and_links():
    text = html_to_text('<p>Hello &amp; welcome</p><p>See <a href="https://x.test/a">here</a></p>')
    assert text == "Hello & welcome\nSee here (https://x.test/a)"
