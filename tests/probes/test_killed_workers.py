"""Probe: a Celery worker SIGKILLed in the middle of its work, then a new
worker; every message is queued once and delivered, every (rule, registration) has one lead.

Real processes: Celery workers (solo pool) on the test database and a Redis of the test's own
(broker and cache), a local SMTP server (aiosmtpd) and the project's local SMS gateway
(`sms_gateway_sink`'s handler) on free ports. Small batch knobs in the worker's environment make
the work long enough to be cut: the test polls the database (or the receiving server) and kills
the worker when part of the work is committed and part is not, waits until PostgreSQL has ended
the dead worker's sessions, then starts a new worker and triggers the tasks by name the way
beat's safety net does (every few seconds here instead of every minute).

- a scheduler pass (mail and sms schedulers, event-based and after_sub) killed between its
  batches: the new worker queues the rest, nothing twice, and delivers each message once;
- a lead pass killed between its batches: the dead walker's lease keeps a new worker off the
  event until it expires (the test moves it past its 300 s), then the new holder finishes the
  walk: one provenance row per (rule, registration), one local lead per attendee or order, no
  orphan lead, each order lead lists its participants once;
- an outbox delivery (mail, sms) killed inside a batch, after the receiver took some of its
  messages and before the batch's commit: nothing is lost; the messages of that open batch are
  handed over again with the same Message-ID / reference (the far side de-duplicates by it,
  as the local gateway does); every other message is received exactly once.
"""

from __future__ import annotations

import ast
import asyncio
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from config.celery import app as celery_app
from events.models import Mail, MailOutbox, MailRegistration, OutboxState
from events.services import scheduler
from leads import services as lead_services
from leads.models import Lead, LeadProvenance, LeadProvenanceRegistration, LeadRequest
from sms.models import SmsOutbox, SmsState
from tests.events import factories
from tests.events.mail.test_delivery import Inbox, SmtpServer
from tests.events.redis_server import own_redis  # noqa: F401 — a fixture: the test's own Redis
from tests.helpers import kill_worker, start_celery_worker
from tests.sms.gateway import TOKEN
from tests.stack import RecordingGateway

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("own_redis"),
]

DAY = timedelta(days=1)
DEADLINE = 40.0  # seconds for any one wait: a stuck worker fails the test, never hangs it
BEAT = 3.0  # seconds between the test's beat ticks (beat itself: 60 s)
LIMIT = "10000"  # EVENT_*_CRON_LIMIT: one pass does all the work, no self-nudge in between

PASS_TASKS = ("events.run_pass", "events.deliver_outbox", "sms.deliver_outbox")
DELIVERY_TASKS = ("events.deliver_outbox", "sms.deliver_outbox")
LEAD_TASKS = ("leads.run_pass",)


# --- receivers ---------------------------------------------------------------------------------


class SlowInbox(Inbox):
    """Keeps every message, then holds its 250 reply `delay` seconds: a message the worker was
    killed waiting for was handed over and is in the inbox."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 — aiosmtpd hook name
        answer = await super().handle_DATA(server, session, envelope)
        await asyncio.sleep(self.delay)
        return answer


@pytest.fixture
def smtp(free_port):
    server = SmtpServer(free_port)
    yield server
    server.stop()


@pytest.fixture
def gateway():
    server = RecordingGateway(TOKEN)
    yield server
    server.stop()


# --- workers -----------------------------------------------------------------------------------


class Workers:
    """Starts workers with the test's knobs, logs each to a file, stops what is left."""

    def __init__(self, tmp_path: Path, redis_url: str) -> None:
        self.tmp_path = tmp_path
        self.redis_url = redis_url
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(
        self, *, smtp: SmtpServer, gateway: RecordingGateway, **knobs: int
    ) -> subprocess.Popen:
        log_path = self.tmp_path / f"worker-{len(self.procs)}.log"
        env = {
            "CACHE_URL": self.redis_url.replace("redis://", "rediscache://") + "/1",
            "EMAIL_URL": f"smtp://127.0.0.1:{smtp.port}",
            "DEFAULT_FROM_EMAIL": "events@example.org",
            "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
            "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
            "EVENT_SMS_QUEUE": "sms.adapters.GatewaySmsQueue",
            "EVENT_SMS_GATEWAY_URL": gateway.url,
            "EVENT_SMS_GATEWAY_TOKEN": TOKEN,
            "EVENT_LEAD_SINK": "leads.adapters.LocalLeadSink",
            "EVENT_PUBLIC_URL": "http://127.0.0.1:8000",
            "EVENT_MAIL_CRON_LIMIT": LIMIT,
            "EVENT_LEAD_CRON_LIMIT": LIMIT,
            **{name: str(value) for name, value in knobs.items()},
        }
        with log_path.open("wb") as log:
            proc = start_celery_worker(log, name=f"killed-{len(self.procs)}", env=env)
        self.procs.append((proc, log_path))
        return proc

    def log(self, proc: subprocess.Popen | None = None) -> str:
        path = next(p for w, p in reversed(self.procs) if proc is None or w is proc)
        return path.read_text(errors="replace")

    def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


@pytest.fixture
def workers(tmp_path, own_redis):  # noqa: F811 — the imported fixture, requested by name
    celery_app.control.purge()  # nudges published by the test's own setup
    pool = Workers(tmp_path, own_redis.url)
    yield pool
    pool.stop_all()


def tick(tasks: Iterable[str]) -> None:
    """What beat does every minute: publish each task by its name."""
    for task in tasks:
        celery_app.send_task(task)


def kill_in_the_middle(
    worker: subprocess.Popen, workers: Workers, progress: Callable[[], int], *, at: int, total: int
) -> int:
    """Poll `progress` and SIGKILL the worker once it reached `at` of `total`; returns the
    progress committed when the worker's sessions are gone (what it left behind)."""
    deadline = time.monotonic() + DEADLINE
    while (done := progress()) < at:
        assert worker.poll() is None, f"the worker died by itself:\n{workers.log(worker)}"
        assert time.monotonic() < deadline, (
            f"progress {done}/{total} after {DEADLINE}s; worker log:\n{workers.log(worker)}"
        )
        time.sleep(0.005)  # polling another process's progress, with a deadline
    kill_worker(worker)
    left = progress()
    assert left < total, f"the work was finished ({left}/{total}) before the kill: make it longer"
    return left


def wait_until(
    done: Callable[[], bool], workers: Workers, what: str, *, tasks: Iterable[str] = ()
) -> float:
    """Wait for `done`, publishing `tasks` every BEAT seconds (beat's stand-in); returns the
    seconds it took."""
    start = time.monotonic()
    next_tick = start
    while not done():
        now = time.monotonic()
        assert now - start < DEADLINE, f"{what}: not within {DEADLINE}s; log:\n{workers.log()}"
        if tasks and now >= next_tick:
            tick(tasks)
            next_tick = now + BEAT
        time.sleep(0.05)  # polling another process, with a deadline
    return time.monotonic() - start


# --- data --------------------------------------------------------------------------------------


def _templates() -> None:
    factories.MessageTemplateFactory(
        ref="reminder-mail",
        subject="Soon: {{ event.name }}",
        body="<p>Hi {{ registration.name }}</p>",
    )
    factories.MessageTemplateFactory(
        ref="reminder-sms", channel="sms", subject="", body="{{ registration.name }}: soon."
    )


def _event_with_attendees(n: int, **fields):
    begin = timezone.now() + 10 * DAY
    event = factories.EventFactory(
        name="Kill Summit",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        date_tz="UTC",
        country="BE",
    )
    regs = [
        factories.RegistrationFactory(
            event=event,
            name=f"Guest {i}",
            email=f"guest{i}@example.org",
            phone=f"0470 {i:06d}",
            **{k: v(i) for k, v in fields.items()},
        )
        for i in range(n)
    ]
    return event, regs


def _add(event, actor, interval_type: str, channel: str, **kw) -> Mail:
    return scheduler.add_scheduler(
        event=event,
        interval_type=interval_type,
        template_ref=f"reminder-{channel}",
        notification_type=channel,
        actor=actor,
        **kw,
    )


def _outbox() -> int:
    return MailOutbox.objects.count() + SmsOutbox.objects.count()


# --- (a) a scheduler pass ----------------------------------------------------------------------


def test_a_scheduler_pass_killed_between_batches_queues_and_delivers_each_message_once(
    workers, smtp, gateway, actor
):
    n = 120
    _templates()
    event, regs = _event_with_attendees(n)
    schedulers = [
        _add(event, actor, "before_event", channel, interval_nbr=30, interval_unit="days")
        for channel in ("mail", "sms")
    ] + [
        _add(
            event,
            actor,
            "after_sub",
            channel,
            interval_nbr=0,
            interval_unit="now",
            include_existing=True,
        )
        for channel in ("mail", "sms")
    ]
    total = 4 * n
    celery_app.control.purge()  # add_scheduler's nudges: the test publishes the pass itself
    smtp.start()

    first = workers.start(smtp=smtp, gateway=gateway, EVENT_MAIL_BATCH=4)
    tick(["events.run_pass"])
    left = kill_in_the_middle(first, workers, _outbox, at=total // 3, total=total)
    assert not smtp.inbox.messages and not gateway.received()  # killed in the pass
    assert not Mail.objects.exclude(error_message="").exists()

    workers.start(smtp=smtp, gateway=gateway, EVENT_MAIL_BATCH=4)

    def delivered() -> bool:
        return (
            MailOutbox.objects.filter(state=OutboxState.SENT).count()
            + SmsOutbox.objects.filter(state=SmsState.SENT).count()
            == total
        )

    took = wait_until(delivered, workers, "every message sent", tasks=PASS_TASKS)
    print(f"killed with {left}/{total} queued; the new worker finished in {took:.1f} s")

    mails, texts = schedulers[0::2], schedulers[1::2]
    expected_mail = Counter((s.pk, r.pk) for s in mails for r in regs)
    expected_sms = Counter((s.pk, r.pk) for s in texts for r in regs)
    assert Counter(MailOutbox.objects.values_list("scheduler_id", "registration_id")) == (
        expected_mail
    )
    assert Counter(SmsOutbox.objects.values_list("scheduler_id", "registration_id")) == (
        expected_sms
    )
    # Delivered exactly once: nothing was in flight when the worker died.
    assert Counter(smtp.inbox.message_ids()) == Counter(
        MailOutbox.objects.values_list("message_id", flat=True)
    )
    assert gateway.received() == Counter(SmsOutbox.objects.values_list("reference", flat=True))
    # The schedulers' own bookkeeping is whole: cursors walked to the end, rows marked sent.
    for mail in Mail.objects.filter(interval_type="before_event"):
        assert (mail.mail_done, mail.mail_count_done, mail.error_message) == (True, n, "")
    assert MailRegistration.objects.filter(mail_sent=True).count() == 2 * n
    assert not MailRegistration.objects.filter(mail_sent=False).exists()


# --- (b) a lead pass ---------------------------------------------------------------------------


def test_a_lead_pass_killed_between_batches_makes_one_lead_per_rule_and_registration(
    workers, smtp, gateway, actor
):
    n = 150
    event, regs = _event_with_attendees(n, sale_order_ref=lambda i: f"SO-{i // 3}")
    rules = [
        lead_services.create_rule(
            name=f"{basis} {trigger}",
            lead_creation_basis=basis,
            lead_creation_trigger=trigger,
            lead_type="lead",
            event=event,
            actor=actor,
        )
        for basis, trigger in (("attendee", "create"), ("attendee", "confirm"), ("order", "create"))
    ]
    lead_services.generate_leads(event=event, actor=actor)
    celery_app.control.purge()
    total = len(rules) * n
    orders = n // 3

    first = workers.start(smtp=smtp, gateway=gateway, EVENT_LEAD_BATCH=4)
    tick(LEAD_TASKS)
    left = kill_in_the_middle(
        first, workers, LeadProvenanceRegistration.objects.count, at=total // 3, total=total
    )
    request = LeadRequest.objects.get()
    assert request.lease_holder and request.lease_until > timezone.now()  # the dead walker's

    second = workers.start(smtp=smtp, gateway=gateway, EVENT_LEAD_BATCH=4)
    tick(LEAD_TASKS)
    wait_until(lambda: "succeeded" in workers.log(second), workers, "the new worker's lead pass")
    reports = re.findall(
        r"leads\.run_pass\[[^\]]+\] succeeded in [^:]+: (\{.*\})", workers.log(second)
    )
    assert reports and all(ast.literal_eval(r)["requests_claimed"] == 0 for r in reports)
    assert LeadProvenanceRegistration.objects.count() == left  # the lease kept it off the event

    # The 300 s lease runs out (database clock moved past it for the test).
    LeadRequest.objects.filter(pk=request.pk).update(lease_until=Now() - timedelta(seconds=1))
    took = wait_until(
        lambda: not LeadRequest.objects.exists(), workers, "the walk finished", tasks=LEAD_TASKS
    )
    print(f"killed with {left}/{total} (rule, registration) pairs; finished in {took:.1f} s")

    pairs = Counter(LeadProvenanceRegistration.objects.values_list("rule_id", "registration_id"))
    assert pairs == Counter((rule.pk, reg.pk) for rule in rules for reg in regs)
    # One local lead per attendee (two attendee rules) and per order, none left by the dead
    # worker's rolled-back batch, each named by exactly one provenance record.
    assert Lead.objects.count() == 2 * n + orders
    refs = Counter(LeadProvenance.objects.values_list("lead_ref", flat=True))
    assert refs == Counter(f"local:{pk}" for pk in Lead.objects.values_list("pk", flat=True))
    order_rule = rules[2]
    for provenance in LeadProvenance.objects.filter(rule=order_rule):
        assert provenance.registration_rows.count() == 3, provenance.group_key
        lead = Lead.objects.get(pk=int(provenance.lead_ref.removeprefix("local:")))
        numbered = [line for line in lead.description.splitlines() if line[:1].isdigit()]
        assert [line.split(". ", 1)[0] for line in numbered] == ["1", "2", "3"], lead.description


# --- (c) an outbox delivery --------------------------------------------------------------------


def _queue_reminders(actor, n: int, channel: str, settings, gateway: RecordingGateway) -> list:
    """The pass in this process queues one reminder per attendee in the outbox of `channel`."""
    settings.EVENT_SMS_QUEUE = "sms.adapters.GatewaySmsQueue"
    settings.EVENT_SMS_GATEWAY_URL = gateway.url
    settings.EVENT_SMS_GATEWAY_TOKEN = TOKEN
    _templates()
    event, regs = _event_with_attendees(n)
    _add(event, actor, "before_event", channel, interval_nbr=30, interval_unit="days")
    assert scheduler.run_pass().messages_queued == n
    celery_app.control.purge()  # the pass's delivery nudge: the test publishes delivery itself
    return regs


@pytest.mark.parametrize("channel", ["mail", "sms"])
def test_an_outbox_delivery_killed_inside_a_batch_loses_nothing_and_resends_only_that_batch(
    workers, smtp, actor, settings, channel
):
    n, batch, delay = 60, 7, 0.03
    smtp.inbox = SlowInbox(delay)
    gateway_ = RecordingGateway(TOKEN, delay=delay)
    try:
        _queue_reminders(actor, n, channel, settings, gateway_)
        smtp.start()
        if channel == "mail":
            outbox, sent_state, key = MailOutbox.objects, OutboxState.SENT, "message_id"

            def received() -> Counter[str]:
                return Counter(smtp.inbox.message_ids())
        else:
            outbox, sent_state, key = SmsOutbox.objects, SmsState.SENT, "reference"
            received = gateway_.received

        first = workers.start(smtp=smtp, gateway=gateway_, EVENT_MAIL_BATCH=batch)
        tick(DELIVERY_TASKS)
        # Two batches committed and the third one half handed over.
        at = 2 * batch + batch // 2
        kill_in_the_middle(first, workers, lambda: sum(received().values()), at=at, total=n)
        before = received()
        committed = set(outbox.filter(state=sent_state).values_list(key, flat=True))
        open_batch = set(before) - committed  # handed over, their rows still queued
        assert 0 < len(committed) < n
        assert set(before) >= committed
        assert len(open_batch) < batch

        workers.start(smtp=smtp, gateway=gateway_, EVENT_MAIL_BATCH=batch)
        took = wait_until(
            lambda: outbox.filter(state=sent_state).count() == n,
            workers,
            f"every {channel} sent",
            tasks=DELIVERY_TASKS,
        )
        print(
            f"{channel}: killed with {len(committed)} sent and {len(open_batch)} handed over "
            f"in the open batch; the new worker finished in {took:.1f} s"
        )
        after = received()
        keys = set(outbox.values_list(key, flat=True))
        print(f"{channel}: received twice: {sum(c > 1 for c in after.values())}")
        assert set(after) == keys  # nothing lost
        twice = {k for k, count in after.items() if count > 1}
        assert twice <= open_batch, twice - open_batch  # only the killed batch, once more
        assert max(after.values()) <= 2
        assert Counter({k: 1 for k in keys}) + Counter({k: 1 for k in twice}) == after
        assert not outbox.exclude(state=sent_state).exists()
    finally:
        gateway_.stop()
