"""Two scheduler passes at once both do work and send every message exactly once (spec.md
§6.2, SKIP LOCKED).

Each pass's first batch waits at a rendezvous inside its claim transaction until the other
pass has a batch in hand too: so both passes hold a claim at the same moment (the second one
skipped the first one's locked scheduler instead of waiting for it), and the test does not
depend on the threads' timing to prove both did work.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from events import ports
from events.adapters import OutboxMailQueue
from events.models import Mail, MailOutbox
from events.services import scheduler
from tests.events import factories
from tests.events.config.test_ports import wire_ports

DAY = timedelta(days=1)


class RendezvousMailQueue(OutboxMailQueue):
    """The outbox adapter; each thread's first batch meets the other thread's first batch."""

    rendezvous: threading.Barrier | None = None
    _seen = threading.local()

    def enqueue_many(self, *, messages: Sequence[ports.OutgoingMail]) -> None:
        if self.rendezvous is not None and not getattr(self._seen, "met", False):
            self._seen.met = True
            self.rendezvous.wait(timeout=30)  # broken on timeout: the scheduler parks, test fails
        super().enqueue_many(messages=messages)


@pytest.fixture(autouse=True)
def wired(settings):
    wire_ports(settings, batch=7)
    settings.EVENT_MAIL_QUEUE = f"{__name__}.RendezvousMailQueue"
    RendezvousMailQueue.rendezvous = threading.Barrier(2)
    yield
    RendezvousMailQueue.rendezvous = None


def _run_in_threads(n: int, target) -> list:
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = target()
        except BaseException as exc:  # handed to the test thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_both_work_and_send_every_message_exactly_once(actor):
    factories.MessageTemplateFactory(ref="confirm", subject="Hi", body="<p>Hi</p>")
    begin = timezone.now() + 10 * DAY
    expected: set[tuple[int, int]] = set()
    for _ in range(3):
        event = factories.EventFactory(date_begin=begin, date_end=begin + timedelta(hours=8))
        regs = factories.RegistrationFactory.create_batch(40, event=event)
        for interval_type, nbr, unit, include in (
            ("before_event", 1, "days", False),
            ("after_sub", 0, "now", True),
        ):
            mail = scheduler.add_scheduler(
                event=event,
                interval_nbr=nbr,
                interval_unit=unit,
                interval_type=interval_type,
                template_ref="confirm",
                include_existing=include,
                actor=actor,
            )
            expected |= {(mail.pk, r.pk) for r in regs}
    at = begin - DAY

    reports = _run_in_threads(2, lambda: scheduler.run_pass(now=at))

    pairs = Counter(MailOutbox.objects.values_list("scheduler_id", "registration_id"))
    assert set(pairs) == expected
    assert set(pairs.values()) == {1}
    assert sum(r.messages_queued for r in reports) == len(expected) == 240
    # Both passes did work: each claimed at least one scheduler and queued from it (a
    # scheduler may be claimed by both, batch by batch; its messages still go out once).
    assert all(r.schedulers_processed >= 1 and r.messages_queued >= 1 for r in reports), reports
    assert sum(r.errors for r in reports) == 0
    assert not Mail.objects.exclude(error_message="").exists()
    assert set(
        Mail.objects.filter(interval_type="before_event").values_list("mail_done", flat=True)
    ) == {True}
