"""Probe: SMS go out exactly once under concurrency.

- Two scheduler passes at once hand every (scheduler, registration) SMS to the queue port once:
  counted at the port (before the outbox's ON CONFLICT could hide a duplicate).
- Two deliverers at once POST every outbox reference to the gateway once (SKIP LOCKED claims):
  counted at a real local HTTP gateway.

In each, the first batch of each thread waits at a rendezvous inside its claim transaction
until the other thread holds a claim too, so the test proves both worked at the same moment
instead of depending on thread timing.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

import pytest
from django.utils import timezone
from werkzeug import Request, Response

from events import ports
from events.services import scheduler
from sms.adapters import GatewaySmsQueue
from sms.models import SmsOutbox
from sms.services import delivery
from tests.events import factories
from tests.helpers import run_concurrently
from tests.sms.factories import SmsOutboxFactory
from tests.sms.gateway import TOKEN, wire

DAY = timedelta(days=1)


@pytest.fixture
def gateway(settings, httpserver):
    return wire(settings, httpserver)


class RendezvousSmsQueue(GatewaySmsQueue):
    """The gateway outbox; counts what each pass hands over; first batches meet."""

    rendezvous: threading.Barrier | None = None
    handed: list[str] = []
    _lock = threading.Lock()
    _seen = threading.local()

    def enqueue_many(self, *, messages: Sequence[ports.OutgoingSms]) -> None:
        if self.rendezvous is not None and not getattr(self._seen, "met", False):
            self._seen.met = True
            self.rendezvous.wait(timeout=30)  # broken on timeout: the scheduler parks, test fails
        with self._lock:
            self.handed.extend(m.idempotency_key for m in messages)
        super().enqueue_many(messages=messages)


@pytest.fixture
def rendezvous_queue(gateway, settings):
    settings.EVENT_SMS_QUEUE = f"{__name__}.RendezvousSmsQueue"
    settings.EVENT_MAIL_BATCH = 7
    RendezvousSmsQueue.rendezvous = threading.Barrier(2)
    RendezvousSmsQueue.handed = []
    yield
    RendezvousSmsQueue.rendezvous = None


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_queue_every_sms_exactly_once(rendezvous_queue, actor):
    factories.MessageTemplateFactory(
        ref="sms-reminder", channel="sms", subject="", body="{{ event.name }} tomorrow"
    )
    begin = timezone.now() + 10 * DAY
    expected: set[tuple[int, int]] = set()
    for _ in range(3):
        event = factories.EventFactory(
            date_begin=begin, date_end=begin + timedelta(hours=8), country="BE"
        )
        regs = [
            factories.RegistrationFactory(event=event, phone=f"0470 12 {i:02d} 00")
            for i in range(20)
        ]
        for interval_type, nbr, unit, include in (
            ("before_event", 1, "days", False),
            ("after_sub", 0, "now", True),
        ):
            mail = scheduler.add_scheduler(
                event=event,
                interval_nbr=nbr,
                interval_unit=unit,
                interval_type=interval_type,
                template_ref="sms-reminder",
                notification_type="sms",
                include_existing=include,
                actor=actor,
            )
            expected |= {(mail.pk, r.pk) for r in regs}

    reports = run_concurrently([lambda: scheduler.run_pass(now=begin - DAY)] * 2)

    assert len(RendezvousSmsQueue.handed) == len(set(RendezvousSmsQueue.handed)) == 120
    pairs = Counter(SmsOutbox.objects.values_list("scheduler_id", "registration_id"))
    assert set(pairs) == expected and set(pairs.values()) == {1}
    assert sum(r.messages_queued for r in reports) == 120
    assert all(r.messages_queued >= 1 for r in reports), reports  # both passes worked
    assert sum(r.errors for r in reports) == 0


@pytest.mark.django_db(transaction=True)
def test_two_deliverers_at_once_post_every_reference_exactly_once(gateway, settings, monkeypatch):
    settings.EVENT_MAIL_BATCH = 5
    rows = [SmsOutboxFactory() for _ in range(30)]
    posted: list[str] = []
    lock = threading.Lock()

    def record(request: Request) -> Response:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        with lock:
            posted.append(request.get_json()["reference"])
        return Response("{}", status=200, content_type="application/json")

    gateway.expect_request("/sms", method="POST").respond_with_handler(record)
    meet = threading.Barrier(2)
    first = threading.local()
    real_post_batch = delivery._post_batch

    def post_batch(*args, **kwargs):
        if not getattr(first, "done", False):
            first.done = True
            meet.wait(timeout=30)  # both deliverers hold a claim on disjoint rows here
        return real_post_batch(*args, **kwargs)

    monkeypatch.setattr(delivery, "_post_batch", post_batch)

    reports = run_concurrently([delivery.deliver_outbox] * 2)

    assert Counter(posted) == {row.reference: 1 for row in rows}
    assert sorted(r.sent for r in reports) != [0, 30]  # both delivered some
    assert sum(r.sent for r in reports) == 30
    assert set(SmsOutbox.objects.values_list("state", "attempts")) == {("sent", 1)}
