"""Outbound webhook property: whatever the changes and however the receiver fails, once it
answers again every message arrives, each subject's in version order, and nothing is lost.

Hypothesis draws a sequence of steps, each a change (a booking, or a transition of a drawn
registration: cancel, mark attended, undo attendance, confirm, reset to draft — refused ones
write nothing), the receiver's answer from then on (200, 503, 429, 400, or no listener at all)
and a delivery run at a drawn later clock. At the end the receiver answers 200 and delivery
runs until nothing is due. Then:
- every message a refusal (400) did not stop is delivered, and the receiver got each of those;
- per subject, the versions arrived in non-decreasing order (a retry repeats a version, never
  goes back), and the first arrivals of the delivered versions are strictly increasing;
- the messages are exactly the changes the audit log holds for the subscribed verbs.
"""

from __future__ import annotations

import socket
from collections import defaultdict
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.errors import Code, DomainError
from events.models import EventAuditLog, Registration
from events.services import registrations
from seams.models import WebhookDelivery, WebhookMessage
from seams.services import webhooks
from tests.events import factories
from tests.seams.receiver import Receiver

pytestmark = pytest.mark.django_db
TRANSITIONS = ("cancel", "mark_attended", "undo_attendance", "confirm", "reset_to_draft")
SOURCE = ("registration.created", "registration.cancelled", "registration.attended")

# Each step: a change (a booking of 1–3, or a transition of a drawn registration), then the
# receiver's answer from now on (None: nothing listens), then a delivery run that many seconds
# later on the clock.
steps = st.lists(
    st.tuples(
        st.one_of(
            st.tuples(st.just("book"), st.integers(1, 3)),
            st.tuples(st.sampled_from(TRANSITIONS), st.integers(0, 20)),
        ),
        st.sampled_from([200, 503, 429, 400, None]),
        st.integers(0, 3600),
    ),
    min_size=3,
    max_size=15,
)


@pytest.fixture
def receiver():
    """One receiver for every example of the test (its shutdown takes up to half a second)."""
    server = Receiver()
    yield server
    server.stop()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=steps)
def test_every_message_arrives_in_version_order_per_subject(receiver, steps):
    receiver.received.clear()
    receiver.status = 200
    dead_url = f"http://127.0.0.1:{_closed_port()}/hooks"
    # The examples share the database: each has its own event, and its endpoint listens to
    # that event only.
    event = factories.EventFactory()
    endpoint = webhooks.create_endpoint(
        name="Host", url=receiver.url, actor="system", event=event, event_types=list(SOURCE)
    )
    regs: list[Registration] = []
    clock = timezone.now()
    for (kind, value), answer, seconds in steps:
        if kind == "book":
            regs += registrations.register(
                event=event, attendees=[{"name": f"G{i}"} for i in range(value)], actor="x"
            )
        elif regs:
            reg = Registration.objects.get(pk=regs[value % len(regs)].pk)
            written = (EventAuditLog.objects.count(), WebhookMessage.objects.count())
            try:
                getattr(registrations, kind)(registration=reg, actor="x")
            except DomainError as refused:
                # a refused transition writes nothing, so no message either
                assert refused.code == Code.INVALID_TRANSITION
                assert (EventAuditLog.objects.count(), WebhookMessage.objects.count()) == written
        url = dead_url if answer is None else receiver.url
        if answer is not None:
            receiver.status = answer
        if url != endpoint.url:
            endpoint = webhooks.update_endpoint(endpoint=endpoint, actor="x", url=url)
        clock += timedelta(seconds=seconds)
        webhooks.deliver_due(now=clock)

    # the receiver is back for good
    receiver.status = 200
    if endpoint.url != receiver.url:
        webhooks.update_endpoint(endpoint=endpoint, actor="x", url=receiver.url)
    for _ in range(50):
        clock += timedelta(hours=2)
        webhooks.deliver_due(now=clock)
        if not WebhookDelivery.objects.filter(endpoint=endpoint, state="pending").exists():
            break

    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint)
    assert not deliveries.filter(state="pending").exists()
    audited = EventAuditLog.objects.filter(
        verb__in=SOURCE, registration__in=[r.pk for r in regs]
    ).count()
    assert WebhookMessage.objects.filter(event=event).count() == audited
    delivered = set(deliveries.filter(state="delivered").values_list("message__msg_id", flat=True))
    arrived = [r.headers["webhook-id"] for r in receiver.received]
    assert delivered <= set(arrived)

    order: dict[str, list[int]] = defaultdict(list)
    for payload in receiver.payloads():
        order[payload["data"]["subject"]].append(payload["data"]["version"])
    for subject, versions in order.items():
        assert versions == sorted(versions), (subject, versions)
