"""Delivery of the SMS outbox to a real local HTTP gateway (pytest-httpserver) (spec.md §11,
spec-overlay.md §4): sent once, retried with backoff on 5xx, 429, 408 and timeouts, failed for
good on another 4xx.

Time is passed to `deliver_outbox(now=…)`, so a backed-off row is due exactly when its
`next_attempt_at` says, without waiting.
"""

from __future__ import annotations

import json
import logging
import threading

import pytest
from django.utils import timezone
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from events.errors import Code
from events.models import EventAuditLog
from events.services.delivery import backoff
from sms.models import SmsOutbox
from sms.services import delivery
from sms.services import retry as retry_sms
from tests.events import factories as event_factories
from tests.sms.factories import SmsOutboxFactory
from tests.sms.gateway import TOKEN, bearer

pytestmark = pytest.mark.django_db


def payload(row: SmsOutbox) -> dict:
    return {"to": row.to, "body": row.body, "reference": row.reference}


def fresh(row: SmsOutbox) -> SmsOutbox:
    return SmsOutbox.objects.get(pk=row.pk)


def test_a_2xx_answer_marks_the_sms_sent_after_one_post_with_json_and_bearer(gateway):
    row = SmsOutboxFactory(to="+32470123456", body="Summit starts at 9:00 (Europe/Brussels)")
    gateway.expect_oneshot_request(
        "/sms", method="POST", headers=bearer(), json=payload(row)
    ).respond_with_json({"id": "gw-1"}, status=202)
    report = delivery.deliver_outbox()
    gateway.check_assertions()
    row = fresh(row)
    assert (row.state, row.attempts, row.last_error) == ("sent", 1, "")
    assert row.sent_at is not None
    assert (report.sent, report.retried, report.failed) == (1, 0, 0)
    assert len(gateway.log) == 1
    assert delivery.deliver_outbox().sent == 0  # a sent SMS is never posted again
    assert len(gateway.log) == 1


def test_503_twice_then_200_is_sent_once_after_three_attempts_with_backoff(gateway):
    row = SmsOutboxFactory()
    for _ in range(2):
        gateway.expect_ordered_request("/sms", method="POST", headers=bearer()).respond_with_data(
            "try later", status=503
        )
    gateway.expect_ordered_request("/sms", method="POST", headers=bearer()).respond_with_json({})
    start = timezone.now()

    first = delivery.deliver_outbox(now=start)
    row = fresh(row)
    assert (first.retried, row.state, row.attempts) == (1, "queued", 1)
    assert row.next_attempt_at == start + backoff(1)
    assert row.last_error == "HTTP 503: try later"

    assert delivery.deliver_outbox(now=start + backoff(1) / 2).retried == 0  # not due yet
    assert len(gateway.log) == 1

    second_at = row.next_attempt_at
    delivery.deliver_outbox(now=second_at)
    row = fresh(row)
    assert (row.state, row.attempts, row.next_attempt_at) == (
        "queued",
        2,
        second_at + backoff(2),
    )
    assert backoff(2) == 2 * backoff(1)  # exponential

    third = delivery.deliver_outbox(now=row.next_attempt_at)
    row = fresh(row)
    assert (third.sent, row.state, row.attempts, row.last_error) == (1, "sent", 3, "")
    gateway.check_assertions()
    assert len(gateway.log) == 3
    assert delivery.deliver_outbox(now=row.next_attempt_at + backoff(8)).sent == 0
    assert len(gateway.log) == 3


def test_a_400_is_a_permanent_failure_with_the_body_recorded_and_never_retried(gateway):
    registration = event_factories.RegistrationFactory(phone="+32470123456")
    row = SmsOutboxFactory(registration=registration)
    gateway.expect_request("/sms", method="POST").respond_with_data(
        '{"error": "number not reachable"}', status=400
    )
    start = timezone.now()
    report = delivery.deliver_outbox(now=start)
    row = fresh(row)
    assert (report.failed, row.state, row.attempts) == (1, "failed", 1)
    assert row.last_error == 'HTTP 400: {"error": "number not reachable"}'
    audit = EventAuditLog.objects.get(verb="sms_message.failed")
    assert audit.event_id == registration.event_id
    assert audit.data["reference"] == row.reference
    # Never retried, however late the next delivery runs.
    assert delivery.deliver_outbox(now=start + backoff(20)).failed == 0
    assert len(gateway.log) == 1


def test_429_and_408_mean_later_not_never(gateway):
    rows = [SmsOutboxFactory(), SmsOutboxFactory()]
    gateway.expect_ordered_request("/sms").respond_with_data("slow down", status=429)
    gateway.expect_ordered_request("/sms").respond_with_data("", status=408)
    report = delivery.deliver_outbox()
    assert report.retried == 2
    assert {fresh(row).state for row in rows} == {"queued"}


def test_gateway_down_keeps_the_sms_queued_and_delivers_it_when_it_comes_back(
    settings, gateway, free_port
):
    """Connection refused: the first row is retried with backoff, the rest of the batch is not
    tried against a dead gateway; once the gateway listens again every row is delivered."""
    down = HTTPServer(host="127.0.0.1", port=free_port)  # not started: nothing listens
    settings.EVENT_SMS_GATEWAY_URL = f"http://127.0.0.1:{free_port}/sms"
    first, second = SmsOutboxFactory(), SmsOutboxFactory()
    start = timezone.now()
    report = delivery.deliver_outbox(now=start)
    assert (report.sent, report.retried, report.failed) == (0, 1, 0)
    first, second = fresh(first), fresh(second)
    assert (first.state, first.attempts) == ("queued", 1)
    assert first.last_error.startswith("ConnectError")
    assert first.next_attempt_at == start + backoff(1)
    assert (second.state, second.attempts) == ("queued", 0)  # not tried

    down.expect_request("/sms", method="POST", headers=bearer()).respond_with_json({})
    down.start()
    try:
        later = delivery.deliver_outbox(now=first.next_attempt_at)
    finally:
        log = list(down.log)
        down.stop()
    assert later.sent == 2
    assert sorted(json.loads(request.data)["reference"] for request, _ in log) == sorted(
        [first.reference, second.reference]
    )
    assert {fresh(first).state, fresh(second).state} == {"sent"}
    assert fresh(first).attempts == 2


def test_a_timeout_is_retried_like_a_5xx(gateway, monkeypatch):
    release = threading.Event()

    def hang(request: Request) -> Response:
        release.wait(10)
        return Response("late", status=200)

    monkeypatch.setattr(delivery, "TIMEOUT_SECONDS", (0.3, 0.3))
    gateway.expect_request("/sms").respond_with_handler(hang)
    row = SmsOutboxFactory()
    try:
        report = delivery.deliver_outbox()
    finally:
        release.set()
    row = fresh(row)
    assert (report.retried, row.state, row.attempts) == (1, "queued", 1)
    assert row.last_error.startswith("ReadTimeout")


def test_the_bearer_token_is_sent_and_never_logged(gateway, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    sent, busy, refused = SmsOutboxFactory(), SmsOutboxFactory(), SmsOutboxFactory()
    seen_headers: list[str] = []

    def answer(request: Request) -> Response:
        seen_headers.append(request.headers.get("Authorization", ""))
        reference = request.get_json()["reference"]
        status = {sent.reference: 200, busy.reference: 503, refused.reference: 400}[reference]
        return Response(f"status {status}", status=status)

    gateway.expect_request("/sms").respond_with_handler(answer)
    delivery.deliver_outbox()
    assert seen_headers == [f"Bearer {TOKEN}"] * 3
    assert [fresh(r).state for r in (sent, busy, refused)] == ["sent", "queued", "failed"]
    assert caplog.records  # the retry and the failure were logged …
    assert TOKEN not in caplog.text  # … without the token
    assert all(TOKEN not in fresh(r).last_error for r in (busy, refused))


def test_an_unset_gateway_url_refuses_to_deliver_and_posts_nothing(gateway, settings):
    row = SmsOutboxFactory()
    settings.EVENT_SMS_GATEWAY_URL = ""
    with pytest.raises(Exception, match="EVENT_SMS_GATEWAY_URL"):
        delivery.deliver_outbox()
    assert (fresh(row).state, fresh(row).attempts) == ("queued", 0)
    assert len(gateway.log) == 0


def test_delivery_stops_at_the_cron_limit_and_nudges_itself(gateway, settings, monkeypatch):
    settings.EVENT_MAIL_BATCH = 2
    settings.EVENT_MAIL_CRON_LIMIT = 3
    nudged: list[tuple[str, str]] = []
    monkeypatch.setattr(
        delivery.nudge, "after_commit", lambda *, key, task: nudged.append((key, task))
    )
    gateway.expect_request("/sms").respond_with_json({})
    rows = [SmsOutboxFactory() for _ in range(5)]
    report = delivery.deliver_outbox()
    assert (report.sent, report.work_remaining) == (3, True)
    assert nudged == [("sms:nudge:delivery", "sms.deliver_outbox")]
    assert [fresh(r).state for r in rows].count("sent") == 3


# --- the staff re-queue ---------------------------------------------------------------------


def test_retry_requeues_a_failed_sms_and_it_is_delivered(gateway, actor):
    row = SmsOutboxFactory(state="failed", attempts=1, last_error="HTTP 400: bad")
    retried = retry_sms(message=row, actor=actor)
    assert (retried.state, fresh(row).state) == ("queued", "queued")
    audit = EventAuditLog.objects.get(verb="sms_message.requeued")
    assert audit.data["state"] == ["failed", "queued"]
    gateway.expect_request("/sms", headers=bearer()).respond_with_json({})
    assert delivery.deliver_outbox().sent == 1
    assert (fresh(row).state, fresh(row).attempts) == ("sent", 2)


def test_retry_refuses_a_sent_sms_and_writes_nothing(actor):
    row = SmsOutboxFactory(state="sent", attempts=1, sent_at=timezone.now())
    audit_rows = EventAuditLog.objects.count()
    with pytest.raises(Exception) as refused:
        retry_sms(message=row, actor=actor)
    assert refused.value.code == Code.INVALID_TRANSITION
    assert fresh(row).state == "sent"
    assert EventAuditLog.objects.count() == audit_rows
