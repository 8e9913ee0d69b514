"""Outbound webhooks, the queueing half: the audit-log trigger (seams migration 0007) writes one
message per change a configured endpoint wants, in the change's own transaction, with a
version per subject; nothing when nobody listens or the change rolls back."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection, transaction

from events.models import EventAuditLog, Registration
from events.models import WaitlistState as W
from events.services import events as event_services
from events.services import registrations, waitlist
from seams.models import WEBHOOK_TYPES, WebhookDelivery, WebhookEndpoint, WebhookMessage
from seams.services import webhooks
from tests.events import factories

pytestmark = pytest.mark.django_db


def endpoint(**fields) -> WebhookEndpoint:
    fields.setdefault("name", "Host")
    fields.setdefault("url", "http://127.0.0.1:9/hooks")
    return webhooks.create_endpoint(actor="system", **fields)


def messages() -> list[tuple[str, str, int]]:
    return list(WebhookMessage.objects.order_by("pk").values_list("type", "subject", "version"))


def book(event, n: int = 1):
    return registrations.register(
        event=event,
        attendees=[{"name": f"Guest {i}", "email": f"guest{i}@example.org"} for i in range(n)],
        actor="system",
    )


def test_every_type_is_queued_once_per_change_in_order_of_its_subject():
    hook = endpoint()
    event = factories.EventFactory(seats_limited=True, seats_max=2)
    first, second = book(event, 2)
    registrations.mark_attended(registration=second, actor="system")
    joined = waitlist.join(event=event, name="Wai Ting", email="wai@example.org", actor="public")
    entry = joined.entry
    registrations.cancel(registration=first, actor="system")  # a seat for the waiting list
    waitlist.offer_freed_seats(event=event)
    entry.refresh_from_db()
    assert entry.state == W.OFFERED
    waitlist.expire_offers(now=entry.expires_at + timedelta(seconds=1))
    event_services.update_event(event=event, actor="system", note="not a date")
    event_services.update_event(
        event=event,
        actor="system",
        date_begin=event.date_begin + timedelta(days=7),
        date_end=event.date_end + timedelta(days=7),
    )
    event_services.cancel_event(event=event, actor="system")

    r1, r2, w = f"registration:{first.pk}", f"registration:{second.pk}", f"waitlist:{entry.pk}"
    assert messages() == [
        ("registration.created", r1, 1),
        ("registration.created", r2, 1),
        ("registration.attended", r2, 2),
        ("registration.cancelled", r1, 2),
        ("waitlist.offered", w, 1),
        ("waitlist.expired", w, 2),
        ("event.postponed", f"event:{event.pk}", 1),
        ("event.cancelled", f"event:{event.pk}", 2),
    ]
    assert {t for t, _, _ in messages()} == set(WEBHOOK_TYPES)
    # one delivery per message to the one endpoint, due now
    assert WebhookDelivery.objects.filter(endpoint=hook, state="pending").count() == 8


def test_the_payload_is_the_state_after_the_change_with_its_version():
    endpoint()
    event = factories.EventFactory()
    (reg,) = book(event)
    registrations.cancel(registration=reg, actor="system")
    created, cancelled = WebhookMessage.objects.order_by("pk")
    assert created.payload["type"] == "registration.created"
    assert created.payload["data"]["registration"]["state"] == reg.state
    assert created.payload["data"]["registration"]["email"] == "guest0@example.org"
    assert "barcode" not in created.payload["data"]["registration"]  # the entry credential
    assert cancelled.payload["data"]["registration"]["state"] == "cancel"
    assert cancelled.payload["data"]["registration"]["cancel_source"] == "staff"
    assert (cancelled.payload["data"]["subject"], cancelled.payload["data"]["version"]) == (
        f"registration:{reg.pk}",
        2,
    )
    assert created.msg_id.startswith("msg_") and created.msg_id != cancelled.msg_id


def test_a_postponed_event_tells_its_previous_dates():
    endpoint(event_types=["event.postponed"])
    event = factories.EventFactory()
    begin = event.date_begin
    event_services.update_event(event=event, actor="system", date_end=event.date_end + timedelta(1))
    (message,) = WebhookMessage.objects.all()
    data = message.payload["data"]
    assert data["previous"]["date_begin"] == data["event"]["date_begin"]  # unchanged
    assert data["previous"]["date_end"] != data["event"]["date_end"]
    assert data["previous"]["date_begin"].startswith(begin.date().isoformat())


def test_a_rolled_back_change_queues_nothing():
    endpoint()
    event = factories.EventFactory()
    with pytest.raises(RuntimeError), transaction.atomic():
        book(event, 3)
        assert WebhookMessage.objects.count() == 3  # queued inside the transaction
        raise RuntimeError("the caller's transaction fails after the booking")
    assert WebhookMessage.objects.count() == 0
    assert WebhookDelivery.objects.count() == 0


def test_nothing_is_written_when_no_endpoint_wants_the_change():
    event, other = factories.EventFactory(), factories.EventFactory()
    book(event)  # no endpoint at all
    endpoint(event=other)  # another event's endpoint
    endpoint(event_types=["event.cancelled"])  # every event, another type
    book(event)
    assert WebhookMessage.objects.count() == 0
    assert WebhookDelivery.objects.count() == 0


def test_each_endpoint_that_wants_a_message_gets_its_own_delivery():
    event = factories.EventFactory()
    everything, this_event = endpoint(), endpoint(event=event)
    endpoint(event_types=["registration.cancelled"])
    (reg,) = book(event)
    (message,) = WebhookMessage.objects.all()
    assert set(message.deliveries.values_list("endpoint", flat=True)) == {
        everything.pk,
        this_event.pk,
    }
    assert reg.pk == int(message.subject.split(":")[1])


def test_a_bulk_statement_numbers_each_subjects_messages_in_audit_order():
    """Several audit rows of one subject in one INSERT: versions follow the rows' order."""
    endpoint()
    event = factories.EventFactory()
    (reg,) = book(event)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO events_eventauditlog "
            "(at, actor_type, actor_id, actor_label, event_id, registration_id, verb, data) "
            "SELECT now(), 'system', '', 'system', %s, %s, v, '{}' "
            "FROM unnest(ARRAY['registration.attended', 'registration.cancelled']) AS v",
            [event.pk, reg.pk],
        )
    assert messages()[1:] == [
        ("registration.attended", f"registration:{reg.pk}", 2),
        ("registration.cancelled", f"registration:{reg.pk}", 3),
    ]


def nudges(run, capture, *, fresh: bool = True) -> list:
    """The webhook delivery nudges `run` asked for, its after-commit callbacks run (`fresh`:
    as the first change of the process's second)."""
    if fresh:
        webhooks._last_nudge[0] = float("-inf")
    with mock.patch.object(webhooks.nudge, "after_commit") as nudged:
        with capture(execute=True):
            run()
    return [c.kwargs for c in nudged.call_args_list if c.kwargs["key"] == webhooks.NUDGE_KEY]


def test_the_booking_and_the_audit_helper_nudge_delivery_after_commit(
    django_capture_on_commit_callbacks,
):
    capture = django_capture_on_commit_callbacks
    endpoint()
    event = factories.EventFactory()
    asked = {"key": webhooks.NUDGE_KEY, "task": webhooks.DELIVERY_TASK}
    assert nudges(lambda: book(event), capture) == [asked]
    (reg,) = Registration.objects.filter(event=event)
    assert nudges(lambda: registrations.cancel(registration=reg, actor="x"), capture) == [asked]
    # a change no message is made of
    assert nudges(lambda: event_services.publish(event=event, actor="x"), capture) == []
    assert nudges(lambda: event_services.cancel_event(event=event, actor="x"), capture) == [asked]


def test_without_an_endpoint_the_booking_asks_for_no_nudge(django_capture_on_commit_callbacks):
    event = factories.EventFactory()
    assert nudges(lambda: book(event), django_capture_on_commit_callbacks) == []
    assert not EventAuditLog.objects.filter(verb__startswith="webhook").exists()


def test_every_message_the_trigger_writes_matches_its_documented_schema():
    """The OpenAPI description's `webhooks` entry of each type (seams/webhook_schemas.py) holds
    the messages the trigger really writes: one of each type, validated with the document's own
    components."""
    from jsonschema import Draft202012Validator

    from events import openapi

    document = openapi.document()
    assert set(document["webhooks"]) == set(WEBHOOK_TYPES)
    test_every_type_is_queued_once_per_change_in_order_of_its_subject()
    seen = set()
    for message in WebhookMessage.objects.order_by("pk"):
        post = document["webhooks"][message.type]["post"]
        schema = post["requestBody"]["content"]["application/json"]["schema"]
        validator = Draft202012Validator(
            {**schema, "components": document["components"]},
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
        errors = [e.message for e in validator.iter_errors(message.payload)]
        assert errors == [], (message.type, errors)
        seen.add(message.type)
    assert seen == set(WEBHOOK_TYPES)
    # the schemas are closed: a field the trigger adds without its description fails here
    extra = dict(message.payload, data={**message.payload["data"], "surprise": 1})
    assert list(validator.iter_errors(extra))


def test_a_rush_of_bookings_nudges_once_per_second_and_process(django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    endpoint()
    event = factories.EventFactory()
    assert len(nudges(lambda: book(event), capture)) == 1
    assert nudges(lambda: book(event), capture, fresh=False) == []  # within the second
    webhooks._last_nudge[0] -= webhooks.NUDGE_EVERY  # a second later
    assert len(nudges(lambda: book(event), capture, fresh=False)) == 1
    assert WebhookMessage.objects.filter(type="registration.created").count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_change_neither_waits_for_nor_fails_on_an_endpoint_being_deleted():
    """An endpoint locked by its delete (FOR UPDATE, held here by another connection) gets no
    delivery, and the booking neither waits for the delete nor fails on the foreign key; an
    endpoint a staff verb holds (FOR NO KEY UPDATE) still gets its delivery."""
    import threading

    deleting, editing = endpoint(name="Deleting"), endpoint(name="Editing")
    event = factories.EventFactory()
    held, done = threading.Event(), threading.Event()

    def hold():
        try:
            with transaction.atomic():
                WebhookEndpoint.objects.select_for_update().get(pk=deleting.pk)
                WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=editing.pk)
                held.set()
                done.wait(20)
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        (reg,) = book(event)  # would wait 20 s (then fail on the FK) without SKIP LOCKED
    finally:
        done.set()
        thread.join(20)
    (message,) = WebhookMessage.objects.filter(subject=f"registration:{reg.pk}")
    assert list(message.deliveries.values_list("endpoint", flat=True)) == [editing.pk]
