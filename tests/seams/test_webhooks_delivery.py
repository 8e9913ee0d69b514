"""Outbound webhooks, the delivery half: signed so that the reference `standardwebhooks`
verifier accepts them, retried with backoff, stopped by a refusal, in version order per subject
after a receiver was down, at least once when the deliverer is killed, and an endpoint that
keeps failing is disabled."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from events.models import EventAuditLog
from events.services import registrations
from seams.models import DeliveryState, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from seams.services import webhooks
from tests.events import factories
from tests.helpers import database_url
from tests.seams.receiver import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


def endpoint(url: str, **fields) -> WebhookEndpoint:
    return webhooks.create_endpoint(name="Host", url=url, actor="system", **fields)


def book(event, n: int = 1):
    return registrations.register(
        event=event, attendees=[{"name": f"Guest {i}"} for i in range(n)], actor="system"
    )


def states() -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for state in WebhookDelivery.objects.values_list("state", flat=True):
        counts[state] += 1
    return dict(counts)


def test_a_delivery_is_signed_so_that_the_reference_verifier_accepts_it(receiver):
    hook = endpoint(receiver.url)
    (reg,) = book(factories.EventFactory())

    report = webhooks.deliver_due()

    assert report.delivered == 1
    (got,) = receiver.received
    payload = Webhook(hook.secret).verify(got.body, got.headers)  # raises when it does not
    assert payload["type"] == "registration.created"
    assert payload["data"]["registration"]["id"] == reg.pk
    assert got.headers["content-type"] == "application/json"
    delivery = WebhookDelivery.objects.get()
    assert got.headers["webhook-id"] == delivery.message.msg_id
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 1, 200)
    assert WebhookAttempt.objects.get().status == 200
    # another secret's verifier refuses it
    with pytest.raises(Exception, match="(?i)signature"):
        Webhook(webhooks.new_secret()).verify(got.body, got.headers)
    # delivered once: a second run sends nothing
    assert webhooks.deliver_due().delivered == 0
    assert len(receiver.received) == 1


def test_after_a_rotation_both_secrets_sign_until_the_overlap_ends(receiver, settings):
    settings.EVENT_WEBHOOK_ROTATION_HOURS = 2
    hook = endpoint(receiver.url)
    old = hook.secret
    hook = webhooks.rotate_secret(endpoint=hook, actor="system")
    assert hook.secret != old
    book(factories.EventFactory())
    webhooks.deliver_due()
    (got,) = receiver.received
    assert len(got.headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(got.body, got.headers)
    Webhook(hook.secret).verify(got.body, got.headers)
    # past the overlap the old secret no longer signs
    later = timezone.now() + timedelta(hours=3)
    header = webhooks.signature_header(hook, "msg_x", later, "{}")
    assert header == Webhook(hook.secret).sign("msg_x", later, "{}")
    assert EventAuditLog.objects.filter(verb="webhook_endpoint.secret_rotated").count() == 1


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_an_answer_that_says_later_is_retried_with_backoff(receiver, status):
    receiver.status = status
    endpoint(receiver.url)
    book(factories.EventFactory())
    now = timezone.now()

    report = webhooks.deliver_due(now=now)

    assert (report.delivered, report.retried, report.failed) == (0, 1, 0)
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == DeliveryState.PENDING
    assert delivery.next_attempt_at == now + timedelta(seconds=30)
    assert webhooks.deliver_due(now=now).retried == 0  # not due yet
    receiver.status = 200
    assert webhooks.deliver_due(now=now + timedelta(seconds=30)).delivered == 1
    assert WebhookDelivery.objects.get().attempts == 2
    assert list(WebhookAttempt.objects.order_by("pk").values_list("status", flat=True)) == [
        status,
        200,
    ]


def test_retry_after_is_honoured(receiver):
    receiver.status, receiver.answer_headers = 429, {"Retry-After": "600"}
    endpoint(receiver.url)
    book(factories.EventFactory())
    now = timezone.now()
    webhooks.deliver_due(now=now)
    assert WebhookDelivery.objects.get().next_attempt_at == now + timedelta(seconds=600)


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_a_refusal_stops_the_delivery(receiver, status):
    receiver.status = status
    endpoint(receiver.url)
    book(factories.EventFactory(), 2)

    report = webhooks.deliver_due()

    assert (report.delivered, report.retried, report.failed) == (0, 0, 2)
    assert states() == {"failed": 2}
    assert webhooks.deliver_due(now=timezone.now() + timedelta(days=1)).failed == 0
    assert len(receiver.received) == 2
    assert EventAuditLog.objects.filter(verb="webhook_delivery.failed").count() == 2


def test_send_again_queues_a_failed_delivery_with_the_same_id(receiver):
    receiver.status = 400
    endpoint(receiver.url)
    book(factories.EventFactory())
    webhooks.deliver_due()
    delivery = WebhookDelivery.objects.get()
    receiver.status = 200

    webhooks.send_again(delivery=delivery, actor="system")
    assert webhooks.deliver_due().delivered == 1

    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert WebhookDelivery.objects.get().state == DeliveryState.DELIVERED
    assert EventAuditLog.objects.filter(verb="webhook_delivery.requeued").count() == 1


def test_a_refused_connection_is_retried_and_stops_the_endpoints_run(free_port, receiver):
    dead = endpoint(f"http://127.0.0.1:{free_port}/hooks")
    alive = endpoint(receiver.url)
    n = webhooks.CONCURRENT + 3
    book(factories.EventFactory(), n)

    report = webhooks.deliver_due()

    # the dead endpoint got one wave of concurrent tries (the rest wait), the live one all
    tries = WebhookAttempt.objects.filter(delivery__endpoint=dead)
    assert tries.count() == webhooks.CONCURRENT
    assert all("ConnectError" in error for error in tries.values_list("error", flat=True))
    assert (report.delivered, report.retried) == (n, webhooks.CONCURRENT)
    assert WebhookDelivery.objects.filter(endpoint=alive, state="delivered").count() == n
    assert WebhookDelivery.objects.filter(endpoint=dead, state="pending").count() == n
    assert WebhookDelivery.objects.filter(endpoint=dead, attempts=0).count() == 3


def test_a_receiver_down_for_a_while_receives_everything_in_version_order(receiver):
    """Changes keep coming while the receiver answers 503; once it is back, every message
    arrives, each subject's in version order, none twice."""
    hook = endpoint(receiver.url)
    event = factories.EventFactory()
    regs = book(event, 4)
    receiver.status = 503
    now = timezone.now()
    for step in range(6):
        if step == 1:
            registrations.mark_attended(registration=regs[0], actor="system")
            registrations.cancel(registration=regs[1], actor="system")
        if step == 3:
            registrations.undo_attendance(registration=regs[0], actor="system")
            registrations.cancel(registration=regs[0], actor="system")
            regs += book(event, 2)
        webhooks.deliver_due(now=now)
        now += timedelta(minutes=10)
    assert WebhookDelivery.objects.filter(state="delivered").count() == 0
    failed_before = len(receiver.received)
    assert failed_before >= 6  # one try per run while down (the rest of the run waits)

    receiver.status = 200
    report = webhooks.deliver_due(now=now + timedelta(hours=1))

    delivered = [r.payload for r in receiver.received[failed_before:]]
    assert report.delivered == len(delivered) == WebhookDelivery.objects.count() == 9
    seen: dict[str, list[int]] = defaultdict(list)
    for payload in delivered:
        seen[payload["data"]["subject"]].append(payload["data"]["version"])
    assert seen[f"registration:{regs[0].pk}"] == [1, 2, 3]
    assert seen[f"registration:{regs[1].pk}"] == [1, 2]
    assert all(versions == sorted(versions) for versions in seen.values())
    assert len({r.headers["webhook-id"] for r in receiver.received[failed_before:]}) == 9
    hook.refresh_from_db()
    assert (hook.consecutive_failures, hook.failing_since) == (0, None)


def test_an_endpoint_failing_for_the_whole_window_is_disabled_and_resumes_when_enabled(
    receiver, settings
):
    settings.EVENT_WEBHOOK_DISABLE_HOURS = 2
    receiver.status = 500
    hook = endpoint(receiver.url)
    book(factories.EventFactory(), 2)
    start = timezone.now()
    webhooks.deliver_due(now=start)
    webhooks.deliver_due(now=start + timedelta(hours=1))
    hook.refresh_from_db()
    assert hook.enabled and hook.consecutive_failures == 2

    report = webhooks.deliver_due(now=start + timedelta(hours=2, minutes=1))

    hook.refresh_from_db()
    assert report.disabled == [hook.pk]
    assert not hook.enabled and "No success for 2 h" in hook.disabled_reason
    assert EventAuditLog.objects.filter(verb="webhook_endpoint.disabled").count() == 1
    # disabled: nothing is tried, later changes still queue
    tries = len(receiver.received)
    book(factories.EventFactory())
    assert webhooks.deliver_due(now=start + timedelta(days=1)).retried == 0
    assert len(receiver.received) == tries
    assert states() == {"pending": 3}

    receiver.status = 200
    webhooks.set_enabled(endpoint=hook, enabled=True, actor="system")
    assert webhooks.deliver_due().delivered == 3
    hook.refresh_from_db()
    assert hook.enabled and hook.disabled_at is None


@pytest.mark.django_db(transaction=True)
def test_two_deliverers_at_once_send_each_message_once_in_order(receiver):
    endpoint(receiver.url)
    event = factories.EventFactory()
    regs = book(event, 30)
    for reg in regs[::2]:
        registrations.cancel(registration=reg, actor="system")
    barrier = threading.Barrier(2)

    def run():
        try:
            barrier.wait()
            webhooks.deliver_due()
        finally:
            connection.close()  # the thread's own connection (CONN_MAX_AGE keeps it otherwise)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    ids = [r.headers["webhook-id"] for r in receiver.received]
    assert len(ids) == len(set(ids)) == 45
    seen: dict[str, list[int]] = defaultdict(list)
    for payload in receiver.payloads():
        seen[payload["data"]["subject"]].append(payload["data"]["version"])
    assert all(versions == list(range(1, len(versions) + 1)) for versions in seen.values())


@pytest.mark.django_db(transaction=True)
def test_a_deliverer_killed_in_the_middle_loses_nothing(receiver):
    """The deliverer process is killed (SIGKILL) while its POST waits for the receiver: its
    transaction dies with it, and the next run delivers every message (the interrupted one
    again: at least once)."""
    endpoint(receiver.url)
    book(factories.EventFactory(), 3)
    receiver.hold_next = True
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    worker = subprocess.Popen(  # noqa: S603 — our own interpreter and code
        [
            sys.executable,
            "-c",
            "import django; django.setup(); "
            "from seams.services import webhooks; webhooks.deliver_due()",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert receiver.held.wait(60), "the deliverer never POSTed"
        # the three go out in one concurrent wave: wait until all arrived (one is held)
        deadline = time.monotonic() + 30
        while len(receiver.received) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        sent_by_the_killed_run = len(receiver.received)
        assert sent_by_the_killed_run == 3
        worker.kill()
        worker.wait(30)
    finally:
        if worker.poll() is None:
            worker.kill()
    receiver.released.set()
    assert states() == {"pending": 3}  # nothing recorded by the killed run

    deadline = time.monotonic() + 30
    delivered = 0
    while delivered < 3 and time.monotonic() < deadline:  # until PostgreSQL ends its session
        delivered += webhooks.deliver_due().delivered
    assert delivered == 3
    assert states() == {"delivered": 3}
    ids = [r.headers["webhook-id"] for r in receiver.received]
    # what the killed run sent comes again: at least once, never lost
    assert len(set(ids)) == 3 and len(ids) == 3 + sent_by_the_killed_run


@pytest.mark.parametrize(
    "url",
    [
        "http://exa mple.com/",
        "http://a.example/\r\nX: y",
        "http://user:secret@host.example/hooks",
        "http://☃.net/",
        "ftp://files.example.org/",
        "https:///no-host",
    ],
)
def test_an_address_the_client_cannot_send_to_is_refused_and_nothing_is_written(url):
    with pytest.raises(webhooks.ValidationFailed) as refused:
        webhooks.create_endpoint(name="Bad", url=url, actor="system")
    assert (refused.value.code, refused.value.details.get("field")) == ("invalid_value", "url")
    assert not WebhookEndpoint.objects.exists()
    assert not EventAuditLog.objects.filter(verb__startswith="webhook_endpoint").exists()


def test_a_stored_address_the_client_cannot_use_fails_its_delivery_and_the_run_goes_on(receiver):
    bad = endpoint(receiver.url)
    good = endpoint(receiver.url)
    # an address stored before the verb's check knew it (the row written directly)
    WebhookEndpoint.objects.filter(pk=bad.pk).update(url="http://☃.net/hooks")
    book(factories.EventFactory(), 2)

    report = webhooks.deliver_due()

    assert (report.delivered, report.failed) == (2, 2)
    assert WebhookDelivery.objects.filter(endpoint=good, state="delivered").count() == 2
    failed = WebhookDelivery.objects.filter(endpoint=bad, state="failed")
    assert failed.count() == 2 and all(d.last_error for d in failed)
    assert webhooks.deliver_due().delivered == 0  # nothing left stuck at the head


def test_a_success_beside_a_retry_keeps_the_retry_waiting(receiver):
    """A batch answered 200 and 429 for one endpoint that was failing: the success resets
    the failure run, but the rows told to come back later keep their backoff."""
    hook = endpoint(receiver.url)
    WebhookEndpoint.objects.filter(pk=hook.pk).update(consecutive_failures=3)
    book(factories.EventFactory(), 1)
    now = timezone.now()
    webhooks.deliver_due(now=now)  # 200
    receiver.status, receiver.answer_headers = 429, {"Retry-After": "3600"}
    book(factories.EventFactory(), 1)
    WebhookEndpoint.objects.filter(pk=hook.pk).update(consecutive_failures=3)
    receiver.status = 200
    # one wave answered 200 then, for the second message, 429
    calls = iter([200, 429])

    def answer_in_turn(*args, **kwargs):
        receiver.status = next(calls, 429)
        return original(*args, **kwargs)

    original = webhooks._post
    book(factories.EventFactory(), 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(webhooks, "CONCURRENT", 1)  # one at a time: the answers in order
        patch.setattr(webhooks, "_post", answer_in_turn)
        webhooks.deliver_due(now=now)
    retried = WebhookDelivery.objects.get(endpoint=hook, state="pending")
    assert retried.next_attempt_at == now + timedelta(seconds=3600)
    hook.refresh_from_db()
    assert (hook.consecutive_failures, hook.failing_since) == (0, None)


@pytest.mark.django_db(transaction=True)
def test_send_again_does_not_wait_for_a_delivery_being_sent(receiver):
    from events.errors import Code

    endpoint(receiver.url)
    book(factories.EventFactory())
    delivery = WebhookDelivery.objects.get()
    held = threading.Event()
    done = threading.Event()

    def hold_the_row():
        from django.db import transaction

        try:
            with transaction.atomic():
                WebhookDelivery.objects.select_for_update().get(pk=delivery.pk)
                held.set()
                done.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=hold_the_row)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(webhooks.InvalidTransition) as refused:
            webhooks.send_again(delivery=delivery, actor="system")
        assert refused.value.code == Code.INVALID_TRANSITION
    finally:
        done.set()
        thread.join(10)
    assert not EventAuditLog.objects.filter(verb="webhook_delivery.requeued").exists()
